#!/usr/bin/env bash
# Fault injection into mpi-backend jobs under mpirun (docs/reliability.md):
# a rank SIGKILLed in the middle of an all-gather or a reduce-scatter, with
# mpirun's default error handling and with --enable-recovery, and a rank that
# skips a collective or calls another op. Each case checks what the other
# ranks (or mpirun) report, that it comes within the group's timeout plus
# 5 s, and that no rank process is left running.
#
# Open MPI 4.1's mpirun itself sometimes crashes (SIGSEGV in
# PMIx_server_finalize) or hangs after it has aborted a job whose ranks
# exited without MPI_Finalize; every mpirun therefore runs under
# `timeout -s KILL`, and only what the ranks and mpirun printed is checked.
set -uo pipefail
program="$1"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
launch=(timeout -s KILL 40 mpirun "${mpirun_flags[@]}" --timeout 30 -np 3)
timeout_s=3
bound_s=$((timeout_s + 5))
failures=0
log="${TEST_UNDECLARED_OUTPUTS_DIR:-$TEST_TMPDIR}/mpi_fault.log"

# run NAME MPIRUN_ARGS...: runs a job, stamping every output line with the
# seconds since the job started ("12.345 line"), into $output.
run() {
  local name="$1"
  shift
  local store="$TEST_TMPDIR/store_${name}"
  rm -f "$store"
  local start
  start=$(date +%s.%N)
  output=$("${launch[@]}" "$@" "--store=file:$store" --backend=mpi \
      "--timeout_ms=$((timeout_s * 1000))" 2>&1 |
    while IFS= read -r line; do
      printf '%.3f %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$line"
    done)
  echo "==== $name" >>"$log"
  echo "$output" >>"$log"
}

# at PATTERN: the time stamp of the first line matching PATTERN (or 999).
at() {
  local t
  t=$(grep -m1 -E "^[0-9.]+ .*$1" <<<"$output" | cut -d' ' -f1)
  echo "${t:-999}"
}

# last PATTERN: the time stamp of the last line matching PATTERN (or 999).
last() {
  local t
  t=$(grep -E "^[0-9.]+ .*$1" <<<"$output" | tail -1 | cut -d' ' -f1)
  echo "${t:-999}"
}

check() {
  if eval "$2"; then
    echo "ok: $1"
  else
    echo "FAILED: $1 ($2)"
    echo "---- output ----"
    echo "$output"
    echo "----------------"
    failures=$((failures + 1))
  fi
}

# No rank of ours may still run (zombies waiting for a reaper do not run).
no_rank_left() {
  sleep 0.5
  ! ps -eo stat=,comm= | grep -v '^Z' | grep -qw fault_rank
}

timing() {
  # TIMING | scenario | timeout | time-to-error | excerpt |
  local excerpt
  excerpt=$(grep -m1 -E "$3" <<<"$output" | cut -d' ' -f2- | cut -c1-200 | tr '|' '/')
  printf 'TIMING | %s | %ss | %.2f s | %s |\n' "$1" "$timeout_s" "$2" "$excerpt"
}

for op in all_gather reduce_scatter; do
  tensor_op=$([ "$op" = all_gather ] && echo all_gather_into_tensor || echo reduce_scatter_tensor)

  # Default error handling: mpirun ends the whole job and names the rank.
  run "kill_${op}" "$program" --scenario=loop "--op=$op" --culprit=2 --fault=kill_inflight \
    --checks=off
  died=$(at "dying mid-call")
  noticed=$(at "mpirun noticed that process rank 2 with PID .* exited on signal 9")
  took=$(echo "$noticed - $died" | bc)
  check "default, $op: the victim got into the call" '[ "$died" != 999 ]'
  check "default, $op: mpirun names the dead rank" '[ "$noticed" != 999 ]'
  check "default, $op: within the bound (${took}s)" \
    "[ \"\$(echo \"$took < $bound_s\" | bc)\" = 1 ]"
  check "default, $op: no rank left" no_rank_left
  timing "mpirun (default), rank 2 of 3 SIGKILLed in $op" "$took" "mpirun noticed"

  # --enable-recovery: the survivors' own timeout names the call.
  run "recover_${op}" --enable-recovery "$program" --scenario=loop "--op=$op" --culprit=2 \
    --fault=kill_inflight --checks=off
  died=$(at "dying mid-call")
  failed=$(last "error kind=timeout .*$tensor_op #[0-9]+ in group default \(rank [01] of 3\) did not complete within ${timeout_s}s")
  took=$(echo "$failed - $died" | bc)
  check "recovery, $op: the victim got into the call" '[ "$died" != 999 ]'
  for rank in 0 1; do
    check "recovery, $op: rank $rank names the call" \
      "grep -qE \"$tensor_op #[0-9]+ in group default \\(rank $rank of 3\\) did not complete\" <<<\"\$output\""
  done
  check "recovery, $op: within the bound (${took}s)" \
    "[ \"\$(echo \"$took < $bound_s\" | bc)\" = 1 ]"
  check "recovery, $op: no rank left" no_rank_left
  timing "mpirun --enable-recovery, rank 2 of 3 SIGKILLed in $op, checks off" "$took" \
    "error kind=timeout"
done

# A rank that skips an all_reduce, checks off: the others time out naming the
# call; mpirun then ends the job (its own clean-up may crash, see above).
run skip "$program" --scenario=once --op=all_reduce --culprit=1 --fault=skip --checks=off \
  --linger_ms=6000
# The call starts when the last rank is ready.
skipped=$(last "ready pid=")
failed=$(last "error kind=timeout .*all_reduce #1 in group default \(rank [02] of 3\)")
took=$(echo "$failed - $skipped" | bc)
for rank in 0 2; do
  check "skip: rank $rank names the call" \
    "grep -q 'all_reduce #1 in group default (rank $rank of 3) did not complete within ${timeout_s}s' <<<\"\$output\""
done
check "skip: within the bound (${took}s)" "[ \"\$(echo \"$took < $bound_s\" | bc)\" = 1 ]"
check "skip: no rank left" no_rank_left
timing "mpirun, rank 1 of 3 skips an all_reduce, checks off" "$took" "error kind=timeout"

# With the cross-rank checks (the default) a mismatched op is named at once,
# on every rank, whatever the backend.
run wrong_op "$program" --scenario=once --op=all_reduce --culprit=1 --fault=wrong_op \
  --checks=cheap --linger_ms=500
for rank in 0 1 2; do
  check "wrong op: rank $rank names rank 1" \
    "grep -q 'rank $rank of 3: collective mismatch in group default at call #1: rank 1 called reduce' <<<\"\$output\""
done
check "wrong op: no rank left" no_rank_left
took=$(echo "$(last 'collective mismatch') - $(at 'ready pid=.* rank=2')" | bc)
timing "mpirun, rank 1 of 3 calls reduce instead of all_reduce, checks cheap" "$took" \
  "collective mismatch"

echo "every job's output: $log"
[ "$failures" -eq 0 ]
