#!/usr/bin/env python3
"""Check that every arrow between psched's folders points down.

Layers, top to bottom (docs/architecture.md, "Layers"):

    programs   programs/NAME/             public API (include/), and the
                                          modules of their own folder
    app        app/                       may use the three roles
    roles      worker/ server/ scheduler/ each uses common/, never another role
    common     common/ (+ transport/)     uses nothing above it
    public     include/                   uses only include/

Two checks, both must pass:
  includes  every #include "..." resolves (like the compiler: the file's own
            folder, then include/, common/, the generated headers) to a file
            in an allowed folder; the folder graph has no cycle;
  symbols   (with --obj DIR) no object of a layer needs a symbol that only a
            higher or sibling layer defines, read with nm from the build.

Usage: check_layers.py [--root DIR] [--obj BUILD/obj] [--selftest]
Exit 0 clean, 1 with one line per violation.
"""
import os
import re
import subprocess
import sys
import tempfile

INC_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
ROLES = ("worker", "server", "scheduler")


def folder_of(rel):
    """Layer folder of a repository-relative path, or None if unchecked."""
    parts = rel.split("/")
    top = parts[0]
    if top == "scheduler" and len(parts) > 2 and parts[1] == "tuner":
        return "scheduler"
    if top == "programs":
        return "program"
    if top in ("include", "common", "app") + ROLES:
        return top
    return None


# Which folders each folder may include or call.
ALLOWED = {
    "include": {"include"},
    "common": {"include", "common", "gen"},
    "worker": {"include", "common", "gen", "worker"},
    "server": {"include", "common", "gen", "server"},
    "scheduler": {"include", "common", "gen", "scheduler"},
    "app": {"include", "common", "gen", "app"} | set(ROLES),
    "program": {"include"},  # + its own folder (program_dir)
}


def program_dir(rel):
    """A program's own folder, programs/NAME, of a path under programs/."""
    return "/".join(rel.split("/")[:2])


def sources(root):
    for top in ("include", "common", "app", "programs") + ROLES:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, rel, name):
    """Where the compiler finds #include "name" from file rel."""
    if name.endswith(".pb-c.h"):
        return "gen"
    here = os.path.dirname(rel)
    for base in (here, "include", "common"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check_includes(root):
    errors, edges = [], {}
    for rel in sorted(sources(root)):
        src = folder_of(rel)
        if src is None:
            continue
        with open(os.path.join(root, rel), errors="replace") as fh:
            text = fh.read()
        for name in INC_RE.findall(text):
            target = resolve(root, rel, name)
            if target is None:
                errors.append("%s: #include \"%s\" not found" % (rel, name))
                continue
            dst = "gen" if target == "gen" else folder_of(target)
            if dst is None:
                errors.append("%s: #include \"%s\" -> %s is in no layer"
                              % (rel, name, target))
                continue
            if src == "program" and dst == "program" and \
                    program_dir(target) == program_dir(rel):
                continue  # a program's own folder (ps-worker's replay)
            if dst not in ALLOWED[src]:
                errors.append("%s: #include \"%s\" goes from %s/ up or "
                              "sideways to %s/" % (rel, name, src, dst))
            if dst != src and dst != "gen":
                edges.setdefault(src, set()).add(dst)
    cyc = find_cycle(edges)
    if cyc:
        errors.append("folder cycle: " + " -> ".join(cyc))
    return errors


def find_cycle(edges):
    state = {}

    def visit(n, path):
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return path + [n, m]
            if not state.get(m):
                c = visit(m, path + [n])
                if c:
                    return c
        state[n] = 2
        return None

    for n in sorted(edges):
        if not state.get(n):
            c = visit(n, [])
            if c:
                return c
    return None


def nm(path, defined):
    args = ["nm", "-P", "--defined-only" if defined else "--undefined-only",
            path]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    syms = set()
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and (not defined or f[1] in "TDBRCVWtdbr"):
            if defined and f[1].islower():
                continue  # static: not visible to others
            syms.add(f[0])
    return syms


def check_symbols(root, obj):
    owner, needs = {}, {}
    for d, _, files in os.walk(obj):
        for f in files:
            if not f.endswith(".o"):
                continue
            rel = os.path.relpath(os.path.join(d, f), obj)[:-2] + ".c"
            layer = "gen" if rel.startswith("gen/") else folder_of(rel)
            if layer is None:
                continue
            if layer != "gen" and not os.path.isfile(os.path.join(root, rel)):
                continue  # a stale object of a removed source
            path = os.path.join(d, f)
            for s in nm(path, True):
                owner[s] = (layer, rel)
            needs[rel] = (layer, nm(path, False))
    errors = []
    for rel, (layer, undef) in sorted(needs.items()):
        if layer == "gen":
            continue
        for s in sorted(undef):
            if s not in owner:
                continue
            dst, where = owner[s]
            if layer == "program":
                # Programs use the public API, and their own folder's
                # modules (ps-worker's model replay), nothing else.
                if s.startswith("psched_") or \
                        (dst == "program" and
                         program_dir(where) == program_dir(rel)):
                    continue
            if dst != layer and dst not in ALLOWED[layer]:
                errors.append("%s calls %s, defined up or sideways in %s"
                              % (rel, s, where))
    return errors


def selftest():
    """The check must catch an upward include, a sideways include and a
    cycle; and pass a clean tree."""
    def tree(files):
        root = tempfile.mkdtemp()
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)),
                        exist_ok=True)
            with open(os.path.join(root, rel), "w") as fh:
                fh.write(text)
        return root

    clean = {"include/psched.h": "", "common/van.h": '#include "psched.h"\n',
             "worker/w.c": '#include "van.h"\n',
             "app/roles.c": '#include "../worker/role.h"\n',
             "worker/role.h": ""}
    bad_up = dict(clean, **{"common/node.c": '#include "../worker/role.h"\n'})
    bad_side = dict(clean, **{"server/s.c": '#include "../worker/role.h"\n'})
    prog = dict(clean, **{"programs/ps-worker/main.c":
                          '#include "psched.h"\n#include "replay.h"\n',
                          "programs/ps-worker/replay.h": ""})
    bad_prog = dict(prog, **{"programs/ps-bench/main.c":
                             '#include "../../worker/role.h"\n'})
    bad_prog2 = dict(prog, **{"programs/ps-bench/main.c":
                              '#include "../ps-worker/replay.h"\n'})
    ok = not check_includes(tree(clean))
    ok &= not check_includes(tree(prog))
    ok &= any("up or sideways" in e for e in check_includes(tree(bad_up)))
    ok &= any("up or sideways" in e for e in check_includes(tree(bad_side)))
    ok &= any("up or sideways" in e for e in check_includes(tree(bad_prog)))
    ok &= any("up or sideways" in e for e in check_includes(tree(bad_prog2)))
    ok &= find_cycle({"a": {"b"}, "b": {"a"}}) is not None
    ok &= find_cycle({"a": {"b"}, "b": {"c"}}) is None
    print("selftest", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    root, obj = ".", None
    i = 1
    while i < len(argv):
        if argv[i] == "--root":
            root, i = argv[i + 1], i + 2
        elif argv[i] == "--obj":
            obj, i = argv[i + 1], i + 2
        elif argv[i] == "--selftest":
            return selftest()
        else:
            print("usage: check_layers.py [--root DIR] [--obj DIR] "
                  "[--selftest]", file=sys.stderr)
            return 2
    errors = check_includes(root)
    if obj:
        errors += check_symbols(root, obj)
    for e in errors:
        print(e)
    print("layers: %d violation(s)" % len(errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
