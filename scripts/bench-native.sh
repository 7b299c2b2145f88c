#!/usr/bin/env bash
# Native programs under tracestat record against uftrace, same binary, interleaved rounds.
#
# Workloads, built from registry packages' sources:
#   fib      a recursive fib(31), three times: 13 M calls of one tiny function (the worst
#            case; 6.5 M with -pg and clang, whose code turns one of its two calls into a loop;
#            the argument is read from a volatile, else clang computes fib(31) once)
#   bzip2    bzip2's command line compressing its own sources 16 times (~5.6 MB)
# each built three times: gcc -O2 -finstrument-functions; gcc -O2 -pg -mfentry (compiled so,
# linked without -pg: no gprof start-up, glibc's __fentry__ a bare `ret`); and with nop'd
# entries (-pg -mfentry -mnop-mcount -mrecord-mcount, non-PIC), patched live; and, where
# clang is installed, with XRay sleds (clang -O2 -fxray-instrument
# -fxray-instruction-threshold=1, non-PIE), patched live, whose uftrace figure is taken on
# clang's -pg build of the same sources (uftrace does not patch XRay sleds).
# Modes, each round in a rotated order (f... : the -pg -mfentry binary; n... : the nop'd one):
#   plain    the workload built without instrumentation
#   bare     the instrumented binary, glibc's empty __cyg_profile_func_* hooks
#   count    LD_PRELOAD=libtracestat_preload.so, counting hits (--timing 0)
#   timed    LD_PRELOAD=libtracestat_preload.so, timing calls (the default)
#   uftrace  uftrace record --no-libcall, its data written to a directory in /dev/shm (RAM)
#            where there is one, so that a slow or busy disk cannot slow uftrace and flatter
#            the ratios (on host C the two read the same); else beside the workloads
#   ref      the -finstrument-functions binary under scripts/native-floor.c's hooks: the
#            profiler's timed record of every call and nothing else (the floor on this host)
#   fbare fcount ftimed fuftrace fref   the same five with the -pg -mfentry binary (the
#            floor's __fentry__ and return trampoline)
#   nbare ncount ntimed nuftrace   the same with the nop'd binary (uftrace -P . patches it)
#   nnone    the nop'd binary under the library with only `main` selected (the others nops)
#   nempty nstart   an empty nop'd program alone and under the library: its start-up
#   xbare xcount xtimed   the XRay binary alone and under the library
#   xref     the XRay sources linked with scripts/native-floor.c's XRay handler, called by
#            compiler-rt's own runtime (sleds patched at start, every register saved)
#   mbare xuftrace        clang's -pg build (linked without -pg) alone and under uftrace
# Prints the median wall time per mode and each mode's overhead over its `bare` as a
# fraction of uftrace's on the same binary (the targets: timed <= 0.3, count <= 0.1).
#
# Usage: scripts/bench-native.sh [ROUNDS]   (default 7; needs gcc and uftrace; clang for XRay)
#        scripts/bench-native.sh --build DIR   builds the workloads, their input and the
#                                              release library into DIR, runs nothing
#        scripts/bench-native.sh --run DIR [ROUNDS]   measures what --build left in DIR (needs
#                                              uftrace only: for a host without a compiler)
set -euo pipefail
cd "$(dirname "$0")/.."
phase=all
case ${1:-} in
  --build) phase=build work=${2:?--build needs a directory} ;;
  --run) phase=run work=${2:?--run needs a directory} rounds=${3:-7} ;;
  *) rounds=${1:-7} work=$(mktemp -d /tmp/bench-native.XXXXXX) scratch=1 ;;
esac
mkdir -p "$work"
work=$(cd "$work" && pwd)
lib=$work/libtracestat_preload.so
# uftrace's data (see `uftrace` above); it and a scratch $work are removed at exit.
udata=
trap 'rm -rf ${udata:+"$udata"}; [ -z "${scratch:-}" ] || rm -rf "$work"' EXIT
if [ "$phase" != build ]; then
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    udata=$(mktemp -d /dev/shm/bench-native-uftrace.XXXXXX)
  else
    udata=$(mktemp -d "$work/uftrace.XXXXXX")
  fi
fi

# The workloads, their input, the floor's hooks and a copy of the release library, in $work.
build() {
  cargo build --release -q -p tracestat-preload
  cp target/release/libtracestat_preload.so "$lib"
  src=$(cargo metadata --format-version 1 --manifest-path tracestat-preload/Cargo.toml |
    sed -n 's/.*"manifest_path":"\([^"]*bzip2-sys[^"]*\)\/Cargo.toml".*/\1/p' | head -1)
  bz=$src/bzip2-1.0.8
  [ -d "$bz" ] || { echo "bzip2-sys sources not found" >&2; exit 1; }

  cat >"$work/fib.c" <<'EOF'
#include <stdio.h>
__attribute__((noinline)) static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static volatile int arg = 31;
int main(void) { long s = 0; for (int i = 0; i < 3; i++) s += fib(arg); printf("%ld\n", s); return 0; }
EOF
  bzsrc=("$bz"/{bzip2,blocksort,huffman,crctable,randtable,compress,decompress,bzlib}.c)
  gcc -O2 -o "$work/fib.plain" "$work/fib.c"
  gcc -O2 -finstrument-functions -o "$work/fib" "$work/fib.c"
  gcc -O2 -D_FILE_OFFSET_BITS=64 -o "$work/bzip2.plain" "${bzsrc[@]}"
  gcc -O2 -D_FILE_OFFSET_BITS=64 -finstrument-functions -o "$work/bzip2" "${bzsrc[@]}"
  # -pg -mfentry objects linked without -pg (no gcrt1.o: no gprof timer, no gmon.out).
  fentry() { # OUT SOURCES...
    local out=$1 objs=() d
    shift
    d=$(mktemp -d "$work/obj.XXXXXX")
    for c in "$@"; do
      gcc -O2 -D_FILE_OFFSET_BITS=64 -pg -mfentry -c -o "$d/$(basename "$c" .c).o" "$c"
      objs+=("$d/$(basename "$c" .c).o")
    done
    gcc -o "$out" "${objs[@]}"
  }
  fentry "$work/fib.fentry" "$work/fib.c"
  fentry "$work/bzip2.fentry" "${bzsrc[@]}"
  # Nop'd entries (the kernel's recipe: nop'd -mfentry calls listed in __mcount_loc; non-PIC),
  # patched into calls only where a filter selects.
  nopd=(-O2 -D_FILE_OFFSET_BITS=64 -pg -mfentry -mnop-mcount -mrecord-mcount -fno-pie -no-pie)
  gcc "${nopd[@]}" -o "$work/fib.nop" "$work/fib.c"
  gcc "${nopd[@]}" -o "$work/bzip2.nop" "${bzsrc[@]}"
  # XRay sleds and clang's -pg (objects compiled with -pg, linked without: no gprof start-up).
  if command -v clang >/dev/null; then
    xr=(-O2 -D_FILE_OFFSET_BITS=64 -fxray-instrument -fxray-instruction-threshold=1 -fno-pie -no-pie)
    clang "${xr[@]}" -o "$work/fib.xray" "$work/fib.c"
    clang "${xr[@]}" -o "$work/bzip2.xray" "${bzsrc[@]}"
    clang -O2 -DFLOOR_XRAY -c -o "$work/floor-xray.o" scripts/native-floor.c
    clang "${xr[@]}" -o "$work/fib.xfloor" "$work/fib.c" "$work/floor-xray.o"
    clang "${xr[@]}" -o "$work/bzip2.xfloor" "${bzsrc[@]}" "$work/floor-xray.o"
    clangpg() { # OUT SOURCES...
      local out=$1 objs=() d
      shift
      d=$(mktemp -d "$work/obj.XXXXXX")
      for c in "$@"; do
        clang -O2 -D_FILE_OFFSET_BITS=64 -pg -c -o "$d/$(basename "$c" .c).o" "$c"
        objs+=("$d/$(basename "$c" .c).o")
      done
      clang -o "$out" "${objs[@]}"
    }
    clangpg "$work/fib.mcount" "$work/fib.c"
    clangpg "$work/bzip2.mcount" "${bzsrc[@]}"
  fi
  gcc -O2 -fPIC -shared -ftls-model=initial-exec -o "$work/floor.so" scripts/native-floor.c
  # The library's start-up alone (symbol tables, patching, clock calibration): an empty main.
  echo 'int main(void) { return 0; }' >"$work/empty.c"
  gcc "${nopd[@]}" -o "$work/empty.nop" "$work/empty.c"
  for _ in $(seq 16); do cat "$bz"/words* "$bz"/*.c "$bz"/manual.html; done >"$work/input"
}
[ "$phase" = build ] || command -v uftrace >/dev/null || { echo "uftrace is not installed" >&2; exit 1; }
[ "$phase" = run ] || build
[ "$phase" = build ] && { echo "built into $work"; exit 0; }
xray=0
[ -x "$work/fib.xray" ] && xray=1

# run WORKLOAD MODE: the wall time in ms of one run.
run() {
  local w=$1 mode=$2 bin=$work/$1 args=()
  [ "$w" = bzip2 ] && args=(-zc "$work/input")
  [ "$mode" = plain ] && bin=$work/$w.plain
  local filter=() patch=()
  case $mode in
    f*) bin=$work/$w.fentry mode=${mode#f} ;;
    n*) bin=$work/$w.nop mode=${mode#n} patch=(-P .) ;;
    x*) bin=$work/$w.xray mode=${mode#x} ;;
    m*) bin=$work/$w.mcount mode=${mode#m} ;;
  esac
  case $mode in empty | start) bin=$work/empty.nop args=() ;; esac
  [ "$mode" = empty ] && mode=bare
  # none: under the library with only `main` selected, every other site left a nop.
  case $mode in none | start) mode=count filter=(TRACESTAT_FILTER=main) ;; esac
  local t0 t1
  t0=$(date +%s%N)
  case $mode in
    # Through env as the library's runs are, so that its exec is in every mode's time.
    plain | bare) env "$bin" "${args[@]}" >/dev/null ;;
    ref)
      if [ "$bin" = "$work/$w.xray" ]; then
        env "$work/$w.xfloor" "${args[@]}" >/dev/null
      else
        env LD_PRELOAD="$work/floor.so" "$bin" "${args[@]}" >/dev/null
      fi
      ;;
    count | timed)
      # The library profiles only a child of TRACESTAT_PARENT: this (sub)shell.
      rm -f "$work/profile"
      env "${filter[@]}" LD_PRELOAD=$lib TRACESTAT_PARENT=$BASHPID TRACESTAT_OUTPUT=$work/profile \
        TRACESTAT_TIMING=$([ "$mode" = count ] && echo 0 || echo 1) "$bin" "${args[@]}" >/dev/null
      ;;
    uftrace)
      [ "$bin" = "$work/$w.xray" ] && bin=$work/$w.mcount
      rm -rf "$udata/data"
      uftrace record "${patch[@]}" --no-libcall -d "$udata/data" "$bin" "${args[@]}" >/dev/null 2>&1 ;;
  esac
  t1=$(date +%s%N)
  if [ "$mode" = count ] || [ "$mode" = timed ]; then
    [ -s "$work/profile" ] || { echo "$w $mode: no profile written" >&2; exit 1; }
  fi
  echo $(((t1 - t0) / 1000000))
}

modes=(plain bare count timed uftrace ref fbare fcount ftimed fuftrace fref nbare nnone ncount ntimed
  nuftrace nempty nstart)
[ "$xray" = 1 ] && modes+=(xbare xcount xtimed mbare xuftrace)
# (A directory --build made before the XRay floor existed has no xfloor binaries.)
xfloor=0
[ "$xray" = 1 ] && [ -x "$work/fib.xfloor" ] && xfloor=1 && modes+=(xref)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The median that uftrace's overhead on kind $1 is taken over: its binary alone; for XRay,
# clang's -pg build alone (uftrace runs that build, not the sleds).
ubare() { if [ "$1" = x ]; then echo "${med[mbare]}"; else echo "${med[${1}bare]}"; fi; }
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $rounds rounds"
for w in fib bzip2; do
  declare -A times=()
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ${#modes[@]}; k++)); do
      m=${modes[$(((k + r) % ${#modes[@]}))]}
      times[$m]+="$(run "$w" "$m") "
    done
  done
  declare -A med=()
  for m in "${modes[@]}"; do med[$m]=$(tr ' ' '\n' <<<"${times[$m]}" | grep . | median); done
  printf '%-6s' "$w"
  for m in "${modes[@]}"; do printf '  %s %d ms' "$m" "${med[$m]}"; done
  echo
  awk -v b="${med[nbare]}" -v n="${med[nnone]}" -v s="$((med[nstart] - med[nempty]))" \
    'BEGIN { printf "  nop     no site selected: %.3fx the nop\x27d binary alone; %.3fx without the library\x27s start-up (%d ms)\n", n / b, (n - s) / b, s }'
  kinds=("" f n)
  [ "$xray" = 1 ] && kinds+=(x)
  for f in "${kinds[@]}"; do
    ub=$(ubare "$f")
    awk -v k="$(case $f in "") echo cyg ;; f) echo fentry ;; n) echo nop ;; x) echo xray ;; esac)" \
      -v b="${med[${f}bare]}" -v ub="$ub" \
      -v c="${med[${f}count]}" -v t="${med[${f}timed]}" -v u="${med[${f}uftrace]}" \
      'BEGIN { o = u - ub; if (o <= 0) { printf "  %s: uftrace added nothing measurable\n", k; exit }
               printf "  %-6s overhead vs uftrace: count %.2fx  timed %.2fx  (uftrace +%d ms)\n",
                      k, (c - b) / o, (t - b) / o, o }'
  done
  floors=("" f)
  [ "$xfloor" = 1 ] && floors+=(x)
  for f in "${floors[@]}"; do
    ub=$(ubare "$f")
    awk -v b="${med[${f}bare]}" -v r="${med[${f}ref]}" -v u="${med[${f}uftrace]}" -v ub="$ub" \
      -v k="$(case $f in "") echo -finstrument-functions ;; f) echo '-pg -mfentry' ;; x) echo 'XRay, compiler-rt' ;; esac)" \
      'BEGIN { if (u > ub) printf "  floor  (scripts/native-floor.c, %s) timed %.2fx\n", k, (r - b) / (u - ub) }'
  done
  unset times med
done
# What the rounds left beside the built files.
rm -rf "$work/profile"
