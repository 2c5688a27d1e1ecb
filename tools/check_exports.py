#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_exports.py - libtide.a and libtide.so define exactly tide's public names.

The public names are read from the source: every function or variable declared
TIDE_EXPORT and every name given to TIDE_ALIAS(name, target), in the files under
src/.  The check fails, one line per name, when
  - libtide.a (src/.libs/libtide.a) defines a global that is not public: an internal
    name a program linked statically would collide with;
  - libtide.a or libtide.so lacks a public name;
  - libtide.so exports (nm -D --defined-only) a name that is not public.

Run from the build directory (make check does); srcdir comes from the environment
(the test harness sets it) or --srcdir, nm from $NM.  Exit 0 = pass, 1 = fail,
77 = skipped (neither library was built), 99 = could not run.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys


def strip_c(text):
    """Source text without comments, string literals and preprocessor lines."""
    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: ' ' if m.group(0)[0] in '/' else '""', text, flags=re.S)
    text = re.sub(r'\\\n', ' ', text)
    return '\n'.join(l for l in text.split('\n') if not l.lstrip().startswith('#'))


def drop_attributes(decl):
    """decl with every __attribute__((...)) removed (balanced parentheses)."""
    out = []
    i = 0
    while True:
        j = decl.find('__attribute__', i)
        if j < 0:
            out.append(decl[i:])
            return ''.join(out)
        out.append(decl[i:j])
        k = decl.find('(', j)
        depth = 0
        while k < len(decl):
            depth += decl[k] == '('
            depth -= decl[k] == ')'
            k += 1
            if depth == 0:
                break
        i = k


def public_names(srcdir):
    names = {}
    src = os.path.join(srcdir, 'src')
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(('.c', '.h')):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, srcdir)
            with open(path, encoding='utf-8', errors='replace') as fh:
                text = strip_c(fh.read())
            for m in re.finditer(r'\bTIDE_EXPORT\b([^;{]*)', text):
                decl = drop_attributes(m.group(1))
                call = re.search(r'([A-Za-z_]\w*)\s*\(', decl)
                if call:
                    name = call.group(1)
                else:  # a variable: the last name before = or [
                    ids = re.findall(r'[A-Za-z_]\w*', re.split(r'[=\[]', decl)[0])
                    name = ids[-1] if ids else None
                if name:
                    names.setdefault(name, rel)
            for m in re.finditer(r'\bTIDE_ALIAS\s*\(\s*([A-Za-z_]\w*)\s*,', text):
                names.setdefault(m.group(1), rel)
    return names


def nm_defined(nm, args, path):
    """{name: member} of the global defined symbols nm lists for path."""
    out = subprocess.run(nm + args + [path], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    syms = {}
    member = os.path.basename(path)
    for line in out.splitlines():
        if line.endswith(':') and ' ' not in line:
            member = line[:-1]
            continue
        f = line.split()
        if len(f) >= 3 and f[1] not in 'Uwv':
            syms.setdefault(f[2], member)
    return syms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--srcdir', default=os.environ.get('srcdir', os.path.join(os.path.dirname(__file__), '..')))
    ap.add_argument('--builddir', default='.')
    opt = ap.parse_args()
    nm = shlex.split(os.environ.get('NM') or 'nm')
    archive = os.path.join(opt.builddir, 'src', '.libs', 'libtide.a')
    shared = os.path.join(opt.builddir, 'src', '.libs', 'libtide.so')

    public = public_names(opt.srcdir)
    if len(public) < 10 or 'malloc' not in public or 'tide_malloc' not in public:
        print('check_exports: found only %d public names in %s/src (TIDE_EXPORT, TIDE_ALIAS): '
              'has the way they are declared changed?' % (len(public), opt.srcdir))
        return 99
    libs = [p for p in (archive, shared) if os.path.exists(p)]
    if not libs:
        print('check_exports: SKIP: neither %s nor %s exists' % (archive, shared))
        return 77

    bad = 0
    if os.path.exists(archive):
        syms = nm_defined(nm, ['-g', '--defined-only'], archive)
        for name in sorted(set(syms) - set(public)):
            print('%s: %s is global (in %s) but not public' % (archive, name, syms[name]))
            bad += 1
        for name in sorted(set(public) - set(syms)):
            print('%s: public name %s (%s) is not a global of the archive' % (archive, name, public[name]))
            bad += 1
    if os.path.exists(shared):
        syms = nm_defined(nm, ['-D', '--defined-only'], shared)
        for name in sorted(set(syms) - set(public)):
            print('%s: %s is exported but not public' % (shared, name))
            bad += 1
        for name in sorted(set(public) - set(syms)):
            print('%s: public name %s (%s) is not exported' % (shared, name, public[name]))
            bad += 1
    if bad:
        print('check_exports: FAIL: %d names; the public ones are %d (TIDE_EXPORT and TIDE_ALIAS in src/)'
              % (bad, len(public)))
        return 1
    print('check_exports: ok: the globals of %s are exactly the %d public names' % (' and '.join(libs), len(public)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
