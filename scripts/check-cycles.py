#!/usr/bin/env python3
"""Checks that the modules of src/ import each other without circles.

Every file under src/ is a module (`foo.rs` and `foo/mod.rs` are `foo`). An edge A -> B means a
path in A (a `use`, or an inline `crate::`/`super::`/`self::` path) names an item of B, resolved
to the deepest module that exists. A name that a module only imports (`pub use x::Y`,
`pub(crate) use`, or a private `use` that a descendant names through `super::`) is followed to
the module that defines the item, so `crate::store::Foo`, re-exported by the store from one of
its modules, is an edge to that module and not to the store. A module may use what its
ancestors define (that is how Rust shares a parent's items with its children), so edges to an
ancestor are not counted; every other edge is, including a parent's edges to its children. Prints the circles (strongly connected
groups of more than one module) and exits 1 when there is one; prints the module count and
"no circles" otherwise.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
CRATE_ROOTS = {"lib", "main"}


def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if len(rel) == 1 and rel[0] in CRATE_ROOTS:
        return ()
    return tuple(rel)


def strip(src):
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    src = re.sub(r"'(?:\\.|[^'\\])'", "' '", src)
    # Test modules may use anything.
    out, depth, skip = [], 0, None
    lines = src.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if skip is None and re.match(r"\s*#\[cfg\(test\)\]", line):
            j = i + 1
            if j < len(lines) and re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", lines[j]):
                skip = 0
                i = j
                continue
            if j < len(lines) and re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*;", lines[j]):
                i = j + 1
                continue
        if skip is not None:
            skip += lines[i].count("{") - lines[i].count("}")
            if skip <= 0 and "}" in lines[i]:
                skip = None
            i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


USE = re.compile(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);")


def imports(src):
    """The names a module's top-level `use` declarations bring in (what another module can name
    through it): name -> the path it stands for, and the paths of glob imports."""
    names, globs = {}, []
    depth, last = 0, 0
    for m in USE.finditer(src):
        depth += src.count("{", last, m.start()) - src.count("}", last, m.start())
        last = m.start()
        if depth != 0:
            continue
        for path in expand(re.sub(r"\s+", " ", m.group(1)).replace(" as ", "@").replace(" ", "")):
            path, _, alias = path.partition("@")
            if path.endswith("::*"):
                globs.append(path[:-3])
                continue
            name = alias or path.split("::")[-1]
            if name != "_":
                names[name] = path
    return names, globs


def use_paths(src):
    """Every path named by a `use` tree, expanded, and every inline path."""
    paths = []
    for m in USE.finditer(src):
        tree = re.sub(r"\s+", " ", m.group(1)).replace(" as ", "@").replace(" ", "")
        paths.extend(p.partition("@")[0] for p in expand(tree))
    # Inline paths: from the crate, a parent or this module, or a child module's name (the
    # caller keeps those whose first segment is a child module).
    for m in re.finditer(r"(?<![\w:])((?:crate|super|self|[a-z_]\w*)(?:::\w+)+)", src):
        paths.append(m.group(1))
    return paths


def expand(tree):
    brace = tree.find("{")
    if brace < 0:
        return [tree] if tree else []
    prefix, rest = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in rest:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for e in expand(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


def resolve(here, path, modules, reexports, seen=frozenset()):
    """The module that defines what `path`, written in module `here`, names: the deepest module
    on the path, or, where the path goes on through a name that module only imports, the module
    that name comes from. `None` for a path that starts outside the crate."""
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        # In foo.rs (not foo/mod.rs) `self` is foo and `super` its parent, the same as mod.rs.
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    elif here + (segs[0],) in modules:
        # A path that starts with a child module's name (`keys::CLAIMS` in the parent of keys).
        base = here
    else:
        return None
    cur = base
    for i, s in enumerate(segs):
        if cur + (s,) in modules:
            cur = cur + (s,)
            continue
        names, globs = reexports.get(cur, ({}, []))
        targets = [names[s]] if s in names else [g + "::" + s for g in globs[:1]]
        for target in targets:
            if (cur, s) in seen:
                continue
            rest = "::".join([target] + segs[i + 1 :])
            found = resolve(cur, rest, modules, reexports, seen | {(cur, s)})
            if found is not None:
                return found
        break
    return cur


def main():
    files = {}
    for dirpath, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(dirpath, n)
                files[module_of(p)] = p
    modules = set(files)
    edges = {m: set() for m in modules}
    sources = {}
    for m, p in files.items():
        with open(p, encoding="utf-8") as f:
            sources[m] = strip(f.read())
    reexports = {m: imports(src) for m, src in sources.items()}
    for m, src in sources.items():
        for path in use_paths(src):
            t = resolve(m, path, modules, reexports)
            if t is None or t == m or m[: len(t)] == t:
                continue
            edges[m].add(t)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            strong(v)
    name = lambda m: "::".join(("crate",) + m)
    if not sccs:
        print(f"{len(modules)} modules, {sum(len(e) for e in edges.values())} imports: no circles")
        return 0
    for comp in sccs:
        group = set(comp)
        print("circle: " + ", ".join(sorted(name(m) for m in comp)))
        for m in sorted(comp):
            for t in sorted(edges[m] & group):
                print(f"  {name(m)} -> {name(t)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
