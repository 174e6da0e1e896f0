# Sourced by the test scripts that run //tools:train, as
#   source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" NAME
# and listed in their data. Makes the work directory $work
# (/tmp/loom-NAME.XXXXXXXX, removed at exit with mpi_test_env.sh's $job_dir:
# after sourcing that, `trap cleanup EXIT`), sets one BLAS thread per rank,
# and defines:
#   fail MESSAGE...               exit 1 saying FAIL: MESSAGE
#   run NAME COMMAND...           run COMMAND, its output in $work/NAME.log, shown if it fails
#   refused NAME PATTERN COMMAND...   COMMAND must fail, its output matching PATTERN
#   free_port                     print a free TCP port on 127.0.0.1
work="$(mktemp -d "/tmp/loom-${1:-train}.XXXXXXXX")"
cleanup() { rm -rf "$work" "${job_dir:-}"; }
trap cleanup EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {
  local name="$1"; shift
  "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; fail "$name exited $?"; }
}
refused() {
  local name="$1" pattern="$2"; shift 2
  "$@" > "$work/$name.log" 2>&1 && fail "$name succeeded: $(cat "$work/$name.log")"
  grep -q -- "$pattern" "$work/$name.log" || fail "$name: no '$pattern' in $(cat "$work/$name.log")"
}
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
