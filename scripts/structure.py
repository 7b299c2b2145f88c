#!/usr/bin/env python3
"""The module graph of src/ and the checks of scripts/check-structure.sh (see there).

A module is a file. An edge A -> B means A's code (comments, doc comments and the
`#[cfg(test)]` module at the end of a file left out) names an item of B by path:
`super::b::x`, `crate::a::b::x`, `self::b::x`, or a name that a `mod.rs` re-exports from B
(`use super::{X}` resolved through the re-exports). Inside an inline module (`mod x { .. }`)
of a file, `super` and `self` are counted from that module, so they name the file itself or
what the file's own `super` names. Prints the graph with --graph.
"""
import os, re, sys
from collections import defaultdict

SRC = 'src'

def modpath(path):
    rel = os.path.relpath(path, SRC)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ('mod', 'lib'):
        parts = parts[:-1]
    return tuple(parts)

def strip(text):
    # Drop the trailing test module (the convention: `#[cfg(test)]` / `#[cfg(all(test, ..))]`
    # before `mod tests`), then comments and string literals.
    m = re.search(r'^#\[cfg\([^\n]*\btest\b[^\n]*\)\]\s*\n(?:#\[[^\n]*\]\s*\n)*mod tests\b', text, re.M)
    if m:
        text = text[:m.start()]
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text

files = {}
for root, _, names in os.walk(SRC):
    for n in names:
        if n.endswith('.rs'):
            p = os.path.join(root, n)
            files[modpath(p)] = p
code = {m: strip(open(p).read()) for m, p in files.items()}

# Re-exports of each module: name -> module path it comes from.
reexports = defaultdict(dict)
use_re = re.compile(r'\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);', re.S)

def expand(tree, prefix=()):
    """`a::{b, c::{d, e as f}}` -> [(('a','b'), 'b'), (('a','c','d'),'d'), (('a','c','e'),'f')]"""
    tree = tree.strip()
    out = []
    m = re.match(r'^([\w:]*?)(?:::)?\{(.*)\}$', tree, re.S)
    if m:
        head = tuple(x for x in m.group(1).split('::') if x)
        depth, cur, items = 0, '', []
        for ch in m.group(2):
            if ch == '{': depth += 1
            if ch == '}': depth -= 1
            if ch == ',' and depth == 0:
                items.append(cur); cur = ''
            else:
                cur += ch
        items.append(cur)
        for it in items:
            if it.strip():
                out += expand(it, prefix + head)
        return out
    alias = None
    if ' as ' in tree:
        tree, alias = [x.strip() for x in tree.split(' as ')]
    path = prefix + tuple(x for x in tree.split('::') if x)
    return [(path, alias or path[-1])]

def resolve(cur, path):
    """The module (file) a path used in module `cur` lands in, or None (outside src/)."""
    if not path:
        return None
    if path[0] == 'crate':
        base, rest = (), list(path[1:])
    elif path[0] == 'super':
        base, rest = cur, list(path)
        while rest and rest[0] == 'super':
            base = base[:-1]; rest = rest[1:]
        if files.get(cur, '').endswith(('mod.rs', 'lib.rs')):
            pass
    elif path[0] == 'self':
        base, rest = cur, list(path[1:])
    else:
        return None
    # `super` from a file x/y.rs means x; from x/mod.rs it means x's parent.
    if path[0] == 'super' and files.get(cur, '').endswith('mod.rs'):
        base = cur[:-1 - (len(path) - len(rest) - 1)] if False else base
    mod = base
    for i, seg in enumerate(rest):
        if mod + (seg,) in files:
            mod = mod + (seg,)
            continue
        # An item of `mod`: follow a re-export if there is one.
        target = reexports.get(mod, {}).get(seg)
        if target is not None and target != mod:
            return target
        return mod
    return mod

inline_re = re.compile(r'\bmod\s+\w+\s*\{')

def inline_spans(text):
    """(start, end) of each inline module's body in `text` (comments and strings stripped)."""
    spans = []
    for m in inline_re.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[i], 0)
            i += 1
        spans.append((m.end(), i))
    return spans

def from_file(path, depth):
    """`path` as written `depth` inline modules deep, as the file's own top level would write
    it; None when it names the file itself (or an inline module of it)."""
    if not depth or not path:
        return path
    if path[0] == 'self':
        return None
    if path[0] == 'super':
        k = 0
        while k < len(path) and path[k] == 'super':
            k += 1
        if k <= depth:
            return None
        return path[depth:]
    return path

spans = {m: inline_spans(text) for m, text in code.items()}

def depth_at(m, pos):
    return sum(1 for a, b in spans[m] if a <= pos < b)

def super_base(cur):
    p = files[cur]
    return cur[:-1] if not p.endswith('mod.rs') else cur[:-1]

# Two passes: re-exports first (they may chain once), then the edges.
for _ in range(3):
    for m, text in code.items():
        for u in use_re.finditer(text):
            for path, name in expand(u.group(1)):
                if path and path[0] not in ('crate', 'super', 'self'):
                    path = ('self',) + path
                path = from_file(path, depth_at(m, u.start()))
                if path is None:
                    continue
                t = resolve(m, path)
                if t is not None and t != m:
                    reexports[m][name] = t

path_re = re.compile(r'\b((?:crate|super|self)(?:::(?:super|\w+))+)')
edges = defaultdict(set)
use_any = re.compile(r'\buse\s+([^;]+);', re.S)
for m, text in code.items():
    for u in use_any.finditer(text):
        for path, _ in expand(u.group(1)):
            if path and path[0] in ('crate', 'super', 'self'):
                path = from_file(path, depth_at(m, u.start()))
                if path is None:
                    continue
                t = resolve(m, path)
                if t is not None and t != m and t != ():
                    edges[m].add(t)
    for u in path_re.finditer(text):
        path = from_file(tuple(u.group(1).split('::')), depth_at(m, u.start()))
        if path is None:
            continue
        t = resolve(m, path)
        if t is not None and t != m and t != ():
            edges[m].add(t)
    # A module's own submodules are its parts, not its imports: the edges from a `mod.rs`
    # (or `lib.rs`) down into its own tree (declarations, re-exports, `use child::*`) are
    # left out, so a child that uses its parent's items makes no cycle with it.
    if files[m].endswith(('mod.rs', 'lib.rs')):
        edges[m] = {t for t in edges[m] if t[:len(m)] != m}

def name(m):
    return '/'.join(m) if m else 'lib'

def sccs():
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                out.append(sorted(name(c) for c in comp))
    for v in list(files):
        if v not in index:
            visit(v)
    return out

if __name__ == '__main__':
    if '--graph' in sys.argv:
        for m in sorted(edges):
            print(name(m), '->', ' '.join(sorted(name(t) for t in edges[m])))
    if '--cycles' in sys.argv:
        for c in sorted(sccs()):
            print(' '.join(c))
