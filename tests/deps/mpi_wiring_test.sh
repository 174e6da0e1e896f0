#!/usr/bin/env bash
# Wiring test for Open MPI: runs a 2-rank all-reduce under mpirun inside
# `bazel test`. --timeout bounds the whole job so a broken install fails
# instead of hanging.
set -euo pipefail
program="$1"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
mpirun "${mpirun_flags[@]}" --timeout 60 -np 2 "$program"
