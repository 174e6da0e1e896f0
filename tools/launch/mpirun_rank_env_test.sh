#!/usr/bin/env bash
# The rank binaries //tools:launch starts also run under mpirun: two ranks of
# the test rank program find their ranks through rank_env from Open MPI's
# variables alone (RANK is unset). --timeout bounds the job.
set -euo pipefail
rank_program="$1"
# Bazel runs tests as root here; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mpirun --oversubscribe --timeout 60 -np 2 \
  --mca btl self,vader --mca plm_rsh_agent false \
  "$rank_program" '*:exit=0' 2>&1)
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
