#!/usr/bin/env bash
# Point-to-point between pipeline stages under //tools:train, over gloo
# (--nproc) and under mpirun with the mpi backend: the two-stage plan of
# plan/testing/gradient_swap.h (tiny Llama fsdp 2 x tp 2, axis 0 as the pp
# axis, each stage stepping one weight with the other's gradient shard).
# Step 1's loss is the 1-program plan's (the forward is untouched); step 2's
# differs from it (the swapped gradients were used) and is the same over
# both backends, bit for bit (every group has 2 ranks, so every sum is
# order-free). runtime/executor:executor_p2p_test checks the
# shards themselves.
# Args: train, write_gradient_swap_plan, the base plan.
set -u
train="$1" write="$2" base="$3"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" p2p

run write "$write" "$base" layers.0.attention.wq.weight "$work/swap.json"
common=(--steps=3 --timeout_s=60 --progress=false)
run base "$train" --plan="$base" "${common[@]}" --nproc=4 --losses_out="$work/base.json"
run gloo "$train" --plan="$work/swap.json" "${common[@]}" --nproc=4 --losses_out="$work/gloo.json"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
trap cleanup EXIT
port=$(free_port)
run mpi mpirun "${mpirun_flags[@]}" --timeout 120 -np 4 -x MASTER_PORT="$port" \
    -x OPENBLAS_NUM_THREADS=1 "$train" --plan="$work/swap.json" "${common[@]}" --backend=mpi \
    --losses_out="$work/mpi.json"
/usr/bin/python3 - "$work/base.json" "$work/gloo.json" "$work/mpi.json" <<'PY' || fail "losses"
import json, sys
base, gloo, mpi = (json.load(open(p))["losses"] for p in sys.argv[1:])
print("base", base, "\ngloo", gloo, "\nmpi ", mpi)
assert gloo[0] == base[0], "step 1 differs from the 1-program plan"
assert gloo[1] != base[1], "step 2 did not use the swapped gradients"
assert gloo == mpi, "gloo and mpi moved different data"
PY
echo PASS
