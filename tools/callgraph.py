#!/usr/bin/env python3
"""The file-level graph of calls in src/, read from the object files.

Each C file of the host backend's build is compiled on its own (the host
backend's sources are the same files as every backend's, but for the one
runtime file), and `nm` says which symbols each object defines and which
it needs.  A file "calls" another when it needs a symbol the other
defines.  From that graph:

  - the groups of files that call each other in a ring (strongly connected
    components of more than one file),
  - the calls inside those rings, which are the calls that run upward in
    any order of floors one could draw,
  - the extern mutable globals (data, not code or constants) that a file
    other than their owner reads or writes.

    python3 tools/callgraph.py            the summary and the rings
    python3 tools/callgraph.py --edges    every file -> file edge, with the symbols
    python3 tools/callgraph.py --json F   the graph as JSON, for tests
    python3 tools/callgraph.py --floors   each file's floor (0: calls no other file;
                                          else one above the highest file it calls)

tests/test_layout.py uses `graph()` and `rings()` from here.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sources(root=ROOT):
    """The C files of the host backend's build, relative to `root`."""
    out = []
    for folder in ("src", "src/copy", "src/transfer"):
        base = os.path.join(root, folder)
        out += sorted(os.path.join(folder, f) for f in os.listdir(base) if f.endswith(".c"))
    return out + ["src/backend/rt_host.c", "src/backend/ipc_host.c", "src/backend/locked_host.c", "src/backend/captured_host.c", "src/backend/events_host.c", "src/backend/peer_host.c", "src/backend/kernels_host.c"]


def compile_all(root=ROOT, cc=None):
    """{source: object path} for every source, compiled into a fresh folder
    (which the caller removes: its path is returned too)."""
    import numpy
    cc = cc or os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc") or "cc"
    tmp = tempfile.mkdtemp(prefix="pygpu-callgraph-")
    flags = ["-c", "-O0", "-w", "-DPYGPU_BACKEND_HOST=1", "-DPYGPU_MODULE_NAME=_host",
             "-I" + os.path.join(root, "src"), "-I" + os.path.join(root, "include"),
             "-I" + sysconfig.get_paths()["include"], "-I" + numpy.get_include()]

    def one(src):
        obj = os.path.join(tmp, src.replace("/", "__") + ".o")
        r = subprocess.run([cc, *flags, os.path.join(root, src), "-o", obj], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{src} did not compile:\n{r.stderr}")
        return src, obj

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return dict(pool.map(one, sources(root))), tmp


def symbols(obj):
    """(defined {name: nm type}, needed set) of one object file."""
    r = subprocess.run(["nm", obj], capture_output=True, text=True, check=True)
    defined, needed = {}, set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            needed.add(parts[1])
        elif len(parts) == 3 and parts[1].isupper():    # global symbols only
            defined[parts[2]] = parts[1]
    return defined, needed


def graph(root=ROOT):
    """{'files': [...], 'edges': {a: {b: [symbols]}}, 'shared_data': [(owner, symbol, user)]}:
    a -> b when a needs a symbol b defines."""
    objs, tmp = compile_all(root)
    try:
        table = {src: symbols(obj) for src, obj in objs.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    owner = {}
    for src, (defined, _) in table.items():
        for name, kind in defined.items():
            owner[name] = (src, kind)
    edges, shared = {src: {} for src in table}, []
    for src, (_, needed) in table.items():
        for name in sorted(needed):
            if name not in owner:
                continue
            to, kind = owner[name]
            edges[src].setdefault(to, []).append(name)
            if kind in "BDCGS":             # writable data: .bss, .data, common, small data
                shared.append((to, name, src))
    return {"files": sorted(table), "edges": edges, "shared_data": shared}


def rings(edges):
    """The strongly connected components of more than one file (Tarjan's
    algorithm, iterative), each as a sorted list."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def ring_calls(edges, comps):
    """The calls (a, b, symbols) between two files of one ring."""
    where = {f: i for i, comp in enumerate(comps) for f in comp}
    return [(a, b, syms) for a in sorted(edges) for b, syms in sorted(edges[a].items())
            if a != b and a in where and where.get(b) == where[a]]


def floors(edges):
    """{file: floor}: 0 for a file that calls no other, else 1 + the
    highest floor among the files it calls (the graph must have no ring)."""
    floor = {}

    def of(f, seen=()):
        if f not in floor:
            assert f not in seen, f"ring through {f}"
            below = [of(b, seen + (f,)) for b in edges.get(f, ()) if b != f]
            floor[f] = 1 + max(below) if below else 0
        return floor[f]
    for f in edges:
        of(f)
    return floor


def short(path):
    return path[len("src/"):] if path.startswith("src/") else path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edges", action="store_true", help="print every edge with its symbols")
    ap.add_argument("--json", metavar="FILE", help="write the graph as JSON")
    ap.add_argument("--floors", action="store_true", help="print each file's floor, lowest first")
    args = ap.parse_args()
    g = graph()
    edges = g["edges"]
    comps = rings(edges)
    inside = ring_calls(edges, comps)
    n_edges = sum(1 for a in edges for b in edges[a] if a != b)
    print(f"files: {len(g['files'])}, file -> file edges: {n_edges}, rings: {len(comps)}, "
          f"edges inside rings: {len(inside)}, symbols called inside rings: {sum(len(s) for *_, s in inside)}")
    for comp in comps:
        print(f"ring of {len(comp)}: {' '.join(short(f) for f in comp)}")
    if inside:
        print("calls inside rings (file -> file: symbols):")
        for a, b, syms in inside:
            print(f"  {short(a)} -> {short(b)}: {' '.join(syms)}")
    if g["shared_data"]:
        print("extern mutable globals used outside their file (owner: symbol <- user):")
        for owner, name, user in g["shared_data"]:
            print(f"  {short(owner)}: {name} <- {short(user)}")
    if args.edges:
        print("edges:")
        for a in sorted(edges):
            for b, syms in sorted(edges[a].items()):
                if a != b:
                    print(f"  {short(a)} -> {short(b)}: {' '.join(syms)}")
    if args.floors and not comps:
        print("floors:")
        for f, n in sorted(floors(edges).items(), key=lambda kv: (kv[1], kv[0])):
            print(f"  {n:2d}  {short(f)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**g, "rings": comps}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
