#!/usr/bin/env bash
# Wiring test for Open MPI: runs a 2-rank all-reduce under mpirun inside
# `bazel test`. --timeout bounds the whole job so a broken install fails
# instead of hanging.
set -euo pipefail
program="$1"
# Bazel runs tests as root here; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Shared-memory and self transports only: the ranks share this machine.
exec mpirun --oversubscribe --timeout 60 -np 2 \
  --mca btl self,vader --mca plm_rsh_agent false \
  "$program"
