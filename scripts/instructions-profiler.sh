#!/usr/bin/env bash
# Instructions per call of a profiled function, counted by valgrind's callgrind
# (benches/profiler.rs, PROFILER_CALLGRIND mode):
#   plain      the body uninstrumented (the floor)
#   disabled   a #[traced] function no ops covers
#   fetch_add  the body plus a static AtomicU64 fetch_add (one shared counter)
#   count      the function profiler counting hits (ProfileOptions { timing: false, .. })
#   timed      the function profiler timing calls (default options: graph ops, wall time)
#   clock2     the body between two Instant::now() reads (the timing floor)
#   mutex      Mutex<HashMap<&str, u64>>
#   dashmap    DashMap<&str, u64>
#
# Method (scripts/callgrind-lib.sh): (Ir(N2) - Ir(N1)) / (N2 - N1) inside measure_loop, so
# one-time costs (thread state, shard and table entry, lazy statics) cancel. The profiler
# modes also check that every call was counted exactly once.
#
# Instant::now() is the vDSO clock_gettime (rdtsc): its instructions are counted as they
# run natively, but rdtsc costs far more cycles than one instruction, so read the timing
# rows beside the criterion figures, not alone.
#
# Usage: scripts/instructions-profiler.sh [MODE...]   (default: all modes)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/callgrind-lib.sh
. scripts/callgrind-lib.sh
bin=$(bench_bin profiler -p tracestat-benches)

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(plain disabled fetch_add count timed clock2 mutex dashmap)
printf '%-10s %14s\n' path instr/call
for mode in "${modes[@]}"; do
    printf '%-10s %14s\n' "$mode" "$(per_call PROFILER "$bin" "$mode")"
done
