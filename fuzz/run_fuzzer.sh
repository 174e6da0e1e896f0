#!/usr/bin/env bash
# Runs one libFuzzer binary over its seed corpus for a bounded time and
# prints its figures (executions, coverage, corpus size); used both as the
# short fuzz test of the suite and as the `bazel run` target for longer runs:
#
#   run_fuzzer.sh FUZZER SEED_DIR SECONDS [libFuzzer flags...]
#   bazel run //fuzz:tcp_store_server_fuzz_run -- -max_total_time=600
#
# New inputs go to a scratch corpus (under TEST_UNDECLARED_OUTPUTS_DIR in a
# test, else a temporary directory that is printed); crashes are written as
# crash-* files next to it, and fail the run. A fuzzer that could not be
# built (no clang or libFuzzer; see fuzz/clang_fuzzer.bzl) exits 77: the
# test then records itself as skipped, with the reason.
set -uo pipefail
fuzzer="$1"
seeds="$2"
seconds="$3"
shift 3
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  runfiles="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  runfiles="${RUNFILES_DIR:-$0.runfiles}/loom"
fi
[[ "$fuzzer" = /* ]] || fuzzer="$runfiles/$fuzzer"
[[ "$seeds" = /* ]] || seeds="$runfiles/$seeds"
out="${TEST_UNDECLARED_OUTPUTS_DIR:-$(mktemp -d /tmp/loom-fuzz.XXXXXX)}"
corpus="$out/corpus"
mkdir -p "$corpus"
log="$out/fuzz.log"

# The fuzzer writes its own TMPDIR files (the MLIR target's input file).
export TMPDIR="${TEST_TMPDIR:-$out}"
# Leaks inside one input are bugs too; the MLIR context's uniquer tables are
# freed with the context, so none are expected.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$out/" "$@" "$corpus" "$seeds" >"$log" 2>&1
status=$?
if [[ $status -eq 77 ]]; then
  reason=$(cat "$log")
  echo "SKIPPED: $reason"
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    cat >"$XML_OUTPUT_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="fuzz" tests="1" skipped="1">
<testcase name="$(basename "$fuzzer")" result="skipped"><skipped message="fuzzer not built"/></testcase>
</testsuite></testsuites>
EOF
  fi
  exit 0
fi
# libFuzzer's last status line ("#N DONE cov: ... ft: ... corp: ...") and
# its final stats.
grep -E "^#[0-9]+[[:space:]]+(DONE|INITED)|^stat::|^Done|ERROR|SUMMARY|crash-" "$log" | tail -20
if [[ $status -ne 0 ]]; then
  echo "fuzzer failed (exit $status); the log and any crash-* input are in $out"
  tail -60 "$log"
  exit 1
fi
echo "fuzzer log and new corpus: $out"
