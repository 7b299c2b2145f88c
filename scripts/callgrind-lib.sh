# Shared by scripts/instructions*.sh (source it; not a script of its own).
# A bench binary with a callgrind mode reads <PREFIX>_CALLGRIND=<mode> and <PREFIX>_CALLS=<n>
# and calls one path n times inside `measure_loop` (benches/common/mod.rs). Each path runs
# twice, with N1 and N2 calls; the figure is (Ir(N2) - Ir(N1)) / (N2 - N1), so one-time
# costs cancel and the result is exact and stable run to run (callgrind counts
# instructions, not time: machine load does not change it).
N1=1000
N2=11000

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 2; }
cg_tmp=$(mktemp -d)
trap 'rm -rf "$cg_tmp"' EXIT

# bench_bin NAME [CARGO_ARGS...]: builds bench NAME of the package in the current directory
# (with any further cargo arguments, e.g. -p tracestat-benches, --features) and prints the
# executable's path.
bench_bin() {
    local bin
    bin=$(cargo bench --bench "$1" "${@:2}" --no-run --message-format=json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | grep "/$1-" | tail -1)
    [ -x "$bin" ] || { echo "could not build the $1 bench binary" >&2; exit 2; }
    echo "$bin"
}

# ir PREFIX BIN MODE CALLS: the Ir collected inside measure_loop.
ir() {
    env "$1_CALLGRIND=$3" "$1_CALLS=$4" valgrind --tool=callgrind \
        --callgrind-out-file="$cg_tmp/out" --toggle-collect='*measure_loop*' "$2" \
        >/dev/null 2>"$cg_tmp/err" || { cat "$cg_tmp/err" >&2; exit 2; }
    sed -n 's/^totals: \([0-9]*\).*/\1/p' "$cg_tmp/out"
}

# per_call PREFIX BIN MODE: instructions per call, two decimals.
per_call() {
    local a b
    a=$(ir "$1" "$2" "$3" "$N1")
    b=$(ir "$1" "$2" "$3" "$N2")
    awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) 'BEGIN { printf "%.2f", (b - a) / n }'
}
