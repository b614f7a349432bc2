#!/usr/bin/python3
"""test/lib/layers.py: the arrows between the layers of src/ point one way.

    python3 test/lib/layers.py TOP [OBJDIR]

Prints one "ok - ..." or "not ok - ..." line a check, each failure followed
by "#   ..." lines naming the offending files (test/scripts/layers.sh reads
them).  The layers and what each may use are doc/internals.md's:

    core   <- stats <- marks <- guard <- adopt
    core   <- redis
    core, stats, marks, guard, redis <- lock
    every layer <- src/fencing.c (the module's init)

Includes are read from the sources: a file of one layer may include only
the headers of the layers it may use, and from another folder only that
folder's public header (FOLDER/FOLDER.h; core also core/pg_compat.h).

Calls are read from the object files of a build (OBJDIR, the tree the
Makefile built): a file may refer only to symbols defined in the layers
it may use, so a prototype written by hand does not get around the
headers; and no two files refer to each other's symbols.
"""
import os
import re
import subprocess
import sys

LAYERS = ["core", "stats", "marks", "guard", "adopt", "redis", "lock"]
TOP_FILES = {"fencing.c", "fencing_errcodes.h"}

# What each layer may use, itself included.
MAY_USE = {
    "core": {"core"},
    "stats": {"core", "stats"},
    "marks": {"core", "stats", "marks"},
    "guard": {"core", "stats", "marks", "guard"},
    "adopt": {"core", "stats", "marks", "guard", "adopt"},
    "redis": {"core", "redis"},
    "lock": {"core", "stats", "marks", "guard", "redis", "lock"},
    "top": set(LAYERS) | {"top"},
}

# The headers of a folder that other folders may include.
PUBLIC = {layer: {layer + "/" + layer + ".h"} for layer in LAYERS}
PUBLIC["core"].add("core/pg_compat.h")

failures = 0


def report(desc, bad):
    global failures
    if bad:
        failures += 1
        print("not ok - " + desc)
        for line in bad:
            print("#   " + line)
    else:
        print("ok - " + desc)


def uses_text(layer):
    others = sorted(MAY_USE[layer] - {layer})
    return "nothing of the other layers" if not others else \
        "nothing but " + ", ".join(others)


def layer_of(rel):
    """The layer of a path under src/, "top", or None if in no layer."""
    parts = rel.split("/")
    if len(parts) == 1:
        return "top" if rel in TOP_FILES else None
    return parts[0] if parts[0] in LAYERS and len(parts) == 2 else None


def sources(src):
    out = []
    for d, _, files in os.walk(src):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, f), src))
    return sorted(out)


def includes(src, rel):
    """The files under src/ that rel includes, as paths under src/."""
    found = []
    with open(os.path.join(src, rel)) as f:
        for line in f:
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            name = m.group(1)
            here = os.path.normpath(os.path.join(os.path.dirname(rel), name))
            if os.path.exists(os.path.join(src, here)):
                found.append(here)
            elif os.path.exists(os.path.join(src, name)):
                found.append(os.path.normpath(name))
    return found


def check_includes(src):
    files = sources(src)
    report("every file of src/ is in a layer folder (%s), or is src/fencing.c "
           "or src/fencing_errcodes.h" % ", ".join(LAYERS),
           [f for f in files if layer_of(f) is None])
    edges = {f: includes(src, f) for f in files}
    for layer in LAYERS:
        allowed = MAY_USE[layer]
        bad = []
        for f in files:
            if layer_of(f) != layer:
                continue
            for inc in edges[f]:
                if inc != "fencing_errcodes.h" and layer_of(inc) not in allowed:
                    bad.append("%s includes %s" % (f, inc))
        if not any(layer_of(f) == layer for f in files):
            bad.append("src/%s/ holds no source file" % layer)
        report("src/%s/ includes %s" % (layer, uses_text(layer)), bad)
    bad = []
    for f in files:
        for inc in edges[f]:
            target = layer_of(inc)
            if target in LAYERS and target != layer_of(f) and inc not in PUBLIC[target]:
                bad.append("%s includes %s, internal to src/%s/" % (f, inc, target))
    report("outside a layer folder, only its public header is included", bad)
    bad = []
    for f in files:
        for inc in edges[f]:
            if f in edges.get(inc, []) and f < inc:
                bad.append("%s <-> %s" % (f, inc))
    report("no two files include each other", bad)


def symbols(objdir):
    """{object path under src/: (defined, undefined)} from nm."""
    out = {}
    srcdir = os.path.join(objdir, "src")
    for d, _, files in os.walk(srcdir):
        for f in files:
            if not f.endswith(".o"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, srcdir)[:-2] + ".c"
            res = subprocess.run(["nm", path], capture_output=True, text=True, check=True)
            defined, undefined = set(), set()
            for line in res.stdout.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == "U":
                    undefined.add(parts[1])
                elif len(parts) == 3 and parts[1] in "TDBRGSV" and parts[1].isupper():
                    defined.add(parts[2])
            out[rel] = (defined, undefined)
    return out


def check_calls(objdir):
    syms = symbols(objdir)
    owner = {}
    for f, (defined, _) in syms.items():
        for s in defined:
            owner[s] = f
    uses = {f: {} for f in syms}
    for f, (_, undefined) in syms.items():
        for s in undefined:
            if s in owner and owner[s] != f:
                uses[f].setdefault(owner[s], []).append(s)
    report("the build has objects to read (%d files)" % len(syms),
           [] if syms else ["no object files under %s/src" % objdir])
    for layer in LAYERS + ["top"]:
        allowed = MAY_USE[layer]
        bad = []
        for f in sorted(syms):
            if layer_of(f) != layer:
                continue
            for target, names in sorted(uses[f].items()):
                if layer_of(target) not in allowed:
                    bad.append("%s uses %s of %s" % (f, ", ".join(sorted(names)[:4]), target))
        if layer != "top" and not any(layer_of(f) == layer for f in syms):
            bad.append("src/%s/ holds no object file" % layer)
        if layer != "top":
            report("src/%s/ calls %s" % (layer, uses_text(layer)), bad)
    bad = []
    for f in sorted(syms):
        for target in sorted(uses[f]):
            if f < target and f in uses.get(target, {}):
                bad.append("%s (%s) <-> %s (%s)" % (f, ", ".join(sorted(uses[f][target])[:3]),
                                                    target, ", ".join(sorted(uses[target][f])[:3])))
    report("no two files call each other", bad)


def main():
    top = sys.argv[1]
    check_includes(os.path.join(top, "src"))
    if len(sys.argv) > 2:
        check_calls(sys.argv[2])
    sys.exit(1 if failures else 0)


main()
