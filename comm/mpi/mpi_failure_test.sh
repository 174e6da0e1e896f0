#!/usr/bin/env bash
# What the ranks of an mpi-backend job see when one rank dies or aborts in the
# middle of a collective (docs/comm_backends.md, "When a rank fails"):
# 1. By default mpirun ends the whole job at once and names the dead rank.
# 2. With --enable-recovery mpirun lets the survivors run: their collective
#    fails with the backend's timeout error, which names group, rank, op and
#    sequence number, within the timeout plus a margin, and they exit without
#    MPI_Finalize (which would wait for the dead rank forever).
# 3. abort() ends the job through MPI_Abort; the aborting rank says why.
set -uo pipefail
program="$1"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
launch=(mpirun "${mpirun_flags[@]}" --timeout 60)
failures=0

# check NAME CONDITION: records a failure (with the job's output) unless true.
check() {
  if ! eval "$2"; then
    echo "FAILED: $1 ($2)"
    echo "---- output ----"
    echo "$output"
    echo "----------------"
    failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

# Each job's collective timeout; a survivor must finish well inside
# timeout + margin.
timeout_s=5
margin_s=15

start=$SECONDS
output=$("${launch[@]}" -np 3 "$program" kill "$timeout_s" 2>&1)
status=$?
elapsed=$((SECONDS - start))
check "default: mpirun fails the job" '[ "$status" -ne 0 ]'
check "default: mpirun names the dead rank" \
  'grep -q "process rank 2 with PID .* exited on signal 9" <<<"$output"'
check "default: the job ends within the timeout + margin (took ${elapsed}s)" \
  '[ "$elapsed" -lt $((timeout_s + margin_s)) ]'

start=$SECONDS
output=$("${launch[@]}" --enable-recovery -np 3 "$program" kill "$timeout_s" 2>&1)
elapsed=$((SECONDS - start))
for rank in 0 1; do
  check "recovery: rank $rank's all_reduce times out naming the call" \
    "grep -q 'rank $rank: DEADLINE_EXCEEDED: all_reduce #2 in group default (rank $rank of 3) did not complete within ${timeout_s}s' <<<\"\$output\""
done
check "recovery: the survivors exit without MPI_Finalize, saying why" \
  '[ "$(grep -c "not calling MPI_Finalize: 1 MPI operation" <<<"$output")" -eq 2 ]'
check "recovery: the survivors end within the timeout + margin (took ${elapsed}s)" \
  '[ "$elapsed" -lt $((timeout_s + margin_s)) ]'

start=$SECONDS
output=$("${launch[@]}" -np 2 "$program" abort 30 2>&1)
status=$?
elapsed=$((SECONDS - start))
check "abort: the job fails" '[ "$status" -ne 0 ]'
check "abort: the aborting rank says why" \
  'grep -q "backend mpi of group default (rank 0 of 2): abort() called; ending the MPI job" <<<"$output"'
# Open MPI 4.1's own "MPI_ABORT was invoked" report races with the kill and
# is often lost ("ORTE_ERROR_LOG ... show_help.c"), hence the line above.
check "abort: the other rank is ended, not left to time out" \
  '! grep -q "rank 1: " <<<"$output"'
check "abort: the other rank is ended long before its 30s timeout (took ${elapsed}s)" \
  '[ "$elapsed" -lt 20 ]'

[ "$failures" -eq 0 ]
