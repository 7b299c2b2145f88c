# Shared by scripts/check-exports.sh and scripts/check-http.sh (source it; not a script of
# its own): the PASS / FAIL / loud SKIPPED bookkeeping of a check run by real consumers, and
# installing a consumer from Debian's packages when it is missing.
#
# Set NOT_CHECKED before sourcing: the banner's line saying what a skip leaves unchecked.
PASSED=()
FAILED=()
SKIPPED=()

# loud_skip WHAT WHY: records a skip and prints a banner no one can miss (never silent).
loud_skip() {
  local what=$1 why=$2
  SKIPPED+=("$what")
  {
    echo
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    echo "!!! SKIPPED: $what"
    echo "!!! because: $why"
    echo "!!! ${NOT_CHECKED:-This was NOT checked in this run.}"
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    echo
  } | tee /dev/stderr
}
pass() { PASSED+=("$1"); echo "PASS: $1"; }
fail() { FAILED+=("$1"); echo "FAIL: $1" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

# apt_install PACKAGE...: Debian's packages, `apt-get update` once per run.
APT_UPDATED=0
apt_install() {
  have apt-get || return 1
  if [ "$APT_UPDATED" = 0 ]; then
    nice apt-get update -q >/dev/null 2>&1 || return 1
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive nice apt-get install -y -q --no-install-recommends "$@" \
    >/dev/null 2>&1
}
