#!/usr/bin/env bash
# Runs a gtest binary as N MPI ranks under mpirun inside `bazel test`:
#   run_under_mpirun.sh N BINARY [gtest flags...]
# Every rank runs every test; mpirun exits non-zero if any rank fails, and its
# --timeout bounds the job so a hang fails instead of stalling the suite.
set -euo pipefail
ranks="$1"
binary="$2"
shift 2
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
# Only rank 0 writes the JUnit XML and the premature-exit marker Bazel asked
# for; N writers would interleave or race.
exec mpirun "${mpirun_flags[@]}" --timeout 80 -np "$ranks" --tag-output \
  sh -c 'if [ "$OMPI_COMM_WORLD_RANK" != 0 ]; then
           unset XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
         fi
         exec "$@"' \
  rank "$binary" "$@"
