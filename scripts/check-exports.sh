#!/usr/bin/env bash
# Checks every export format with the real tool that consumes it, and that the totals the
# tool reports equal ours:
#   pprof        go tool pprof -raw / -top          (Debian golang-go); also `diff --pprof`
#   folded       inferno-flamegraph renders an SVG   (crates.io inferno)
#   Prometheus   promtool check metrics              (Debian prometheus)
#   OpenMetrics  prometheus_client parsers           (PyPI prometheus_client)
#   JSON         python's json module, schema and totals
# The inputs come from `cargo run -p tracestat-cli --example export_sample` (a profile with
# awkward names), which also writes expected.json, the totals every consumer must report.
#
# Installs what is missing. A tool that cannot be installed is SKIPPED with a loud banner
# (never silently); a check that runs and disagrees FAILS the script.
#
# Usage: scripts/check-exports.sh [OUTPUT_DIR]     (default target/export-check)
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-target/export-check}
export PATH="$HOME/.cargo/bin:$PATH"
NOT_CHECKED="This export format was NOT checked by its real consumer in this run."
# shellcheck source=scripts/consumer-lib.sh
. scripts/consumer-lib.sh

echo "=== installing consumers (what is missing) ==="
# python3 compares every total; without it nothing can be checked.
have python3 || apt_install python3 python3-pip || true
if ! have python3; then
  loud_skip "ALL export checks" "python3 is not installed and could not be installed"
  echo "check-exports: 0 passed, 0 failed, ${#SKIPPED[@]} skipped"
  exit 0
fi
have go || apt_install golang-go || true
have promtool || apt_install prometheus || true
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
  nice python3 -m pip install -q prometheus_client >/dev/null 2>&1 \
    || apt_install python3-prometheus-client || true
fi
if ! have inferno-flamegraph; then
  echo "cargo install inferno --locked (a few minutes on 2 cores)"
  nice cargo install -q inferno --locked >/dev/null 2>&1 || true
fi
have go && go version
have promtool && promtool --version 2>&1 | head -1
python3 -c 'import prometheus_client, importlib.metadata as m; print("prometheus_client", m.version("prometheus_client"))' 2>/dev/null
have inferno-flamegraph && echo "inferno-flamegraph: $(command -v inferno-flamegraph)"

echo "=== generating the sample exports into $OUT ==="
rm -rf "$OUT"
if ! cargo run -q -p tracestat-cli --example export_sample -- "$OUT"; then
  fail "export_sample example (could not generate the files)"
  echo "check-exports: ${#PASSED[@]} passed, ${#FAILED[@]} failed, ${#SKIPPED[@]} skipped"
  exit 1
fi

# Compares "name value" lines on stdin with expected.json; prints each comparison, and fails
# on a difference or when nothing at all was compared.
cat >"$OUT/compare.py" <<'EOF'
import json, sys
exp = json.load(open(sys.argv[1]))
label = sys.argv[2]
ok, n = True, 0
for line in sys.stdin:
    if line.startswith("#"):  # information from the consumer's side, shown as is
        print(f"  {label}: {line[1:].strip()}")
        continue
    key, got = line.split()
    want = exp
    for part in key.split("."):
        want = want[int(part)] if isinstance(want, list) else want[part]
    if "." in got:
        good = abs(float(got) - float(want)) <= 1e-9 * max(1.0, abs(float(want))) + 1e-6
    else:
        good = got.isdigit() and int(got) == int(want)
    print(f"  {label}: {key}: consumer {got}, ours {want} -> {'equal' if good else 'DIFFERENT'}")
    ok &= good
    n += 1
if n == 0:
    print(f"  {label}: the consumer reported nothing to compare")
sys.exit(0 if ok and n > 0 else 1)
EOF
compare() { python3 "$OUT/compare.py" "$OUT/expected.json" "$1"; }

echo "=== pprof: go tool pprof ==="
if have go; then
  for kind in paths functions; do
    f="$OUT/$kind.pb.gz"
    if ! raw=$(go tool pprof -raw "$f" 2>&1); then
      echo "$raw"; fail "pprof $kind: go tool pprof -raw could not read $f"; continue
    fi
    # Samples section: "<calls> <time>: <location ids>", up to "Locations".
    sums=$(printf '%s\n' "$raw" | awk '
      /^Samples:/ {s=1; next} /^Locations/ {s=0}
      s && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+:$/ {c+=$1; sub(":", "", $2); t+=$2; n++}
      END {printf "%s.calls %.0f\n%s.time_ns %.0f\n%s.samples %d\n", k, c, k, t, k, n}' k="$kind")
    calls_top=$(go tool pprof -top -sample_index=calls "$f" 2>&1 | sed -n 's/.* of \([0-9]*\) total.*/\1/p')
    time_top=$(go tool pprof -top -sample_index=time -unit=ns "$f" 2>&1 | sed -n 's/.* of \([0-9]*\)ns total.*/\1/p')
    if printf '# -raw, summed over its samples:\n%s\n# -top, its "of N total" lines:\n%s.calls %s\n%s.time_ns %s\n' \
      "$sums" "$kind" "${calls_top:-none}" "$kind" "${time_top:-none}" \
      | compare "go tool pprof ($kind)"; then
      pass "pprof $kind: go tool pprof -raw and -top totals equal ours"
    else
      fail "pprof $kind: go tool pprof totals differ from ours"
    fi
  done
else
  loud_skip "pprof (go tool pprof)" "golang-go is not installed and could not be installed"
fi

echo "=== folded stacks: inferno-flamegraph ==="
if have inferno-flamegraph; then
  if inferno-flamegraph --title "tracestat export check" "$OUT/profile.folded" >"$OUT/flame.svg" 2>"$OUT/inferno.err"; then
    # The SVG must be well-formed XML, and its root frame must hold all the weight.
    if python3 - "$OUT/flame.svg" <<'EOF' | compare "inferno-flamegraph"
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
frames = len(titles)
total = next(re.sub(r"[^0-9]", "", m.group(1)) for t in titles
             for m in [re.match(r"all \(([0-9,]+) samples", t)] if m)
print("folded_total", total)
print(f"# {frames} frames drawn, SVG well-formed")
EOF
    then pass "folded: inferno-flamegraph rendered $OUT/flame.svg with our total"
    else fail "folded: the SVG is malformed or its total differs"
    fi
  else
    cat "$OUT/inferno.err"; fail "folded: inferno-flamegraph refused $OUT/profile.folded"
  fi
else
  loud_skip "folded stacks (inferno-flamegraph)" "cargo install inferno --locked failed"
fi

echo "=== Prometheus text: promtool check metrics ==="
if have promtool; then
  if lint=$(promtool check metrics <"$OUT/metrics.prom" 2>&1) && [ -z "$lint" ]; then
    pass "prometheus: promtool check metrics accepts metrics.prom (no lint problem)"
  else
    echo "$lint"; fail "prometheus: promtool check metrics rejected metrics.prom"
  fi
else
  loud_skip "Prometheus text (promtool)" "the prometheus package is not installed and could not be installed"
fi

echo "=== OpenMetrics and Prometheus text: prometheus_client parsers ==="
if python3 -c 'import prometheus_client' >/dev/null 2>&1; then
  for fmt in om prom; do
    if python3 - "$OUT/metrics.$fmt" "$OUT/profile.json" "$fmt" <<'EOF' | compare "prometheus_client ($fmt)"
import json, sys
if sys.argv[3] == "om":
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
else:
    from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
def total(name, sample):
    return sum(s.value for s in fams[name].samples if s.name == sample)
print("metrics.function_calls", int(total("tracestat_function_calls", "tracestat_function_calls_total")))
print("metrics.function_time_ns", repr(total("tracestat_function_time_seconds",
      "tracestat_function_time_seconds_total") * 1e9 + 0.0))
print("metrics.dropped", int(total("tracestat_dropped", "tracestat_dropped_total")))
print("metrics.counters", int(total("tracestat_context_switches", "tracestat_context_switches_total")
      + total("tracestat_lost_events", "tracestat_lost_events_total")))
hists = []
for f in fams.values():
    if f.type != "histogram":
        continue
    series = {}
    for s in f.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        d = series.setdefault(key, {"buckets": 0})
        if s.name.endswith("_count"): d["count"] = int(s.value)
        elif s.name.endswith("_sum"): d["sum"] = int(s.value)
        elif s.name.endswith("_bucket"):
            d["buckets"] += 1
            if s.labels["le"] == "+Inf": d["inf"] = int(s.value)
    for key, d in series.items():
        assert d["inf"] == d["count"], f"+Inf bucket {d['inf']} != count {d['count']}"
        hists.append(d)
# Label values must come back exactly as the names we exported (escaping round trip); a
# carriage return, which neither format can carry, comes back as the two characters \r.
names = {f["name"].replace("\r", "\\r") for f in json.load(open(sys.argv[2]))["functions"]}
got = {s.labels["function"] for s in fams["tracestat_function_calls"].samples}
assert got == names, f"function label values differ: {sorted(got ^ names)!r}"
print(f"# {len(fams)} families parsed; function label values equal the exported names "
      f"({len(names)}); every +Inf bucket equals its _count")
# Histograms in the order of the profile: match them by (count, sum).
exp = json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/expected.json"))["metrics"]["histograms"]
for i, e in enumerate(exp):
    d = next(h for h in hists if h["count"] == e["count"] and h["sum"] == e["sum"])
    print(f"metrics.histograms.{i}.count", d["count"])
    print(f"metrics.histograms.{i}.sum", d["sum"])
    print(f"metrics.histograms.{i}.buckets", d["buckets"])
EOF
    then pass "metrics.$fmt: prometheus_client parsed it, totals equal ours"
    else fail "metrics.$fmt: prometheus_client rejected it or its totals differ"
    fi
  done
else
  loud_skip "OpenMetrics (prometheus_client)" "pip install prometheus_client failed"
fi

echo "=== JSON: python json ==="
if python3 - "$OUT" <<'EOF' | compare "python json"
import json, sys
d = sys.argv[1]
p = json.load(open(f"{d}/profile.json"))
assert (p["schema"], p["version"]) == ("tracestat.profile", 1), (p["schema"], p["version"])
s = json.load(open(f"{d}/stat_files.json"))
assert (s["schema"], s["version"]) == ("tracestat.stat_files", 1)
print("functions.calls", sum(f["hits"] for f in p["functions"]))
print("functions.time_ns", sum(f["time_ns"] or 0 for f in p["functions"]))
print("paths.calls", sum(x["hits"] for x in p["paths"]))
print("paths.time_ns", sum(x["self_time_ns"] or 0 for x in p["paths"]))
print("function_names", len(s["files"][0]["rows"]))
EOF
then pass "json: python reads profile.json and stat_files.json, totals equal ours"
else fail "json: schema or totals differ"
fi

echo "=== round trip: a replayed kernel trace, its stat file against go tool pprof ==="
# The stat file (graph-time off: self time per function) and the pprof profile (call paths
# with self time) of the same real function_graph trace must agree on total calls and time.
TRACE=tests/data/ftrace-graph-do-fault.txt
if have go; then
  if cargo run -q -p tracestat-cli -- replay "$TRACE" --graph-time off -q >"$OUT/replay_stat.txt" \
    && cargo run -q -p tracestat-cli -- replay "$TRACE" --format pprof -q --output "$OUT/replay.pb.gz"; then
    stat=$(python3 - "$OUT/replay_stat.txt" <<'PY'
import sys
calls = time_ns = 0
for line in open(sys.argv[1]).read().splitlines()[2:]:
    f = line.split()
    calls += int(f[1])
    time_ns += round(float(f[2]) * 1000)
print(calls, time_ns)
PY
)
    calls_top=$(go tool pprof -top -sample_index=calls "$OUT/replay.pb.gz" 2>&1 | sed -n 's/.* of \([0-9]*\) total.*/\1/p')
    time_top=$(go tool pprof -top -sample_index=time -unit=ns "$OUT/replay.pb.gz" 2>&1 | sed -n 's/.* of \([0-9]*\)ns total.*/\1/p')
    echo "  stat file: calls time_ns = $stat; go tool pprof: $calls_top $time_top"
    if [ -n "$calls_top" ] && [ "$stat" = "$calls_top $time_top" ]; then
      pass "round trip: go tool pprof totals of a replayed trace equal its stat file"
    else
      fail "round trip: go tool pprof totals differ from the stat file"
    fi
  else
    fail "round trip: tracestat replay failed on $TRACE"
  fi
else
  loud_skip "round trip (go tool pprof)" "golang-go is not installed and could not be installed"
fi

echo "=== diff --pprof: the pair's go tool pprof totals equal the stat file's self times ==="
# Samples are call paths with self times, so pprof's totals are the trace's calls and self
# time (the stat file with graph-time off), not summed inclusive times; -diff_base of a run
# against itself is 0.
if have go; then
  rm -rf "$OUT/diff-pprof"
  if [ -f "$OUT/replay_stat.txt" ] \
    && cargo run -q -p tracestat-cli -- diff "$TRACE" "$TRACE" --pprof "$OUT/diff-pprof" >/dev/null; then
    ok=1
    for f in before after; do
      calls_top=$(go tool pprof -top -sample_index=calls "$OUT/diff-pprof/$f.pb.gz" 2>&1 | sed -n 's/.* of \([0-9]*\) total.*/\1/p')
      time_top=$(go tool pprof -top -sample_index=time -unit=ns "$OUT/diff-pprof/$f.pb.gz" 2>&1 | sed -n 's/.* of \([0-9]*\)ns total.*/\1/p')
      echo "  $f.pb.gz: go tool pprof $calls_top $time_top; stat file $stat"
      [ -n "$calls_top" ] && [ "$stat" = "$calls_top $time_top" ] || ok=0
    done
    base=$(go tool pprof -top -sample_index=time -unit=ns -diff_base "$OUT/diff-pprof/before.pb.gz" \
      "$OUT/diff-pprof/after.pb.gz" 2>&1 | grep -c '%' )
    flat=$(go tool pprof -top -sample_index=time -unit=ns -diff_base "$OUT/diff-pprof/before.pb.gz" \
      "$OUT/diff-pprof/after.pb.gz" 2>&1 | sed -n 's/.*accounting for \(-\?[0-9]*\)\(ns\)\?,.*/\1/p')
    echo "  -diff_base of a run against itself: ${flat:-?}ns ($base lines with a percentage)"
    [ "${flat:-x}" = 0 ] || ok=0
    if [ $ok = 1 ]; then pass "diff --pprof: call paths with self times; totals equal the stat file's"
    else fail "diff --pprof: go tool pprof totals differ from the stat file's self times"
    fi
  else
    fail "diff --pprof: tracestat diff failed on $TRACE (or the round trip's stat file is missing)"
  fi
else
  loud_skip "diff --pprof (go tool pprof)" "golang-go is not installed and could not be installed"
fi

echo "=== a replayed trace's metrics (--latency: latency histograms included): promtool ==="
if have promtool; then
  if cargo run -q -p tracestat-cli -- replay "$TRACE" --latency --format prometheus -q >"$OUT/replay.prom" \
    && grep -q 'function_latency_bucket' "$OUT/replay.prom" \
    && promtool check metrics <"$OUT/replay.prom"; then
    pass "replay metrics: promtool accepts them, latency histograms included"
  else
    fail "replay metrics: promtool rejected them (or no latency histogram)"
  fi
else
  loud_skip "replay metrics (promtool)" "prometheus is not installed and could not be installed"
fi

echo
echo "=== export checks: ${#PASSED[@]} passed, ${#FAILED[@]} failed, ${#SKIPPED[@]} skipped ==="
for s in "${SKIPPED[@]}"; do echo "!!! SKIPPED (not checked): $s"; done
for f in "${FAILED[@]}"; do echo "FAILED: $f"; done
echo "check-exports: ${#PASSED[@]} passed, ${#FAILED[@]} failed, ${#SKIPPED[@]} skipped"
[ "${#FAILED[@]}" = 0 ]
