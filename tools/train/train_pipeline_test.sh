#!/usr/bin/env bash
# Pipeline stages end to end: planner-made stage programs of tiny Llama (4
# layers, batch 8 in four micro-batches) trained by //tools:train, each
# stage on its own ranks, against the same layout without stages. Every
# sum is over groups of at most 2 ranks (order-free) and the stages move
# whole tensors, so the losses must be equal bit for bit:
#  - pp 2 under 1F1B, GPipe, interleaved 1F1B (2 chunks per stage) and a
#    hand split (1 and 3 layers), pp 4 under 1F1B, and pp 2 with full
#    recompute: against the 1-rank plan (with recompute for the last);
#  - pp 2 x fsdp 2, pp 2 x tp 2 and pp 2 x fsdp 2 x tp 2 (8 ranks):
#    against fsdp 2, tp 2 and fsdp 2 x tp 2;
#  - pp 2 x tp 2 under mpirun with the mpi backend;
#  - checkpoints: pp 2 saves step 3 of 6; resumed from it under pp 4 and on
#    1 rank, steps 4..6 equal the uninterrupted 1-rank run's;
#  - memory: under 1F1B and GPipe (tiny Llama at seq 64), each rank's
#    measured peak is within 10 % of its stage's predicted peak, which holds
#    the micro-batches the schedule keeps in flight.
# Args: train, then the plans' directory (runtime/executor/testdata).
set -u
train="$1" plans="$2"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" pipeline

common=(--steps=3 --timeout_s=120 --progress=false)
# train_plan NAME NPROC: trains plans/NAME on NPROC ranks over gloo.
train_plan() {
  run "$1" "$train" --plan="$plans/$1/plan.json" "${common[@]}" --nproc="$2" \
      --losses_out="$work/$1.json"
}
# same REFERENCE NAME...: every NAME's losses equal REFERENCE's, bit for bit.
same() {
  /usr/bin/python3 - "$work" "$@" <<'PY' || fail "losses differ: ${*}"
import json, sys
work, reference, names = sys.argv[1], sys.argv[2], sys.argv[3:]
expected = json.load(open(f"{work}/{reference}.json"))["losses"]
print(reference, expected)
for name in names:
    losses = json.load(open(f"{work}/{name}.json"))["losses"]
    print(name, losses)
    assert losses == expected, f"{name} differs from {reference}"
PY
}

train_plan pipe_single 1
train_plan pipe_pp2 2
train_plan pipe_pp2_gpipe 2
train_plan pipe_pp2_v2 2
train_plan pipe_pp2_hand 2
train_plan pipe_pp4 4
same pipe_single pipe_pp2 pipe_pp2_gpipe pipe_pp2_v2 pipe_pp2_hand pipe_pp4

train_plan pipe_full_single 1
train_plan pipe_full_pp2 2
same pipe_full_single pipe_full_pp2

train_plan pipe_fsdp2 2
train_plan pipe_pp2_fsdp2 4
same pipe_fsdp2 pipe_pp2_fsdp2
train_plan pipe_tp2 2
train_plan pipe_pp2_tp2 4
same pipe_tp2 pipe_pp2_tp2
train_plan pipe_fsdp2_tp2 4
train_plan pipe_pp2_fsdp2_tp2 8
same pipe_fsdp2_tp2 pipe_pp2_fsdp2_tp2

source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
trap cleanup EXIT
port=$(free_port)
run mpi mpirun "${mpirun_flags[@]}" --timeout 120 -np 4 -x MASTER_PORT="$port" \
    -x OPENBLAS_NUM_THREADS=1 "$train" --plan="$plans/pipe_pp2_tp2/plan.json" "${common[@]}" \
    --backend=mpi --losses_out="$work/pipe_pp2_tp2_mpi.json"
same pipe_tp2 pipe_pp2_tp2_mpi

# tail REFERENCE NAME: NAME's losses (from its first step on) equal
# REFERENCE's there, bit for bit.
tail_same() {
  /usr/bin/python3 - "$work/$1.json" "$work/$2.json" <<'PY' || fail "resumed losses differ: $*"
import json, sys
full = json.load(open(sys.argv[1]))["losses"]
resumed = json.load(open(sys.argv[2]))
first = resumed["first_step"]
print("full", full, "\nresumed from", first, resumed["losses"])
assert first == 4 and resumed["losses"] == full[first - 1:], "resumed run differs"
PY
}
six=(--steps=6 --timeout_s=120 --progress=false)
run full6 "$train" --plan="$plans/pipe_single/plan.json" "${six[@]}" --nproc=1 \
    --losses_out="$work/full6.json"
run save "$train" --plan="$plans/pipe_pp2/plan.json" "${six[@]}" --nproc=2 --save_every=3 \
    --checkpoint_dir="$work/ckpt" --losses_out="$work/save.json"
same full6 save
for resume in "pipe_pp4 4" "pipe_single 1"; do
  read -r plan nproc <<< "$resume"
  dir="$work/from3_$plan"
  mkdir -p "$dir" && cp -r "$work/ckpt/step_3" "$dir/" && echo step_3 > "$dir/latest"
  run "resume_$plan" "$train" --plan="$plans/$plan/plan.json" "${six[@]}" --nproc="$nproc" \
      --checkpoint_dir="$dir" --resume --losses_out="$work/resume_$plan.json"
  tail_same full6 "resume_$plan"
done

for plan in pipe_mem_pp2 pipe_mem_pp2_gpipe; do
  run "$plan" "$train" --plan="$plans/$plan/plan.json" "${common[@]}" --nproc=2 \
      --memory_out="$work/$plan.memory.json"
done
/usr/bin/python3 - "$work" <<'PY' || fail "measured stage memory is not the predicted"
import json, sys
work = sys.argv[1]
first = {}
for plan in ("pipe_mem_pp2", "pipe_mem_pp2_gpipe"):
    report = json.load(open(f"{work}/{plan}.memory.json"))
    stages = report["predicted_stage_peak_bytes"]
    assert len(stages) == 2 and report["predicted_peak_bytes"] == max(stages), report
    for rank in report["ranks"]:
        predicted, measured = rank["predicted_peak_bytes"], rank["peak"]
        print(plan, "rank", rank["rank"], "predicted", predicted, "measured", measured)
        assert abs(measured - predicted) <= 0.10 * measured, f"{plan} rank {rank['rank']}"
    first[plan] = stages[0]
# GPipe's first stage holds all four micro-batches, 1F1B's two.
assert first["pipe_mem_pp2_gpipe"] > first["pipe_mem_pp2"], first
PY
echo PASS
