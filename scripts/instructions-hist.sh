#!/usr/bin/env bash
# Instructions per call of the hash histogram's paths, counted by valgrind's callgrind
# (benches/hist.rs, HIST_CALLGRIND mode), beside Mutex<hashbrown::HashMap>:
#   update        HashHist::increment of one of 64 present keys (pins the epoch per call)
#   update_in     HashHist::update_in of one of 64 present keys under a held guard
#   update_64k    update_in over 65,536 present keys
#   shard_64k     Shard::increment (single writer, no recent-key cache), 65,536 present keys
#   update_64k_pin  HashHist::increment (pins per call) over 65,536 present keys
#   insert        HashHist::increment of a fresh key (growth from an empty table amortized)
#   shard_insert  Shard::increment of a fresh key (single writer, growth amortized)
#   mutex_update  Mutex<hashbrown::HashMap<u64, u64>>, one of 64 present keys
#   mutex_insert  the same map, a fresh key (its growth amortized)
#
# Method (scripts/callgrind-lib.sh): (Ir(N2) - Ir(N1)) / (N2 - N1) inside measure_loop, so
# one-time costs cancel; the insert modes therefore count keys N1..N2 (1,000 to 11,000),
# which includes the growths of the table through that range.
#
# Usage: scripts/instructions-hist.sh [MODE...]   (default: all modes)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/callgrind-lib.sh
. scripts/callgrind-lib.sh
bin=$(bench_bin hist -p tracestat-benches)

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(update update_in update_64k update_64k_pin shard_64k insert shard_insert mutex_update mutex_insert)
printf '%-13s %14s\n' path instr/call
for mode in "${modes[@]}"; do
    printf '%-13s %14s\n' "$mode" "$(per_call HIST "$bin" "$mode")"
done
