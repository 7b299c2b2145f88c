#!/usr/bin/env bash
# Instructions per call of the hook layer's paths, counted by valgrind's callgrind:
#   plain     an uninstrumented function (the floor)
#   disabled  a #[traced] function no ops covers (one relaxed load + branch on top of plain)
#   count     covered by one ops whose callback bumps a per-thread counter (direct path)
#   list      covered by three such ops (the list walk, each ops' hashes tested)
#   graph     covered by one graph ops (entry hook, shadow-stack frame, clock reads, return)
#
# Each path runs measure_loop twice, with N1 and N2 calls; the figure is
# (Ir(N2) - Ir(N1)) / (N2 - N1), so one-time costs (first-call slot registration, stack
# allocation, loop setup) cancel and the result is exact and stable run to run.
# Callgrind counts instructions, not time: it does not depend on machine load.
#
# Usage: scripts/instructions.sh            (prints a table)
#        scripts/instructions.sh --check    (also fails if disabled costs more than
#                                            plain + MAX_DISABLED_EXTRA instructions)
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_DISABLED_EXTRA=${MAX_DISABLED_EXTRA:-4}
N1=1000
N2=11000

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 2; }
bin=$(cargo bench --bench hooks --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | grep '/hooks-' | tail -1)
[ -x "$bin" ] || { echo "could not build the hooks bench binary" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ir() { # mode calls -> collected Ir inside measure_loop
    HOOKS_CALLGRIND=$1 HOOKS_CALLS=$2 valgrind --tool=callgrind --callgrind-out-file="$tmp/out" \
        --toggle-collect='*measure_loop*' "$bin" >/dev/null 2>"$tmp/err" ||
        { cat "$tmp/err" >&2; exit 2; }
    sed -n 's/^totals: \([0-9]*\).*/\1/p' "$tmp/out"
}

printf '%-10s %14s\n' path instr/call
declare -A per
for mode in plain disabled count list graph; do
    a=$(ir "$mode" "$N1")
    b=$(ir "$mode" "$N2")
    per[$mode]=$(awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) 'BEGIN { printf "%.2f", (b - a) / n }')
    printf '%-10s %14s\n' "$mode" "${per[$mode]}"
done

if [ "${1:-}" = "--check" ]; then
    awk -v d="${per[disabled]}" -v p="${per[plain]}" -v m="$MAX_DISABLED_EXTRA" \
        'BEGIN { if (d - p > m) { printf "disabled path costs %.2f instructions over plain (max %d)\n", d - p, m; exit 1 } }'
fi
