#!/usr/bin/env bash
# Lines per second of `tracestat replay` on a large trace, beside the baselines people reach
# for: awk counting the last field (`awk '{c[$NF]++}'`) and a Python script counting the word
# before ` <-` (function traces) or the body after the last `|` (graph traces).
#
# The traces are the samples under tests/data repeated to SIZE_MB (default 100) MB each, one
# function trace and one function_graph trace, written to target/replay-bench/ (not
# committed). Every tool runs once per trace, pinned to one CPU with taskset when available,
# under /usr/bin/time -v when available (wall time and max RSS); output goes to /dev/null.
#
# Usage: scripts/bench-replay.sh            (SIZE_MB=100)
#        SIZE_MB=20 scripts/bench-replay.sh (a quick run)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-100}
dir=target/replay-bench
mkdir -p "$dir"

nice cargo build --release -p tracestat-cli --bin tracestat >&2
bin=target/release/tracestat

# Repeat the seed until the file has SIZE_MB MB (doubling, so it takes a few cats).
make_trace() { # out seed-files...
    local out=$1
    shift
    local want=$((SIZE_MB * 1024 * 1024))
    if [ -f "$out" ] && [ "$(stat -c %s "$out")" -ge "$want" ]; then return; fi
    cat "$@" >"$out.tmp"
    while [ "$(stat -c %s "$out.tmp")" -lt "$want" ]; do
        cat "$out.tmp" "$out.tmp" >"$out.tmp2"
        mv "$out.tmp2" "$out.tmp"
    done
    mv "$out.tmp" "$out"
}
make_trace "$dir/function.txt" tests/data/ftrace-function*.txt tests/data/ftrace-latency-*.txt \
    tests/data/ftrace-trace-pipe-lost.txt tests/data/perf-tools-functrace.txt \
    tests/data/trace-cmd-report-function.txt
make_trace "$dir/graph.txt" tests/data/ftrace-graph*.txt tests/data/perf-tools-funcgraph.txt \
    tests/data/perf-tools-funcslower.txt tests/data/trace-cmd-report-graph.txt

cat >"$dir/count.py" <<'EOF'
import collections, sys
graph = sys.argv[1] == "graph"
c = collections.Counter()
for line in sys.stdin.buffer:
    if graph:
        i = line.rfind(b"|")
        if i >= 0:
            body = line[i + 1:].strip()
            if body:
                c[body.split(b"(")[0]] += 1
    else:
        i = line.find(b" <-")
        if i > 0:
            c[line[:i].rsplit(None, 1)[-1]] += 1
print(len(c))
EOF

pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
timed=()
[ -x /usr/bin/time ] && timed=(/usr/bin/time -v)

# run name trace cmd... -> "seconds maxrss_kb"
measure() {
    local log
    log=$(mktemp)
    local start end
    start=$(date +%s.%N)
    "${timed[@]}" "${pin[@]}" "$@" >/dev/null 2>"$log" || { cat "$log" >&2; exit 1; }
    end=$(date +%s.%N)
    local rss="-"
    if [ ${#timed[@]} -gt 0 ]; then
        rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
    fi
    rm -f "$log"
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }') $rss"
}

printf '%-9s %-22s %12s %9s %14s %12s %8s\n' trace tool lines seconds lines/s "max RSS MB" "x awk"
for kind in function graph; do
    f="$dir/$kind.txt"
    lines=$(wc -l <"$f")
    declare -A secs=() rss=()
    read -r secs[awk] rss[awk] < <(measure awk '{c[$NF]++} END {n=0; for (k in c) n++; print n}' "$f")
    read -r secs[python] rss[python] < <(measure sh -c "python3 $dir/count.py $kind < $f")
    read -r secs[tracestat] rss[tracestat] < <(measure "$bin" replay --quiet "$f")
    read -r secs[tracestat-json] rss[tracestat-json] < <(measure "$bin" replay --quiet --format json "$f")
    for tool in awk python tracestat tracestat-json; do
        label=$tool
        case $tool in
            awk) label="awk '{c[\$NF]++}'" ;;
            python) label="python3 count.py" ;;
            tracestat) label="tracestat replay" ;;
            tracestat-json) label="tracestat replay json" ;;
        esac
        awk -v k="$kind" -v t="$label" -v n="$lines" -v s="${secs[$tool]}" -v r="${rss[$tool]}" \
            -v a="${secs[awk]}" 'BEGIN {
                rate = (s > 0) ? n / s : 0
                mb = (r == "-") ? "-" : sprintf("%.1f", r / 1024)
                printf "%-9s %-22s %12d %9.2f %14.0f %12s %8.2f\n", k, t, n, s, rate, mb, (s > 0) ? a / s : 0
            }'
    done
    unset secs rss
done
echo "file sizes: $(du -m "$dir/function.txt" | cut -f1) MB, $(du -m "$dir/graph.txt" | cut -f1) MB; machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
