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
#    1 rank, steps 4..6 equal the uninterrupted 1-rank run's.
#  - bubbles: pp 2 under 1F1B and GPipe with --trace and --metrics_out: each
#    stage's waits for the other are spans on its "pipeline bubble" track,
#    where the schedule puts them, and rank 0 prints each stage's bubble
#    per step beside the plan's.
# Args: train, then the plans' directory (runtime/executor/testdata).
set -u
train="$1" plans="$2"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" pipeline

common=(--steps=3 --timeout_s=120 --progress=false)
# train_plan NAME NPROC [FLAGS...]: trains plans/NAME on NPROC ranks over gloo.
train_plan() {
  local name="$1" nproc="$2"
  shift 2
  run "$name" "$train" --plan="$plans/$name/plan.json" "${common[@]}" --nproc="$nproc" \
      --losses_out="$work/$name.json" "$@"
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
train_plan pipe_pp2 2 --trace="$work/pipe_pp2.trace.json" \
    --metrics_out="$work/pipe_pp2.metrics.jsonl"
train_plan pipe_pp2_gpipe 2 --trace="$work/pipe_pp2_gpipe.trace.json" \
    --metrics_out="$work/pipe_pp2_gpipe.metrics.jsonl"
train_plan pipe_pp2_v2 2
train_plan pipe_pp2_hand 2
train_plan pipe_pp4 4
same pipe_single pipe_pp2 pipe_pp2_gpipe pipe_pp2_v2 pipe_pp2_hand pipe_pp4

# bubbles NAME SCHEDULE: NAME's trace, metrics log and summary (pp 2, four
# micro-batches, 3 steps) show each stage's bubbles where SCHEDULE puts
# them. Only order and structure: this machine is too noisy for timings.
bubbles() {
  /usr/bin/python3 - "$work" "$1" "$2" <<'PY' || fail "bubbles of $1"
import json, re, sys
work, name, schedule = sys.argv[1:]
trace = json.load(open(f"{work}/{name}.trace.json"))["traceEvents"]

def slices(rank, step):
    """Rank's compute ops and bubbles of one step, each in time order."""
    tracks = {e["tid"]: e["args"]["name"] for e in trace
              if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == rank}
    assert tracks.get(2) == "pipeline bubble", (rank, tracks)
    mine = [e for e in trace if e["ph"] == "X" and e["pid"] == rank and e["args"]["step"] == step]
    # A transfer's wait sits on the compute track too; it has the axes.
    compute = [e for e in mine if tracks[e["tid"]] == "compute" and "axes" not in e["args"]]
    bubbles = [e for e in mine if e["tid"] == 2]
    return sorted(compute, key=lambda e: e["ts"]), sorted(bubbles, key=lambda e: e["ts"])

def run_of(compute, block, micro):
    run = [e for e in compute if e["args"].get("block") == block
           and e["args"].get("micro_batch") == micro]
    assert run, (block, micro)
    return run

def bubble_of(bubbles, block, micro):
    found = [e for e in bubbles if e["args"].get("block") == block
             and e["args"].get("micro_batch") == micro]
    assert found, (block, micro, [b["name"] for b in bubbles])
    return found[0]

end = lambda e: e["ts"] + e["dur"]
for step in (1, 2, 3):
    compute, bubbles = slices(0, step)
    wait = bubble_of(bubbles, "backward", 0)
    assert wait["name"] == "bubble backward mb0 (recv from stage 1)", wait["name"]
    if schedule == "gpipe":
        # Every forward, then the wait for micro-batch 0's gradient, which
        # stage 1 sends only after its last forward and first backward.
        assert wait["ts"] >= end(run_of(compute, "forward", 3)[-1]), step
        assert wait["dur"] > 0, wait
    else:
        # One forward ahead: the wait falls between micro-batches 1 and 2.
        assert wait["ts"] >= end(run_of(compute, "forward", 1)[-1]), step
        assert end(wait) <= run_of(compute, "forward", 2)[0]["ts"], step
    assert end(wait) <= run_of(compute, "backward", 0)[0]["ts"], step
    for rank in (0, 1):
        compute, bubbles = slices(rank, step)
        # Each step ends with the stages meeting for the loss.
        assert bubbles[-1]["name"] == "bubble: waits for the other stages to end the step", \
            (rank, step, bubbles[-1]["name"])
    compute, bubbles = slices(1, step)
    first = bubbles[0]
    assert first["name"] == "bubble forward mb0 (recv from stage 0)", first["name"]
    assert end(first) <= run_of(compute, "forward", 0)[0]["ts"], step

log = open(f"{work}/{name}.log").read()
head = re.search(r"pipeline bubble per step \(median of the steps after the first; planner: "
                 r"([0-9.e+-]+) ms of a ([0-9.e+-]+) ms step", log)
assert head, log
assert float(head.group(1)) > 0 and float(head.group(2)) > float(head.group(1)), head.groups()
# Rank 0's lines come prefixed by the launcher ("[rank 0] ").
rows = re.findall(r"\| (\d) \| (\d) \| ([0-9.]+) \| ([0-9.]+) % \| ([0-9.e+]+)x \|$", log, re.M)
print(name, "predicted", head.groups(), "measured", rows)
assert [(r[0], r[1]) for r in rows] == [("0", "0"), ("1", "1")], rows
if schedule == "gpipe":
    assert float(rows[0][2]) > 0, rows
metrics = [json.loads(line) for line in open(f"{work}/{name}.metrics.jsonl")]
assert [m["step"] for m in metrics] == [1, 2, 3], metrics
assert all(isinstance(m["bubble_s"], float) and m["bubble_s"] >= 0 for m in metrics), metrics
PY
}
bubbles pipe_pp2 1f1b
bubbles pipe_pp2_gpipe gpipe

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
echo PASS
