#!/usr/bin/env bash
# Runs every target of fuzz/ for a fixed budget, built the way `cargo fuzz build -O` builds
# them, without installing cargo-fuzz (compiling it took 3 to 4 minutes of every fresh CI
# machine).
#
#   scripts/fuzz.sh [SECONDS]        # each target SECONDS (default: $FUZZ_SECONDS, else 15)
#
# The flags are cargo-fuzz's for `-O` with the address sanitizer: libFuzzer's coverage
# instrumentation (inline 8-bit counters, the PC table, compare tracing, stack depth),
# `--cfg fuzzing`, one codegen unit, and `--target` so that build scripts and proc macros are
# built without them. Debug assertions are off, as with `-O` (with them the build took twice
# as long: 3 minutes on 2 cores). A target runs from the corpus it left last time
# (fuzz/corpus/<target>/, ignored by git) and saves a failing input under
# fuzz/artifacts/<target>/.
#
# Needs a nightly compiler for the sanitizer flags: `cargo +nightly` when installed, else the
# stable compiler with RUSTC_BOOTSTRAP=1. Exit status: 0 every target ran its budget without a
# finding; 1 a target found a crash, a leak, an out-of-memory (over 2 GiB) or an input slower
# than 10 s; 2 the targets did not build.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds=${1:-${FUZZ_SECONDS:-15}}
triple=$(rustc -vV | sed -n 's/^host: //p')
if cargo +nightly --version >/dev/null 2>&1; then
  cargo=(cargo +nightly)
else
  echo "fuzz.sh: no nightly toolchain; building with the stable compiler and RUSTC_BOOTSTRAP=1"
  cargo=(cargo)
  export RUSTC_BOOTSTRAP=1
fi

flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  -Cllvm-args=-simplifycfg-branch-fold-threshold=0
  -Cllvm-args=-sanitizer-coverage-stack-depth
  --cfg fuzzing
  -Clink-dead-code
  -Zsanitizer=address
  -Ccodegen-units=1
)
export RUSTFLAGS="${flags[*]} ${RUSTFLAGS:-}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"
# Line tables only (cargo-fuzz asks for full debug info): a finding's stack trace keeps its
# files and lines, and the build takes 143 s instead of 165 on 2 cores.
build=(--release --config 'profile.release.debug="line-tables-only"' --target "$triple")

"${cargo[@]}" build "${build[@]}" --bins || exit 2

# The targets are the package's binaries, as Cargo.toml lists them. libFuzzer runs on one
# core, so FUZZ_JOBS targets (default: one a CPU) run at a time, each with its whole budget;
# a target's output is printed when it ends.
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^tracestat-fuzz$')
[ -n "$targets" ] || { echo "fuzz.sh: no target found in fuzz/Cargo.toml" >&2; exit 2; }
jobs=${FUZZ_JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fuzz() { # TARGET: runs it, its output in $logs/TARGET.log
  mkdir -p "corpus/$1" "artifacts/$1"
  "target/$triple/release/$1" -artifact_prefix="artifacts/$1/" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "corpus/$1" >"$logs/$1.log" 2>&1
}
declare -A running=() # pid -> target
failed=()
reap() { # waits for one target to end, prints its output, notes a finding
  local pid
  wait -n -p pid "${!running[@]}" && rc=0 || rc=$?
  echo "--- $(printf '%s' "${running[$pid]}") (${seconds}s): exit $rc"
  cat "$logs/${running[$pid]}.log"
  [ "$rc" -eq 0 ] || failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for target in $targets; do
  [ "${#running[@]}" -lt "$jobs" ] || reap
  fuzz "$target" &
  running[$!]=$target
done
while [ "${#running[@]}" -gt 0 ]; do reap; done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: a finding in ${failed[*]} (the input is under fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: every target ran ${seconds}s without a finding"
