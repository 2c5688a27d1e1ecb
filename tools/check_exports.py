#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_exports.py - what libtide.a and libtide.so define, version and need.

The public names are read from the source: every function or variable declared
TIDE_EXPORT and every name given to TIDE_ALIAS(name, target), in the files under
src/.  Test hooks are declared TIDE_TEST_EXPORT: they belong only to the builds with
fault injection (TIDE_FAULT_INJECTION=yes in the environment; make check sets it).
The check fails, one line per name, when
  - libtide.a (src/.libs/libtide.a) defines a global that is not public: an internal
    name a program linked statically would collide with;
  - libtide.a or libtide.so lacks a public name;
  - libtide.so exports (nm -D --defined-only) a name that is not public;
  - a test hook is in a build without fault injection, or missing from one with it;
  - the version script (src/libtide.ver) and the sources disagree: it must list every
    public tide_ name and nothing else, and libtide.so must export each under the
    script's version (readelf --dyn-syms) and every other name (the malloc family, C++'s
    operators, test hooks) without a version, since a versioned malloc or _Znwm would
    no longer replace libc's or libstdc++'s;
  - libtide.so needs (readelf -d, NEEDED) a library other than libc (and libpthread),
    or refers to a symbol outside glibc that is not weak (libstdc++'s, the unwinder's:
    a strong one would stop libtide from loading into a C program); a build with
    UBSan (TIDE_UBSAN=yes; make check sets it) may need UBSan's runtime besides.

Run from the build directory (make check does); srcdir comes from the environment
(the test harness sets it) or --srcdir, nm and readelf from $NM and $READELF.  Exit
0 = pass, 1 = fail, 77 = skipped (neither library was built), 99 = could not run.
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


def public_names(srcdir, marker='TIDE_EXPORT'):
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
            for m in re.finditer(r'\b%s\b([^;{]*)' % marker, text):
                decl = drop_attributes(m.group(1))
                call = re.search(r'([A-Za-z_]\w*)\s*\(', decl)
                if call:
                    name = call.group(1)
                else:  # a variable: the last name before = or [
                    ids = re.findall(r'[A-Za-z_]\w*', re.split(r'[=\[]', decl)[0])
                    name = ids[-1] if ids else None
                if name:
                    names.setdefault(name, rel)
            if marker != 'TIDE_EXPORT':
                continue
            for m in re.finditer(r'\bTIDE_ALIAS\s*\(\s*([A-Za-z_]\w*)\s*,', text):
                names.setdefault(m.group(1), rel)
    return names


def version_script(path):
    """{name: version node} of the global names a GNU ld version script lists."""
    with open(path, encoding='utf-8') as fh:
        text = re.sub(r'/\*.*?\*/|#[^\n]*', ' ', fh.read(), flags=re.S)
    names = {}
    for m in re.finditer(r'([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*[A-Za-z_\w.]*\s*;', text, flags=re.S):
        node, body = m.group(1), m.group(2)
        scope = 'global'
        for item in re.split(r'[;\s]+', body):
            if item.endswith(':'):
                scope = item[:-1]
            elif item and scope == 'global':
                names[item] = node
    return names


def dynamic_symbols(readelf, path):
    """{name: (version or '', defined, weak)} of libtide.so's dynamic symbols."""
    out = subprocess.run(readelf + ['--dyn-syms', '-W', path], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(':').isdigit():
            continue
        name, version = re.match(r'([^@]*)(?:@+(\S+))?', f[7]).groups()
        if name:
            syms[name] = (version or '', f[6] != 'UND', f[4] == 'WEAK')
    return syms


def needed(readelf, path):
    out = subprocess.run(readelf + ['-d', '-W', path], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    return re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', out)


def nm_defined(nm, args, path):
    """{name: member} of the global defined symbols nm lists for path (a name without the
    version nm may append; the absolute symbols that name version nodes left out)."""
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
            name = f[2].split('@')[0]
            if f[1] == 'A' and f[0].strip('0') == '' and '@' not in f[2]:
                continue  # a version node (TIDE_0.1)
            syms.setdefault(name, member)
    return syms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--srcdir', default=os.environ.get('srcdir', os.path.join(os.path.dirname(__file__), '..')))
    ap.add_argument('--builddir', default='.')
    opt = ap.parse_args()
    nm = shlex.split(os.environ.get('NM') or 'nm')
    readelf = shlex.split(os.environ.get('READELF') or 'readelf')
    archive = os.path.join(opt.builddir, 'src', '.libs', 'libtide.a')
    shared = os.path.join(opt.builddir, 'src', '.libs', 'libtide.so')
    script = os.path.join(opt.srcdir, 'src', 'libtide.ver')

    public = public_names(opt.srcdir)
    if len(public) < 10 or 'malloc' not in public or 'tide_malloc' not in public or '_Znwm' not in public:
        print('check_exports: found only %d public names in %s/src (TIDE_EXPORT, TIDE_ALIAS): '
              'has the way they are declared changed?' % (len(public), opt.srcdir))
        return 99
    hooks = public_names(opt.srcdir, 'TIDE_TEST_EXPORT')
    fault = os.environ.get('TIDE_FAULT_INJECTION', 'no') == 'yes'
    wanted = dict(public, **hooks) if fault else public
    libs = [p for p in (archive, shared) if os.path.exists(p)]
    if not libs:
        print('check_exports: SKIP: neither %s nor %s exists' % (archive, shared))
        return 77

    bad = 0

    def fail(msg):
        nonlocal bad
        print(msg)
        bad += 1

    for path, args, what in ((archive, ['-g', '--defined-only'], 'is global (in %s) but not public'),
                             (shared, ['-D', '--defined-only'], 'is exported but not public')):
        if not os.path.exists(path):
            continue
        syms = nm_defined(nm, args, path)
        for name in sorted(set(syms) - set(wanted)):
            if name in hooks:
                fail('%s: %s, a test hook (%s), is in a build without fault injection' % (path, name, hooks[name]))
            else:
                fail('%s: %s ' % (path, name) + (what % syms[name] if '%s' in what else what))
        for name in sorted(set(wanted) - set(syms)):
            fail('%s: public name %s (%s) is not %s' % (path, name, wanted[name],
                                                       'a global of the archive' if path == archive else 'exported'))

    try:
        versioned = version_script(script)
    except OSError as e:
        print('check_exports: cannot read the version script: %s' % e)
        return 99
    for name in sorted(versioned):
        if name not in public:
            fail('%s: %s is listed but is no public name' % (script, name))
        elif not name.startswith('tide_'):
            fail('%s: %s is listed: only tide_ names may carry a version (a versioned %s would not replace '
                 'the C or C++ library\'s)' % (script, name, name))
    for name in sorted(n for n in public if n.startswith('tide_') and n not in versioned):
        fail('%s: public name %s (%s) is not listed' % (script, name, public[name]))

    if os.path.exists(shared):
        dyn = dynamic_symbols(readelf, shared)
        for name in sorted(wanted):
            if name not in dyn or not dyn[name][1]:
                continue  # (reported above)
            have, want = dyn[name][0], versioned.get(name, '')
            if have != want:
                fail('%s: %s has version %s, want %s' % (shared, name, have or 'none', want or 'none'))
        ubsan = os.environ.get('TIDE_UBSAN', 'no') == 'yes'
        libs_needed = needed(readelf, shared)
        for lib in libs_needed:
            if not re.match(r'lib(c|pthread)\.so\.', lib) and not (ubsan and lib.startswith('libubsan.so.')):
                fail('%s: needs %s; it may need libc (and libpthread) only' % (shared, lib))
        for name, (version, defined, weak) in sorted(dyn.items()):
            if ubsan and name.startswith('__ubsan_'):
                continue
            if not defined and not weak and not version.startswith('GLIBC_'):
                fail('%s: refers to %s%s, which is not glibc\'s, with a strong reference (make it weak)'
                     % (shared, name, '@' + version if version else ''))
        needs = ', '.join(libs_needed)
    if bad:
        print('check_exports: FAIL: %d problems; the public names are %d (TIDE_EXPORT and TIDE_ALIAS in src/)'
              % (bad, len(public)))
        return 1
    print('check_exports: ok: the globals of %s are exactly the %d public names%s; the %d tide_ names '
          'have the version of src/libtide.ver, the others none%s'
          % (' and '.join(libs), len(public), ' and the %d test hooks' % len(hooks) if fault else '',
             len(versioned), '; libtide.so needs ' + needs if os.path.exists(shared) else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
