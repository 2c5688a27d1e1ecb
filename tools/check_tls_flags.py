#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_tls_flags.py - no code tests the flags of an add that the linker may rewrite.

An initial-exec TLS address is computed as `mov %fs:0,%reg; add x@gottpoff(%rip),%reg`
(relocation R_X86_64_GOTTPOFF).  Where x is defined in the executable, the linker (GNU ld,
gold and lld alike) turns that add into `lea x@tpoff(%reg),%reg`, which sets no flags.
GCC 12 does not know it: with -fsanitize=undefined it may test the address for NULL with
the add's own flags (its *add<mode>_2 and *add<mode>_3 patterns, `add ...; je`).  Linked
into an executable (tide's tests link libtide statically; so does any program built with
libtide.a), the je then reads the flags of whatever came before the lea, and UBSan reports
"member access within null pointer" of an address that is not null when those flags say
equal: test/unit/tcache saw it when the thread's capacities added up to exactly its
budget, the compare just before.

The check fails, one line per place, where an add with a GOTTPOFF relocation is followed
by an instruction that reads the flags (a conditional jump, setcc, cmovcc, adc, sbb)
before one that writes them.  A test that takes the address of a TLS variable keeps it
behind an empty asm (test/unit/tcache.c's this_cache) so that GCC never recomputes and
tests it.

Objects: the files given as arguments (objects or archives), else every *.o under the
current directory (the build tree; make check runs it there), not descending into a
nested build tree (a directory with its own config.status, such as the UBSan copy, which
checks itself).  objdump comes from $OBJDUMP.

Exit status: 0 = none found, 1 = found (listed), 77 = skipped (not x86-64, or no
objdump), 99 = could not check.
"""
import os
import platform
import re
import shutil
import subprocess
import sys

INSN = re.compile(r'^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$')
RELOC = re.compile(r'^\s+[0-9a-f]+: (R_X86_64_\S+)\s+(\S+)')
FUNC = re.compile(r'^[0-9a-f]+ <(.*)>:$')
MEMBER = re.compile(r'^In archive .*|^(\S+):\s+file format')
# Instructions that read the arithmetic flags, and ones that write them all (or leave the
# fall-through path); any other instruction (mov, lea, push, pop, nop...) is looked past.
READS = re.compile(r'^(j(?!mp)[a-z]+|set[a-z]+|cmov[a-z]+|adc[a-z]?|sbb[a-z]?|pushf[a-z]?|lahf)$')
WRITES = re.compile(r'^(add|sub|cmp|test|and|or|xor|inc|dec|neg|sh[lr]|sa[lr]|ro[lr]|imul|mul|div|idiv|bt[a-z]?|'
                    r'bs[fr]|tzcnt|lzcnt|popcnt|u?comis[sd]|v?u?comis[sd]|sahf|popf[a-z]?|call|ret|jmp|ud2|hlt)[a-z]?$')
WINDOW = 16  # instructions looked at after the add


def objects(args):
    if args:
        return args
    found = []
    for root, dirs, files in os.walk('.'):
        if root != '.' and 'config.status' in files:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d == '.libs' or not d.startswith('.'))
        found += [os.path.join(root, f) for f in sorted(files) if f.endswith('.o')]
    return found


def scan(objdump, path):
    """The places in PATH where an add of a GOTTPOFF is followed by a flag read."""
    out = subprocess.run([objdump, '-dr', '--no-show-raw-insn', path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f'{objdump} -dr {path}: {out.stderr.strip()}')
    insns = []  # [function, address, mnemonic, operands, relocation] or None between functions
    func = '?'
    for line in out.stdout.splitlines():
        m = FUNC.match(line)
        if m:
            func = m.group(1)
            insns.append(None)
            continue
        m = RELOC.match(line)
        if m:
            if insns and insns[-1]:
                insns[-1][4] = m.group(1) + ' ' + m.group(2)
            continue
        m = INSN.match(line)
        if m:
            insns.append([func, m.group(1), m.group(2), m.group(3).split('#')[0].strip(), None])
        elif MEMBER.match(line):
            insns.append(None)
    found = []
    for i, ins in enumerate(insns):
        if not ins or not ins[4] or 'GOTTPOFF' not in ins[4] or not ins[2].startswith('add'):
            continue
        for nxt in insns[i + 1:i + 1 + WINDOW]:
            if nxt is None or WRITES.match(nxt[2]):
                break
            if READS.match(nxt[2]):
                found.append(f'{path}: {ins[0]}+0x{ins[1]}: "{ins[2]} {ins[3]}" ({ins[4]}), then '
                             f'0x{nxt[1]}: "{nxt[2]} {nxt[3]}" reads its flags')
                break
    return found


def main():
    if platform.machine() not in ('x86_64', 'amd64'):
        print('check_tls_flags: not x86-64: skipped')
        return 77
    objdump = os.environ.get('OBJDUMP') or 'objdump'
    if not shutil.which(objdump):
        print(f'check_tls_flags: {objdump} not found: skipped')
        return 77
    paths = objects(sys.argv[1:])
    found = []
    try:
        for p in paths:
            found += scan(objdump, p)
    except (OSError, RuntimeError) as e:
        print(f'check_tls_flags: {e}', file=sys.stderr)
        return 99
    for f in found:
        print(f)
    if found:
        print(f'check_tls_flags: FAILED: {len(found)} flag reads of an add x@gottpoff(%rip), which the linker may '
              'turn into a lea that sets no flags (see this script\'s help)')
        return 1
    print(f'check_tls_flags: {len(paths)} objects, no flag read of an add x@gottpoff(%rip)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
