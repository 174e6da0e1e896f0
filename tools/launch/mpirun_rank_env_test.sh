#!/usr/bin/env bash
# The rank binaries //tools:launch starts also run under mpirun: two ranks of
# the test rank program find their ranks through rank_env from Open MPI's
# variables alone (RANK is unset). --timeout bounds the job.
set -euo pipefail
rank_program="$1"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
out=$(mpirun "${mpirun_flags[@]}" --timeout 60 -np 2 "$rank_program" '*:exit=0' 2>&1)
echo "$out"
failures=0
for rank in 0 1; do
  want="rank_env source=openmpi rank=$rank world_size=2 local_rank=$rank master=127.0.0.1:29500"
  if ! grep -qxF "$want" <<<"$out"; then
    echo "FAIL: no line '$want'"
    failures=$((failures + 1))
  fi
done
if [[ $(grep -c '^env RANK=<unset> ' <<<"$out") -ne 2 ]]; then
  echo "FAIL: expected both ranks to run without RANK set"
  failures=$((failures + 1))
fi
exit $((failures > 0))
