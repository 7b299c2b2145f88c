#!/usr/bin/env bash
# Instructions per call of the hook layer's paths, counted by valgrind's callgrind:
#   plain     an uninstrumented function (the floor)
#   disabled  a #[traced] function no ops covers (one relaxed load + branch on top of plain)
#   count     covered by one ops whose callback bumps a per-thread counter (direct path)
#   list      covered by three such ops (the list walk, each ops' hashes tested)
#   graph     covered by one graph ops (entry hook, shadow-stack frame, clock reads, return)
#
# Method (scripts/callgrind-lib.sh): (Ir(N2) - Ir(N1)) / (N2 - N1) inside measure_loop, so
# one-time costs (first-call slot registration, stack allocation, loop setup) cancel.
#
# Usage: scripts/instructions.sh            (prints a table)
#        scripts/instructions.sh --check    (also fails if disabled costs more than
#                                            plain + MAX_DISABLED_EXTRA instructions)
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_DISABLED_EXTRA=${MAX_DISABLED_EXTRA:-4}
# shellcheck source=scripts/callgrind-lib.sh
. scripts/callgrind-lib.sh
bin=$(bench_bin hooks -p tracestat-benches)

printf '%-10s %14s\n' path instr/call
declare -A per
for mode in plain disabled count list graph; do
    per[$mode]=$(per_call HOOKS "$bin" "$mode")
    printf '%-10s %14s\n' "$mode" "${per[$mode]}"
done

if [ "${1:-}" = "--check" ]; then
    awk -v d="${per[disabled]}" -v p="${per[plain]}" -v m="$MAX_DISABLED_EXTRA" \
        'BEGIN { if (d - p > m) { printf "disabled path costs %.2f instructions over plain (max %d)\n", d - p, m; exit 1 } }'
fi
