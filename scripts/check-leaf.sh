#!/usr/bin/env bash
# The trampolines of tracestat-preload (`-pg`, nop'd and XRay entries, and the returns they
# redirect) save only the general-purpose registers before their first try at a hook
# (`call_hook` and `call_return_hook`, whose leaves are the tries below); an optimised build
# saves the vector registers only when that try fails. So the compiled tries must touch no
# vector, MMX or x87 register and call nothing but each other and, through their paths, the
# sink's count and its timed exit's leaf, and those must do the same and call nothing. This
# reads those functions' instructions in the built library and fails naming the first one
# that breaks the rule, so that a change of code or compiler that makes the compiler use a
# vector register there cannot go unseen.
#
# Usage: scripts/check-leaf.sh [LIB]     (default target/release/libtracestat_preload.so,
#                                         built first)
#        scripts/check-leaf.sh --self-test   (the checker flags what it must)
set -euo pipefail
cd "$(dirname "$0")/.."

# The leaves: the hooks' tries (counting, entering timed, ending timed) and the hook
# layer's (`Site::try_hit`, `Site::try_enter_hook`), which the hooks call and which reach
# the sink through a register.
leaves=(
  'tracestat_preload::fentry::try_hit'
  'tracestat_preload::xray::try_hit'
  'tracestat::hook::static_entry::<impl tracestat::hook::site::Site>::try_hit'
  'tracestat_preload::fentry::try_entry'
  'tracestat_preload::fentry::try_stub_entry'
  'tracestat_preload::fentry::try_leave'
  'tracestat_preload::xray::try_entry'
  'tracestat_preload::xray::try_exit'
  'tracestat::hook::static_entry::<impl tracestat::hook::site::Site>::try_enter_leaf'
)
# Functions a leaf may call directly: the leaves themselves.
callable="^($(IFS='|'; echo "${leaves[*]}" | sed 's/[][().*+?^$]/\\&/g'))\$"

# What those calls reach through a register, which must call nothing: the one sink's count
# (`SinkOps` is crate-private and this its only implementation) and its timed scopes' leaf
# end (`ScopeGuard::try_end`'s call through the sink's path).
counts=(
  '<tracestat::profile::function::fast::Fast as tracestat::hook::sink::SinkOps>::count'
  'tracestat::hook::static_entry::<impl tracestat::hook::ftrace::Ftrace>::try_exit_global_sink'
)
# Calls a leaf may hold on its unwinding paths, reached only if a call unwinds (the count,
# calling nothing, cannot): the abort of a panic that cannot unwind, the resumption of one.
allowed_got='^(core::panicking::panic_(cannot_unwind|in_cleanup)|_Unwind_Resume(@plt)?)$'

# check NAME KIND < body: KIND "leaf" (calls allowed: through a register, of the leaves
# checked here, of the aborts) or "count" (no call); GOT targets named by `got`.
check() {
  local name=$1 kind=$2 line ins ops target n=0 bad=""
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*[0-9a-f]+:[[:space:]]+([a-z0-9]+)[[:space:]]*(.*)$ ]] || continue
    ins=${BASH_REMATCH[1]} ops=${BASH_REMATCH[2]}
    n=$((n + 1))
    if [[ $ops =~ %(x|y|z)mm[0-9]|%mm[0-7]|%st ]] ||
      [[ $ins =~ ^(f[a-z]+|emms|vzeroupper|vzeroall|ldmxcsr|stmxcsr|xsave.*|xrstor.*|fxsave.*|fxrstor.*)$ ]]; then
      bad="uses a vector, MMX or x87 register: $line"
    elif [[ $ins == call ]]; then
      if [[ $ops =~ ^\*0x[0-9a-f]+\(%rip\)[[:space:]]+#[[:space:]]+([0-9a-f]+) ]]; then
        target=$(got "${BASH_REMATCH[1]}")
        [[ $kind == leaf && ($target =~ $allowed_got || $target =~ $callable) ]] ||
          bad="calls ${target:-an unknown GOT entry}: $line"
      elif [[ $ops =~ ^\*%r[a-z0-9]+$ || $ops =~ ^\*\(%r[a-z0-9]+\)$ || $ops =~ ^\*0x[0-9a-f]+\(%r[a-z0-9]+\)$ ]]; then
        [[ $kind == leaf ]] || bad="calls through a pointer: $line"
      elif [[ $kind == leaf && $ops =~ \<(.*)\>$ ]] && target=${BASH_REMATCH[1]} &&
        [[ $target =~ $callable || $target =~ $allowed_got ]]; then
        :
      else
        bad="calls a function (inline it, or check that one too): $line"
      fi
    elif [[ $ins == j* ]]; then
      if [[ $ops == \** ]]; then
        bad="jumps through a pointer: $line"
      elif [[ $ops =~ \<(.*)\>$ ]]; then
        target=${BASH_REMATCH[1]}
        [[ ${target%+0x*} == "$name" ]] || bad="jumps out of the function: $line"
      fi
    fi
    if [[ -n $bad ]]; then
      echo "check-leaf: $name $bad" >&2
      return 1
    fi
  done
  if ((n == 0)); then
    echo "check-leaf: $name: not found in the library" >&2
    return 1
  fi
}

if [[ ${1:-} == --self-test ]]; then
  got() { [[ $1 == 10 ]] && echo core::panicking::panic_cannot_unwind || echo malloc; }
  ok=' 1:	mov    0x8(%rax),%rdi
 2:	call   *(%r8)
 3:	jne    1 <f+0x4>
 4:	call   *0x2(%rip)        # 10 <_DYNAMIC+0x2>'
  callable='^g$'
  ok="$ok
 5:	call   40 <g>"
  check f leaf <<<"$ok" || { echo "check-leaf: self-test: a clean leaf flagged" >&2; exit 1; }
  for body in ' 1:	movaps %xmm0,(%rsp)' ' 1:	vpxor  %ymm1,%ymm1,%ymm1' ' 1:	fldt   (%rax)' \
    ' 1:	call   20 <memset>' ' 1:	call   *0x2(%rip)        # 11 <_DYNAMIC+0x3>' \
    ' 1:	jmp    30 <g+0x4>' ' 1:	jmp    *%rax'; do
    if check f leaf <<<"$body" 2>/dev/null; then
      echo "check-leaf: self-test: not flagged: $body" >&2
      exit 1
    fi
  done
  if check f count <<<' 1:	call   *(%r8)' 2>/dev/null; then
    echo "check-leaf: self-test: a count's call not flagged" >&2
    exit 1
  fi
  if check f leaf <<<'' 2>/dev/null; then
    echo "check-leaf: self-test: a missing function not flagged" >&2
    exit 1
  fi
  echo "check-leaf: self-test passed"
  exit 0
fi

lib=${1:-}
if [[ -z $lib ]]; then
  cargo build --release -q -p tracestat-preload
  lib=target/release/libtracestat_preload.so
fi
[[ -f $lib ]] || { echo "check-leaf: no library at $lib" >&2; exit 1; }
disasm=$(objdump -d --no-show-raw-insn -C "$lib")
relocs=$(objdump -R "$lib")
symbols=$(nm -C "$lib")
# The function a GOT entry at address $1 points to (relative or symbolic relocation).
got() {
  local r
  r=$(awk -v a="$1" '{ sub(/^0+/, "", $1) } $1 == a { print $2, $3; exit }' <<<"$relocs")
  case $r in
  R_X86_64_RELATIVE*)
    local addr=${r##*+0x}
    awk -v a="${addr#"${addr%%[!0]*}"}" '{ x = $1; sub(/^0+/, "", x) } x == a { $1 = $2 = ""; sub(/^ +/, ""); print; exit }' <<<"$symbols"
    ;;
  *) echo "${r#* }" ;;
  esac
}
body() { awk -v f="<$1>:" '/^[0-9a-f]+ </ && substr($0, index($0, " ") + 1) == f { on = 1; next } on && /^$/ { exit } on' <<<"$disasm"; }
for f in "${leaves[@]}"; do check "$f" leaf < <(body "$f"); done
for f in "${counts[@]}"; do check "$f" count < <(body "$f"); done
echo "check-leaf: ${#leaves[@]} leaves and ${#counts[@]} sink functions touch no vector register and call nothing else ($lib)"
