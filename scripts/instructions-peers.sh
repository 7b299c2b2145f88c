#!/usr/bin/env bash
# Instructions per call of the function profiler and of the profilers users have instead,
# counted by valgrind's callgrind (peers/benches/peers.rs, PEERS_CALLGRIND mode; the keys are
# listed there): plain fetch_add count timed hotpath tracy puffin tracing clock2 tsc2.
#
# Method (scripts/callgrind-lib.sh): (Ir(N2) - Ir(N1)) / (N2 - N1) inside measure_loop, so
# one-time costs (thread state, lazy statics, first entries) cancel. Only the calling thread
# is counted: hotpath's and tracy's background threads do their share elsewhere. puffin's
# new_frame() every 10,000 calls runs inside the loop, so its share is included. The
# tracestat modes also check that every call was counted exactly once.
#
# Clock reads (clock_gettime's vDSO, rdtsc) count as the few instructions they are, but
# rdtsc costs far more cycles than one instruction: read these rows beside the ns figures.
#
# Usage: scripts/instructions-peers.sh [--ondemand] [KEY...]   (default: every key)
#   --ondemand  builds the bench with tracy's on-demand mode (`--features ondemand`)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/callgrind-lib.sh
. scripts/callgrind-lib.sh
features=()
if [ "${1:-}" = "--ondemand" ]; then
    features=(--features ondemand)
    shift
fi
cd peers
bin=$(bench_bin peers "${features[@]}")
# valgrind's CPUID does not report an invariant TSC; tracy would refuse to start.
export TRACY_NO_INVARIANT_CHECK=1
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(plain fetch_add count timed hotpath tracy puffin tracing clock2 tsc2)
printf '%-10s %14s\n' path instr/call
for mode in "${modes[@]}"; do
    printf '%-10s %14s\n' "$mode" "$(per_call PEERS "$bin" "$mode")"
done
