# Sourced by every test script that starts mpirun, as
#   source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
# and listed in its data: lets mpirun run as root and keeps each
# job's Open MPI files apart from concurrent jobs'.
#
# Bazel runs tests in PID namespaces, so every mpirun gets the same PID and
# Open MPI derives the same job id; concurrent jobs would then share session
# directories (TMPDIR) and shared-memory files (/dev/shm) and crash each
# other. A fresh short directory per job (PMIx puts Unix sockets there, whose
# paths must stay under 108 bytes) holds both.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job_dir="$(mktemp -d /tmp/loom-mpi.XXXXXXXX)"
trap 'rm -rf "$job_dir"' EXIT
export TMPDIR="$job_dir"
# Shared-memory and self transports only: the ranks share this machine.
mpirun_flags=(--oversubscribe --mca btl self,vader --mca plm_rsh_agent false
  --mca btl_vader_backing_directory "$job_dir")
# Under --config=asan (docs/reliability.md): Open MPI leaks at MPI_Finalize
# and unloads its components first, so LeakSanitizer reports blocks whose
# stacks point into unloaded code and cannot be suppressed by name. Ranks
# under mpirun therefore run without leak checking; every other ASan check
# stays on, and the same code is leak-checked in the single-process tests.
if [[ "${ASAN_OPTIONS:-}" == *detect_leaks=1* ]]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}"
fi
