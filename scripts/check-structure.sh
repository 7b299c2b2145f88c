#!/usr/bin/env bash
# Structure checks of src/, measurable by anyone (the module graph: scripts/structure.py):
#   1. no file over MAX_LINES lines, except the ones listed in LONG below;
#   2. no import cycle among src/ modules (a module is a file; a parent's edges into its own
#      submodules are its parts, not imports) except the ones listed in CYCLES below;
#   3. nothing in src/hook/ imports from src/profile/ (the hook layer never names a provider);
#   4. within src/hook/, a file imports only files below it in HOOK_ORDER (the one-way stack
#      of src/hook/mod.rs), except the edges listed in HOOK_UP below.
# Each exception names what it waits for; remove it when that lands. A second or so.
#
# Usage: scripts/check-structure.sh          (fails listing every violation)
#        scripts/check-structure.sh --graph  (prints the module graph)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
[ "${1:-}" = "--graph" ] && exec python3 scripts/structure.py --graph

MAX_LINES=800
# Files allowed over MAX_LINES, each with what splits it.
LONG=(
)
# Import cycles allowed, each a sorted, space-separated list of modules.
CYCLES=(
  # The trigger language's `if` filter is parsed inside a spec and refers back to the
  # spec's field names: one grammar in two files.
  "hist/trigger/filter hist/trigger/spec"
  # The ftrace line front end: a head is lexed, an event line's payload is classified while
  # its head is found (one pass); the graph parser is the general parser's case.
  "trace/event trace/head trace/lex"
  "trace/funcgraph trace/parse"
  # The cell format in three files: a layout tells whether it is a provider's constant cell
  # (`cell::{ConstCount, ConstTiming}`), a cell reads its layout's words and fills a snapshot's
  # row, a snapshot reads the layout.
  "hist/cell hist/layout hist/snapshot"
  # A snapshot renders itself through its tracer's format and the tracer hands out
  # snapshots: one concept in two files.
  "stat/snapshot stat/tracer"
)
# The hook layer, lowest first.
HOOK_ORDER=(
  barrier rcu clock cputime glob filter graph pid thread sink ops published recursion site table switch
  ftrace
  control walk guard live static_entry global returns foreign task future mod
)
# Edges from a hook file up the order, each "from->to" (none: the stack is one-way).
HOOK_UP=(
)

python3 - "$MAX_LINES" "${#LONG[@]}" "${LONG[@]}" "${#CYCLES[@]}" "${CYCLES[@]}" \
    "${#HOOK_ORDER[@]}" "${HOOK_ORDER[@]}" "${#HOOK_UP[@]}" "${HOOK_UP[@]+"${HOOK_UP[@]}"}" <<'PY'
import sys
sys.path.insert(0, 'scripts')
import structure as s
args = sys.argv[1:]
max_lines = int(args.pop(0))
def take():
    n = int(args.pop(0)); out = args[:n]; del args[:n]; return out
long_ok, cycles_ok, order, up_ok = set(take()), set(take()), take(), set(take())
bad = []
for m, p in sorted(s.files.items()):
    n = sum(1 for _ in open(p))
    if n > max_lines and p not in long_ok:
        bad.append(f'{p}: {n} lines (max {max_lines})')
found = {' '.join(c) for c in s.sccs()}
for c in sorted(found - cycles_ok):
    bad.append(f'import cycle: {c}')
for c in sorted(cycles_ok - found):
    bad.append(f'listed cycle no longer exists (remove it from CYCLES): {c}')
rank = {o: i for i, o in enumerate(order)}
for m, targets in sorted(s.edges.items()):
    if m[:1] != ('hook',):
        continue
    for t in sorted(targets):
        if t[:1] == ('profile',):
            bad.append(f'src/hook/ imports src/profile/: {s.name(m)} -> {s.name(t)}')
        if t[:1] == ('hook',) and len(m) == 2 and len(t) <= 2:
            # `hook` alone is mod.rs, the top of the stack.
            a, b = m[1], t[1] if len(t) == 2 else 'mod'
            if a not in rank or b not in rank:
                bad.append(f'hook file missing from HOOK_ORDER: {a if a not in rank else b}')
            elif rank[b] > rank[a] and f'{a}->{b}' not in up_ok:
                bad.append(f'hook layer upward import: {a} -> {b}')
if bad:
    print('\n'.join(bad))
    sys.exit(1)
print(f'structure ok: {len(s.files)} files, {len(found)} listed cycles')
PY
