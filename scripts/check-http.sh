#!/usr/bin/env bash
# Checks the HTTP endpoint (feature `http`) with the real clients that read it:
#   Prometheus        a real server scrapes `tracestat demo --serve` every second; its
#                     /api/v1/query results equal trace_stat/functions   (Debian prometheus)
#   go tool pprof     -raw and -top of /debug/pprof/allocs: Go's allocation sample types;
#   go tool pprof     -top http://.../debug/pprof/profile?seconds=6 of the running demo: its
#                     time total is the window's root time within 1 % (call paths with
#                     self times, not summed inclusive times)            (Debian golang-go)
#   curl              PUT and POST?append=1: refused without --allow-writes (403), without
#                     the token (401); a bad write gets 400 and changes nothing
#   hostile clients   slow clients, oversized headers and bodies, unknown methods, /../,
#                     invalid UTF-8 paths, 200 concurrent connections: every one ends within
#                     its time bound and the server keeps serving; 64 slow readers while
#                     legitimate requests are answered within the request timeout;
#                     anonymous GETs of every path change no record or state; profile
#                     windows concurrent with an administrator's writes; every response
#                     bounded in size                                     (python3)
#   replay --serve    `tracestat replay - --serve` on a pipe serves the replay's profile and
#                     stops on SIGINT
#
# Installs what is missing. A client that cannot be installed is SKIPPED with a loud banner
# (never silently); a check that runs and disagrees FAILS the script.
#
# Usage: scripts/check-http.sh [OUTPUT_DIR]     (default target/http-check)
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-target/http-check}
export PATH="$HOME/.cargo/bin:$PATH"
NOT_CHECKED="The HTTP endpoint was NOT checked by this client in this run."
# shellcheck source=scripts/consumer-lib.sh
. scripts/consumer-lib.sh
PIDS=()
summary() {
  echo "check-http: ${#PASSED[@]} passed, ${#FAILED[@]} failed, ${#SKIPPED[@]} skipped"
  for f in "${FAILED[@]}"; do echo "  FAILED: $f"; done
  for s in "${SKIPPED[@]}"; do echo "  SKIPPED: $s"; done
}
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

echo "=== installing clients (what is missing) ==="
have python3 || apt_install python3 || true
have curl || apt_install curl ca-certificates || true
have go || apt_install golang-go || true
have prometheus || apt_install prometheus || true
if ! have python3 || ! have curl; then
  loud_skip "ALL HTTP checks" "python3 and curl are needed to drive the endpoint and could not be installed"
  summary
  exit 0
fi
have go && go version
have prometheus && prometheus --version 2>&1 | head -1

rm -rf "$OUT"
mkdir -p "$OUT"
echo "=== building tracestat (its default build serves) ==="
if ! cargo build -q -p tracestat-cli --bin tracestat; then
  fail "cargo build -p tracestat-cli --bin tracestat"
  summary
  exit 1
fi
BIN=target/debug/tracestat

# Starts `ARGS...` in the background with standard error to LOG, waits for its
# "serving http://ADDR/" line and sets ADDR and PID.
start_served() {
  local log=$1
  shift
  "$@" <"${STDIN:-/dev/null}" >"$log.out" 2>"$log" &
  PID=$!
  PIDS+=("$PID")
  ADDR=
  for _ in $(seq 100); do
    ADDR=$(sed -n 's#^tracestat: serving http://\([^/]*\)/$#\1#p' "$log")
    [ -n "$ADDR" ] && return 0
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A small workload, so that two of them and Prometheus share two cores.
DEMO=(demo --groups 1 --fds 2 --loops 20)
TOKEN=check-http-token
# A records allocations too (--alloc): its /debug/pprof/allocs is read below.
if ! TRACESTAT_HTTP_TOKEN=$TOKEN start_served "$OUT/demo-a.log" "$BIN" "${DEMO[@]}" \
    --serve 127.0.0.1:0 --allow-writes --alloc; then
  fail "tracestat demo --serve did not start"
  summary
  exit 1
fi
A=$ADDR
echo "writable demo (token set) on $A"
if ! start_served "$OUT/demo-b.log" "$BIN" "${DEMO[@]}" --serve 127.0.0.1:0; then
  fail "tracestat demo --serve (read-only) did not start"
  summary
  exit 1
fi
B=$ADDR
B_PID=$PID
echo "read-only demo on $B"
AUTH="Authorization: Bearer $TOKEN"
code() { curl -s -o "$OUT/body" -w '%{http_code}' "$@"; }

echo "=== curl: writes ==="
ok=1
expect() { # expect WHAT WANT GOT
  if [ "$2" = "$3" ]; then echo "  $1: $3"; else echo "  $1: got $3, expected $2 ($(cat "$OUT/body"))"; ok=0; fi
}
before=$(curl -s "http://$B/options/graph-time")
expect "PUT without --allow-writes" 403 "$(code -X PUT --data 0 "http://$B/options/graph-time")"
expect "  ... file unchanged" "$before" "$(curl -s "http://$B/options/graph-time")"
expect "PUT without the token" 401 "$(code -X PUT --data 0 "http://$A/function_profile_enabled")"
expect "PUT with a wrong token" 401 "$(code -X PUT -H "Authorization: Bearer nope" --data 0 "http://$A/function_profile_enabled")"
expect "  ... profiler still on" "1" "$(curl -s "http://$A/function_profile_enabled")"
expect "bad write" 400 "$(code -X PUT -H "$AUTH" --data maybe "http://$A/options/graph-time")"
grep -q "options/graph-time" "$OUT/body" || { echo "  400 body does not name the file: $(cat "$OUT/body")"; ok=0; }
expect "  ... file unchanged" "1" "$(curl -s "http://$A/options/graph-time")"
expect "POST without append=1" 400 "$(code -X POST -H "$AUTH" --data 'x*' "http://$A/set_ftrace_notrace")"
expect "PUT set_ftrace_notrace" 204 "$(code -X PUT -H "$AUTH" --data 'read_fram*' "http://$A/set_ftrace_notrace")"
expect "POST ?append=1" 204 "$(code -X POST -H "$AUTH" --data 'sender_mai*' "http://$A/set_ftrace_notrace?append=1")"
notrace=$(curl -s "http://$A/set_ftrace_notrace")
case "$notrace" in *read_fram*sender_mai*|*sender_mai*read_fram*) echo "  >> appended: $(echo "$notrace" | tr '\n' ' ')";; *) echo "  append lost: $notrace"; ok=0;; esac
expect "PUT empty notrace" 204 "$(code -X PUT -H "$AUTH" --data '' "http://$A/set_ftrace_notrace")"
# Freeze the counts: the workload keeps running, the profiler stops (its records stay).
expect "PUT 0 with the token" 204 "$(code -X PUT -H "$AUTH" --data 0 "http://$A/function_profile_enabled")"
expect "  ... profiler off" "0" "$(curl -s "http://$A/function_profile_enabled")"
[ $ok = 1 ] && pass "curl: writes need --allow-writes and the token; bad writes get 400 and change nothing" \
  || fail "curl: write behaviour"

curl -s "http://$A/trace_stat/functions?format=json" >"$OUT/functions.json"

echo "=== Prometheus: scrapes /metrics every second ==="
if have prometheus; then
  PPORT=$(free_port)
  cat >"$OUT/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tracestat
    static_configs:
      - targets: ["$A"]
EOF
  prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$OUT/prometheus.log" 2>&1 &
  PIDS+=($!)
  PROM_PID=$!
  # Poll the query API until Prometheus has scraped the frozen counts (or 60 s pass).
  if python3 - "$PPORT" "$OUT/functions.json" <<'EOF'
import json, sys, time, urllib.parse, urllib.request
port, stat = sys.argv[1], json.load(open(sys.argv[2]))
want = {f["name"]: f["hits"] for f in stat["data"]["functions"]}
url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(
    {"query": "tracestat_function_calls_total"})
got, deadline = {}, time.time() + 60
while time.time() < deadline:
    try:
        r = json.load(urllib.request.urlopen(url, timeout=5))
        got = {s["metric"]["function"]: int(float(s["value"][1])) for s in r["data"]["result"]}
        if got == want:
            break
    except Exception as e:  # not up yet
        got = {"error": str(e)}
    time.sleep(0.5)
up = json.load(urllib.request.urlopen(
    f"http://127.0.0.1:{port}/api/v1/query?query=up", timeout=5))["data"]["result"]
print(f"  prometheus: up = {[s['value'][1] for s in up]}")
print(f"  prometheus: {len(got)} series, stat file: {len(want)} functions, "
      f"total calls {sum(v for v in got.values() if isinstance(v, int))} vs {sum(want.values())}")
for name in sorted(set(want) | set(got)):
    if want.get(name) != got.get(name):
        print(f"  DIFFERENT {name}: prometheus {got.get(name)}, stat file {want.get(name)}")
sys.exit(0 if got == want and want else 1)
EOF
  then pass "prometheus: /api/v1/query call counts equal trace_stat/functions"
  else tail -5 "$OUT/prometheus.log"; fail "prometheus: scraped call counts differ from trace_stat/functions"
  fi
  kill "$PROM_PID" 2>/dev/null
else
  loud_skip "Prometheus scrape" "the prometheus package is not installed and could not be installed"
fi

echo "=== anonymous GETs of every path change nothing; windows and admin writes ==="
# A's profiler is off (frozen above): its records and every file stay as they are while an
# anonymous client GETs (and HEADs) every path, a profile window included (409: a window
# never switches the profiler, which would reset it).
if timeout 60 python3 - "$A" "$TOKEN" <<'EOF'
import sys, threading, time, urllib.error, urllib.request
addr, token = sys.argv[1], sys.argv[2]
MAX_BODY = 16 << 20

def req(method, path, body=None, auth=False, timeout=15):
    r = urllib.request.Request(f"http://{addr}{path}", data=body, method=method)
    if auth:
        r.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

ok = True
def check(what, good):
    global ok
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    ok &= bool(good)

status, index = req("GET", "/")
lines = index.decode().splitlines()
files = [l for l in lines if l and not l.startswith("#") and l not in ("metrics", "debug/pprof/")]
check(f"index: {len(lines)} lines, {len(index)} bytes (at most 1000 files listed)",
      status == 200 and len(files) <= 1000)
files = files[:300]
# The profiler is off since the curl checks; the allocation stats (on in a served demo) are
# stopped too, so that the records stand still while the workload runs on.
check("allocation stats stopped", req("PUT", "/options/function-profile-alloc", b"0", auth=True)[0] == 204)
def state():
    return {f: req("GET", "/" + f) for f in files}
before = state()
paths = ["/", "/metrics", "/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/allocs",
         "/options/"]
paths += ["/" + f for f in files] + ["/" + f + "?format=json" for f in files]
largest, statuses = 0, {}
for p in paths:
    for m in ("GET", "HEAD"):
        st, body = req(m, p)
        largest = max(largest, len(body))
        statuses[st] = statuses.get(st, 0) + 1
        if p.startswith("/debug/pprof/profile") and st != 409:
            check(f"{m} {p}: {st}, expected 409 (profiler off)", False)
print(f"  {len(paths)} paths, GET and HEAD: statuses {statuses}, largest body {largest} bytes")
check("every response bounded", largest <= MAX_BODY)
after = state()
changed = [f for f in files if before[f] != after[f]]
check(f"{len(files)} files and the records unchanged by anonymous reads {changed[:5]}", not changed)

# Windows and an administrator's writes, concurrently: enable (a write), a window, a second
# window (409), a reset during the first (409), and the administrator's state stands.
check("admin enables", req("PUT", "/function_profile_enabled", b"1", auth=True)[0] == 204)
res = {}
def window(key, secs):
    res[key] = req("GET", f"/debug/pprof/profile?seconds={secs}", timeout=30)
t = threading.Thread(target=window, args=("first", 2)); t.start()
time.sleep(0.5)
window("second", 1)
check(f"a second window: {res['second'][0]} (409)", res["second"][0] == 409)
check("admin writes graph-time 0 during the window (restarts the run)",
      req("PUT", "/options/graph-time", b"0", auth=True)[0] == 204)
t.join()
check(f"the window over a reset: {res['first'][0]} (409) {res['first'][1][:80]!r}",
      res["first"][0] == 409 and b"reset" in res["first"][1])
check("the administrator's writes stand",
      req("GET", "/options/graph-time")[1] == b"0\n"
      and req("GET", "/function_profile_enabled")[1] == b"1\n")
req("PUT", "/options/graph-time", b"1", auth=True)
check("anonymous writes are refused", req("PUT", "/function_profile_enabled", b"0")[0] == 401)
check("  ... the profiler is still on", req("GET", "/function_profile_enabled")[1] == b"1\n")
sys.exit(0 if ok else 1)
EOF
then pass "anonymous reads change nothing; windows never undo or survive an administrator's writes"
else fail "anonymous reads, windows or admin writes: see above"
fi

echo "=== go tool pprof -top http://.../debug/pprof/profile?seconds=6 ==="
if have go; then
  export PPROF_TMPDIR="$OUT/pprof"
  mkdir -p "$PPROF_TMPDIR"
  # B's demo runs with call paths on: samples are stacks with self times, so their total is
  # the window's root time (the comment), not the sum of inclusive times (many times more).
  # Calls that straddle the window's edges count on one side only, a few ms each: six
  # seconds keep that well under the 1 % (three seconds reached 1.3 % on a loaded host).
  top=$(HOME="$OUT" go tool pprof -top -sample_index=time -unit=ns \
    "http://$B/debug/pprof/profile?seconds=6" 2>&1)
  saved=$(ls "$PPROF_TMPDIR"/*.pb.gz 2>/dev/null | head -1)
  time_top=$(printf '%s\n' "$top" | sed -n 's/.* of \([0-9]*\)ns total.*/\1/p')
  root=""
  [ -n "$saved" ] && root=$(go tool pprof -comments "$saved" 2>&1 \
    | sed -n 's/.*tracestat: root time \([0-9]*\) ns.*/\1/p')
  if python3 - "${time_top:-none}" "${root:-none}" <<'EOF'
import sys
top, root = sys.argv[1], sys.argv[2]
good = top.isdigit() and root.isdigit() and int(root) > 0
off = abs(int(top) - int(root)) / int(root) if good else None
print(f"  go tool pprof -top: total {top} ns; the window's root time {root} ns; off by {off:.3%}"
      if good else f"  go tool pprof -top: total {top}, root {root}")
sys.exit(0 if good and off <= 0.01 else 1)
EOF
  then pass "pprof: go tool pprof -top's total is the window's root time within 1 %"
  else printf '%s\n' "$top" | head -20; fail "pprof: go tool pprof's total is not the window's root time"
  fi
else
  loud_skip "go tool pprof" "golang-go is not installed and could not be installed"
fi

echo "=== go tool pprof -raw / -top http://.../debug/pprof/allocs ==="
if have go; then
  # A ran under tracestat's allocator wrapper with options/function-profile-alloc on (its
  # records stand still since the checks above stopped it): Go's allocation sample types
  # and a non-zero byte total.
  raw=$(HOME="$OUT" go tool pprof -raw "http://$A/debug/pprof/allocs" 2>&1)
  top=$(HOME="$OUT" go tool pprof -top -sample_index=alloc_space "http://$A/debug/pprof/allocs" 2>&1)
  if printf '%s\n' "$raw" | grep -q "^PeriodType: space bytes" \
     && printf '%s\n' "$raw" | grep -q "alloc_objects/count alloc_space/bytes" \
     && printf '%s\n' "$top" | grep -Eq "of [0-9.]*[1-9][0-9.]*[kMG]?B total"
  then pass "allocs: go tool pprof reads alloc_objects/alloc_space ($(printf '%s\n' "$top" | grep -Eo "of [0-9.]+[kMG]?B total"))"
  else printf '%s\n' "$raw" | head -20; printf '%s\n' "$top" | head -10; fail "allocs: go tool pprof could not read /debug/pprof/allocs"
  fi
else
  loud_skip "go tool pprof (allocs)" "golang-go is not installed and could not be installed"
fi

echo "=== hostile clients ==="
if timeout 120 python3 - "$B" <<'EOF'
import socket, sys, threading, time
host, port = sys.argv[1].rsplit(":", 1)
addr = (host, int(port))

def exchange(raw, hold=0.0, timeout=20):
    s = socket.create_connection(addr, timeout=timeout)
    try:
        if raw:
            s.sendall(raw)
        if hold:
            time.sleep(hold)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data
    except (ConnectionResetError, BrokenPipeError) as e:
        return data if 'data' in dir() else b"RESET"
    finally:
        s.close()

def status(data):
    return int(data[9:12]) if data.startswith(b"HTTP/1.1 ") else None

ok = True
def check(what, raw, want, **kw):
    global ok
    t = time.time()
    got = status(exchange(raw, **kw))
    good = got in want
    print(f"  {what}: {got} in {time.time() - t:.1f}s -> {'ok' if good else 'WRONG'}")
    ok &= good

check("unknown method", b"BREW /options/graph-time HTTP/1.1\r\n\r\n", {405})
check("path traversal", b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", {400})
check("encoded traversal", b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\n\r\n", {400})
check("invalid UTF-8 path", b"GET /trace_stat/%ff%c0 HTTP/1.1\r\n\r\n", {400})
check("raw invalid UTF-8 path", b"GET /\xff\xc0\x80 HTTP/1.1\r\n\r\n", {400})
check("oversized header", b"GET / HTTP/1.1\r\nX: " + b"a" * 100000 + b"\r\n\r\n", {431})
check("oversized body", b"PUT /options/graph-time HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", {413})
check("garbage", bytes(range(256)) * 4, {400})
check("slow client (headers never end)", b"GET / HTTP/1.1\r\n", {408})
# 200 concurrent connections, each sending half a request: all end (408 when served,
# 503 over the connection limit), none hangs.
results = []
def half():
    try:
        results.append(status(exchange(b"GET /trace_stat/functions HTTP/1.1\r\n", timeout=30)))
    except Exception as e:
        results.append(type(e).__name__)
t = time.time()
threads = [threading.Thread(target=half) for _ in range(200)]
for th in threads: th.start()
for th in threads: th.join()
counts = {r: results.count(r) for r in set(results)}
print(f"  200 concurrent half requests: {counts} in {time.time() - t:.1f}s")
ok &= len(results) == 200 and set(results) <= {408, 503, None}
# 64 slow readers (the connection limit), each reading 1 KB every 2 s, while legitimate
# clients (retrying a 503 as its Retry-After says) are answered within the request timeout.
stop = time.time() + 15
def slow_reader():
    try:
        s = socket.create_connection(addr, timeout=20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        while time.time() < stop and s.recv(1024):
            time.sleep(2)
        s.close()
    except OSError:
        pass
readers = [threading.Thread(target=slow_reader) for _ in range(64)]
for th in readers: th.start()
time.sleep(1)
waits = []
for _ in range(10):
    t = time.time()
    got = None
    while time.time() - t < 10:
        got = status(exchange(b"GET /options/graph-time HTTP/1.1\r\n\r\n", timeout=10))
        if got != 503:
            break
        time.sleep(0.2)
    waits.append((got, time.time() - t))
    time.sleep(0.3)
worst = max(w for _, w in waits)
print(f"  64 slow readers: 10 legitimate requests: {[g for g, _ in waits]}, longest wait {worst:.1f}s")
ok &= all(g == 200 for g, _ in waits) and worst < 10
for th in readers: th.join()
# Still serving.
check("served afterwards", b"GET /trace_stat/functions HTTP/1.1\r\n\r\n", {200})
sys.exit(0 if ok else 1)
EOF
then
  if kill -0 "$B_PID" 2>/dev/null; then
    pass "hostile clients: each bounded in time, the server keeps serving"
  else
    fail "hostile clients: the server process died"
  fi
else
  fail "hostile clients: a request got the wrong answer or the checks ran past 120 s"
fi

echo "=== replay - --serve ==="
TRACE=tests/data/ftrace-graph-abstime.txt
"$BIN" replay "$TRACE" --quiet >"$OUT/replay.txt" 2>/dev/null
"$BIN" replay "$TRACE" --quiet --format json >"$OUT/replay.json" 2>/dev/null
# A pipe, as from trace_pipe: the writer is `cat`, the reader the replay itself (so $PID is
# the replay, which Ctrl-C / SIGINT stops).
mkfifo "$OUT/trace.fifo"
cat "$TRACE" >"$OUT/trace.fifo" &
PIDS+=($!)
if STDIN="$OUT/trace.fifo" start_served "$OUT/replay.log" "$BIN" replay - --quiet --serve 127.0.0.1:0; then
  R=$ADDR
  # The server starts before the replay has read the pipe to its end: the served profile
  # grows until it has, so wait (10 s at most) for it to reach the replay's.
  want=$(cat "$OUT/replay.txt")
  for _ in $(seq 100); do
    served=$(curl -s "http://$R/trace_stat/functions")
    [ "$served" = "$want" ] && break
    sleep 0.1
  done
  curl -s "http://$R/metrics" >"$OUT/replay.metrics"
  if [ "$served" = "$want" ] && python3 - "$OUT/replay.json" "$OUT/replay.metrics" <<'EOF'
import json, re, sys
doc = json.load(open(sys.argv[1]))
funcs = doc.get("functions") or doc.get("profile", {}).get("functions") or []
want = sum(f["hits"] for f in funcs)
got = sum(int(m) for m in re.findall(r'^tracestat_function_calls_total\{[^}]*\} (\d+)$',
                                      open(sys.argv[2]).read(), re.M))
print(f"  replay --serve: /metrics calls {got}, replay's JSON {want}")
sys.exit(0 if got == want and want > 0 else 1)
EOF
  then pass "replay --serve: trace_stat/functions equals the replay's output, /metrics its totals"
  else
    echo "$served" | head -5; fail "replay --serve: the served profile differs from the replay's"
  fi
  kill -INT "$PID" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$PID" 2>/dev/null; then
    fail "replay --serve: still running after Ctrl-C (SIGINT)"
  else
    pass "replay --serve: Ctrl-C (SIGINT) stops it"
  fi
else
  fail "replay - --serve did not start"
fi

summary
[ ${#FAILED[@]} -eq 0 ]
