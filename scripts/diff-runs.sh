#!/usr/bin/env bash
# Real runs for `tracestat diff`: the demo workload (sleep-time off) run RUNS times per side,
# in SETS A/A sets (both sides unchanged) and SETS A/B sets (side B's `checksum` made SLOWER %
# slower by a busy-wait, `tracestat demo --checksum-spin NS`, NS calibrated from checksum's
# mean time in a first unchanged run). Reports the share of A/A
# comparisons flagged, and in how many A/B sets `checksum` was flagged slower (and how many
# other functions were). Runs of a set alternate A, B, A, B, ... so that drift of the machine
# falls on both sides alike.
#
# Usage: scripts/diff-runs.sh [SETS] [RUNS] [SLOWER] [DEMO ARGS...]
#        (defaults 10 5 20 -g 2 -f 4 -l 200; about 0.3 s per demo run on 2 cores)
# Env:   TRACESTAT (default target/release/tracestat, built when missing), OUT (a directory
#        to keep the runs in; default a temporary one, removed at the end), REANALYSE=1 (with
#        OUT: diff and count the runs kept there again, running nothing).
# Not part of CI: it measures the machine. BENCHMARKS.md quotes its output.
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${1:-10}
RUNS=${2:-5}
SLOWER=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
DEMO=("$@")
[ ${#DEMO[@]} -gt 0 ] || DEMO=(-g 2 -f 4 -l 200)
BIN=${TRACESTAT:-target/release/tracestat}
if [ ! -x "$BIN" ]; then
  cargo build -q --release -p tracestat-cli --bin tracestat
fi
command -v python3 >/dev/null || { echo "diff-runs: python3 is needed to read the JSON" >&2; exit 1; }
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; DIR=$OUT; else DIR=$(mktemp -d); trap 'rm -rf "$DIR"' EXIT; fi

echo "host: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${REANALYSE:-0}" = 1 ]; then
  [ -n "${OUT:-}" ] || { echo "diff-runs: REANALYSE=1 needs OUT" >&2; exit 1; }
  for kind in aa ab; do for s in $(seq 1 "$SETS"); do
    "$BIN" diff "$DIR/$kind-$s/a" "$DIR/$kind-$s/b" --format json >"$DIR/$kind-$s.json" 2>/dev/null
    "$BIN" diff "$DIR/$kind-$s/a" "$DIR/$kind-$s/b" --format json --run-factors >"$DIR/$kind-$s-rf.json" 2>/dev/null
  done; done
else
# Calibration: 3 runs without a spin and 3 with a first guess s0 = SLOWER % of checksum's
# mean m0; the diff's change c of checksum's mean gives the spin that adds SLOWER %:
# s0 * (m0 * SLOWER %) / c (a spin costs more than its length: the clock reads around it).
mkdir -p "$DIR/cal/a" "$DIR/cal/b"
for r in 1 2 3; do
  "$BIN" demo "${DEMO[@]}" --sleep-time off >"$DIR/cal/a/$r.txt" 2>/dev/null
done
M0=$(awk '$1 == "checksum" { a = $5; if ($6 == "ms") a *= 1000; s += a * 1000; n++ } END { printf "%d", s / n }' "$DIR"/cal/a/*.txt)
S0=$(( M0 * SLOWER / 100 ))
for r in 1 2 3; do
  "$BIN" demo "${DEMO[@]}" --sleep-time off --checksum-spin "$S0" >"$DIR/cal/b/$r.txt" 2>/dev/null
done
"$BIN" diff "$DIR/cal/a" "$DIR/cal/b" --format json >"$DIR/cal.json" 2>/dev/null
C=$(python3 -c 'import json, sys
r = [r for r in json.load(open(sys.argv[1]))["rows"] if r["name"] == "checksum"][0]
print(max(1, int(r["avg_test"]["change_ns"])))' "$DIR/cal.json")
SPIN=$(( S0 * M0 * SLOWER / 100 / C ))
echo "demo: ${DEMO[*]} --sleep-time off; $RUNS runs per side; $SETS A/A and $SETS A/B sets; B: --checksum-spin $SPIN (checksum's mean $M0 ns; a spin of $S0 ns added $C ns)"

one_set() { # kind set -> a JSON diff in $DIR/$kind-$set.json
  local kind=$1 set=$2 d="$DIR/$1-$2" slow=0
  [ "$kind" = ab ] && slow=$SPIN
  mkdir -p "$d/a" "$d/b"
  for r in $(seq 1 "$RUNS"); do
    "$BIN" demo "${DEMO[@]}" --sleep-time off >"$d/a/$r.txt" 2>/dev/null
    "$BIN" demo "${DEMO[@]}" --sleep-time off --checksum-spin "$slow" >"$d/b/$r.txt" 2>/dev/null
  done
  "$BIN" diff "$d/a" "$d/b" --format json >"$DIR/$kind-$set.json" 2>/dev/null
  "$BIN" diff "$d/a" "$d/b" --format json --run-factors >"$DIR/$kind-$set-rf.json" 2>/dev/null
}

start=$(date +%s)
for s in $(seq 1 "$SETS"); do one_set aa "$s"; one_set ab "$s"; done
echo "elapsed: $(( $(date +%s) - start )) s, load after $(cut -d' ' -f1-3 /proc/loadavg)"

fi
for mode in "" -rf; do
echo "== tracestat diff${mode:+ --run-factors}"
python3 - "$DIR" "$SETS" "$mode" <<'PY'
import json, sys
d, sets, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# checksum's callers up to their thread roots include its time (graph-time on): their changes
# are real, and counted apart from the other functions.
callers = {"stamp_header", "build_message", "sender_main", "verify_checksum", "read_header",
           "receiver_main"}
aa_flag = aa_cmp = ab_hit = ab_other = ab_cmp = ab_callers = 0
changes = []
for s in range(1, sets + 1):
    a = json.load(open(f"{d}/aa-{s}{mode}.json"))
    aa_cmp += a["compared"]
    aa_flag += sum(1 for r in a["rows"] if r["hits_significant"] or (r["avg_test"] or {}).get("significant"))
    b = json.load(open(f"{d}/ab-{s}{mode}.json"))
    ab_cmp += b["compared"]
    for r in b["rows"]:
        t = r["avg_test"] or {}
        sig = r["hits_significant"] or t.get("significant", False)
        if r["name"] == "checksum":
            changes.append(t.get("change_pct", 0.0))
            ab_hit += 1 if t.get("significant") and t["change_pct"] > 0 else 0
        elif r["name"] in callers:
            ab_callers += 1 if sig else 0
        elif sig:
            ab_other += 1
print(f"A/A: {aa_flag} of {aa_cmp} comparisons flagged ({100.0 * aa_flag / max(aa_cmp, 1):.2f} %)")
print(f"A/B: checksum flagged slower in {ab_hit} of {sets} sets; its callers flagged "
      f"{ab_callers} times; other functions flagged: {ab_other} of "
      f"{ab_cmp - sets * (1 + len(callers))}")
if changes:
    changes.sort()
    print(f"A/B: checksum's measured change of the mean: median {changes[len(changes)//2]:+.1f} %, "
          f"range {changes[0]:+.1f} .. {changes[-1]:+.1f} %")
PY
done
