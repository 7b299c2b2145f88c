#!/usr/bin/env bash
# Checks that `tracestat diff --pprof DIR` writes profiles that `go tool pprof -diff_base`
# reads as the same difference `tracestat diff --format json` reports: per function, the
# flat calls and time pprof shows equal our hits and time changes, and its "accounting
# for" totals equal the sums of our changes. Pairs: two real function_graph traces, a
# trace against itself (no change), and two synthetic JSON profiles with known changes.
#
# First a smoke of the CI gate (`--fail-on`, several runs per side of the demo workload):
# exit 1 for a broken rule, 0 for none, 2 for bad usage; this part needs no go.
# Installs golang-go when missing; SKIPS loudly when it cannot (never silently).
# Usage: scripts/check-diff.sh [OUTPUT_DIR]     (default target/diff-check)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target/diff-check}
rm -rf "$OUT" && mkdir -p "$OUT"
cargo build -q -p tracestat-cli --bin tracestat || exit 1
BIN=target/debug/tracestat

# ---- the gate: exit codes 0 / 1 / 2 on real demo runs (a few seconds) ----
for side in a b c; do
  mkdir -p "$OUT/gate/$side"
  loops=20; [ "$side" = c ] && loops=40
  for r in 1 2 3; do
    "$BIN" demo -g 1 -f 2 -l $loops --sleep-time off >"$OUT/gate/$side/$r.txt" 2>/dev/null || exit 1
  done
done
gate() { # expected-status description args...
  local want=$1 what=$2; shift 2
  "$BIN" diff "$@" >"$OUT/gate/out.txt" 2>"$OUT/gate/err.txt"
  local got=$?
  if [ "$got" = "$want" ]; then echo "PASS: gate: $what (exit $got)"
  else echo "FAIL: gate: $what: exit $got, wanted $want"; cat "$OUT/gate/err.txt"; exit 1; fi
}
gate 0 "same workload, hits!=0" "$OUT/gate/a" "$OUT/gate/b" --fail-on 'hits!=0'
gate 1 "twice the loops, hits!=0" "$OUT/gate/a" "$OUT/gate/c" --fail-on 'hits!=0'
grep -q "broken by" "$OUT/gate/err.txt" || { echo "FAIL: gate: no function named"; exit 1; }
gate 2 "a rule without a unit" "$OUT/gate/a" "$OUT/gate/c" --fail-on 'avg>5'
gate 2 "three runs without --" "$OUT/gate/a/1.txt" "$OUT/gate/a/2.txt" "$OUT/gate/a/3.txt"

have() { command -v "$1" >/dev/null 2>&1; }
if ! have go && have apt-get; then
  (nice apt-get update -q && DEBIAN_FRONTEND=noninteractive nice apt-get install -y -q \
    --no-install-recommends golang-go) >/dev/null 2>&1 || true
fi
if ! have go || ! have python3; then
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  echo "!!! SKIPPED: tracestat diff against go tool pprof -diff_base"
  echo "!!! because: go or python3 is not installed and could not be installed"
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  exit 0
fi
cat >"$OUT/a.json" <<'JSON'
{"schema":"tracestat.profile","version":1,"functions":[
 {"name":"vfs_read","hits":100,"time_ns":500000,"time_sq_ns2":0},
 {"name":"vfs_write","hits":10,"time_ns":90000,"time_sq_ns2":0},
 {"name":"only_in_a","hits":3,"time_ns":3000,"time_sq_ns2":0},
 {"name":"same","hits":7,"time_ns":7000,"time_sq_ns2":0}]}
JSON
cat >"$OUT/b.json" <<'JSON'
{"schema":"tracestat.profile","version":1,"functions":[
 {"name":"vfs_read","hits":150,"time_ns":450000,"time_sq_ns2":0},
 {"name":"vfs_write","hits":10,"time_ns":190000,"time_sq_ns2":0},
 {"name":"only_in_b","hits":5,"time_ns":25000,"time_sq_ns2":0},
 {"name":"same","hits":7,"time_ns":7000,"time_sq_ns2":0}]}
JSON

failed=0
check() {
  local name=$1 a=$2 b=$3 dir="$OUT/$1"
  mkdir -p "$dir"
  if ! "$BIN" diff "$a" "$b" --format json --pprof "$dir" >"$dir/diff.json"; then
    echo "FAIL: $name: tracestat diff failed"; failed=1; return
  fi
  for idx in calls time; do
    go tool pprof -top -nodefraction=0 -nodecount=1000000 -sample_index=$idx -unit=ns \
      -diff_base "$dir/before.pb.gz" "$dir/after.pb.gz" >"$dir/top-$idx.txt" 2>&1
  done
  # pprof samples are call paths with *self* times (so pprof's totals count each nanosecond
  # once): a trace's time changes are checked against the self times of `replay --graph-time
  # off`; an input without call paths carries calls only, so pprof must offer no time.
  local selfs=""
  case "$a" in
    *.json) ;;
    *) "$BIN" replay "$a" --graph-time off -q >"$dir/self-a.txt" \
         && "$BIN" replay "$b" --graph-time off -q >"$dir/self-b.txt" && selfs=1 ;;
  esac
  if python3 - "$dir" "$name" "$selfs" <<'PY'
import json, re, sys
d, name, selfs = sys.argv[1], sys.argv[2], sys.argv[3]
diff = json.load(open(f"{d}/diff.json"))
def self_times(path):
    out = {}
    for line in open(path).read().splitlines()[2:]:
        f = line.split()
        out[f[0]] = round(float(f[2]) * 1000)
    return out
want = {"calls": {r["name"]: r["hits_change"] for r in diff["rows"]}}
ok = True
if selfs:
    a, b = self_times(f"{d}/self-a.txt"), self_times(f"{d}/self-b.txt")
    want["time"] = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
else:
    text = open(f"{d}/top-time.txt").read()
    calls_only = "must be one of: [calls]" in text
    print(f"  {name} time: no call paths, pprof offers calls only -> {'yes' if calls_only else 'NO'}")
    ok = calls_only
for idx in want:
    text = open(f"{d}/top-{idx}.txt").read()
    got = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(-?\d+)(?:ns)?\s+\S+%\s+\S+%\s+-?\d+(?:ns)?\s+\S+%\s+(\S.*)$", line)
        if m:
            got[m.group(2)] = int(m.group(1))
    got = {k: v for k, v in got.items() if v != 0}
    exp = {k: v for k, v in want[idx].items() if v != 0}
    m = re.search(r"accounting for (-?\d+)(?:ns)?,", text)
    total = int(m.group(1)) if m else 0
    same = got == exp and total == sum(exp.values())
    print(f"  {name} {idx}: pprof {len(got)} functions, total {total}; "
          f"ours {len(exp)}, total {sum(exp.values())} -> {'equal' if same else 'DIFFERENT'}")
    if not same:
        print(f"    pprof: {got}\n    ours:  {exp}\n{text}")
        ok = False
sys.exit(0 if ok else 1)
PY
  then echo "PASS: $name"; else echo "FAIL: $name"; failed=1; fi
}
check real-traces tests/data/ftrace-graph.txt tests/data/ftrace-graph-proc.txt
check self tests/data/ftrace-graph-do-fault.txt tests/data/ftrace-graph-do-fault.txt
check synthetic "$OUT/a.json" "$OUT/b.json"
# The synthetic pair's changes are known: check ours exactly too.
python3 - "$OUT/synthetic/diff.json" <<'PY' || failed=1
import json, sys
rows = {r["name"]: (r["hits_change"], r["time_change_ns"]) for r in json.load(open(sys.argv[1]))["rows"]}
want = {"vfs_write": (0, 100000), "vfs_read": (50, -50000), "only_in_b": (5, 25000), "only_in_a": (-3, -3000)}
print("  synthetic known changes:", "equal" if rows == want else f"DIFFERENT {rows}")
sys.exit(0 if rows == want else 1)
PY
[ "$failed" = 0 ] && echo "check-diff: all passed" || { echo "check-diff: FAILED"; exit 1; }
