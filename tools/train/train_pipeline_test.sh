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
#    the micro-batches the schedule keeps in flight;
#  - bubbles: pp 2 under 1F1B and GPipe with --trace and --metrics_out: each
#    stage's waits for the other are spans on its "pipeline bubble" track,
#    where the schedule puts them, and rank 0 prints each stage's bubble
#    per step beside the plan's.
# Tied parameters: tiny GPT-2 (4 layers), whose LM head is its token
# embedding, so that both end stages hold a replica of the table and add
# their gradients of it once per step. The one-program plan adds the two
# parts per micro-batch before accumulating, the stages after accumulating
# (and, under fsdp, after reducing) each part: the losses agree within fp32
# rounding, not bit for bit (measured: pp 2 x fsdp 2 is 2.1e-8 off fsdp 2;
# pp 2's three losses happen to equal 1 rank's though its weights differ
# in rounding):
#  - pp 2 under 1F1B, GPipe and interleaved 1F1B, and pp 4 (the table on
#    stages 0 and 3 only) against 1 rank, and against each other bit for
#    bit (the same sums in the same order);
#  - pp 2 x fsdp 2 against fsdp 2;
#  - pp 2 saves step 3 of 6 with the table once; resumed under pp 2 and
#    pp 4, steps 4..6 equal the uninterrupted run's bit for bit (so the
#    stage that did not save held the same table and AdamW states), and on
#    1 rank within rounding; --export_hf writes the table once, the saved
#    one.
# Args: train, the plans' directory (runtime/executor/testdata), loom_formats.py.
set -u
train="$1" plans="$2" formats="$3"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" pipeline

common=(--steps=3 --timeout_s=120 --progress=false)
# train_plan NAME NPROC [FLAGS...]: trains plans/NAME on NPROC ranks over gloo.
train_plan() {
  local name="$1" nproc="$2"
  shift 2
  run "$name" "$train" --plan="$plans/$name/plan.json" "${common[@]}" --nproc="$nproc" \
      --losses_out="$work/$name.json" "$@"
}
# compare TOLERANCE REFERENCE NAME...: every NAME's losses within relative
# TOLERANCE of REFERENCE's (0: bit for bit); prints the largest difference.
compare() {
  /usr/bin/python3 - "$work" "$@" <<'PY' || fail "losses differ: ${*}"
import json, sys
work, tolerance, reference, names = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
expected = json.load(open(f"{work}/{reference}.json"))["losses"]
print(reference, expected)
for name in names:
    losses = json.load(open(f"{work}/{name}.json"))["losses"]
    worst = max(abs(a - b) / abs(a) for a, b in zip(expected, losses))
    print(name, losses, "largest relative difference", worst)
    assert len(losses) == len(expected), f"{name} has {len(losses)} losses"
    assert losses == expected if tolerance == 0 else worst < tolerance, f"{name} is off {reference}"
PY
}
# same REFERENCE NAME...: bit for bit. close REFERENCE NAME...: within fp32
# rounding (relative 1e-6).
same() { compare 0 "$@"; }
close() { compare 1e-6 "$@"; }

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
# resume CHECKPOINTS PLAN NPROC: plans/PLAN on NPROC ranks, 6 steps resumed
# from step 3 of CHECKPOINTS, its losses in $work/resume_PLAN.json.
resume() {
  local dir="$work/from3_$2"
  mkdir -p "$dir" && cp -r "$1/step_3" "$dir/" && echo step_3 > "$dir/latest"
  run "resume_$2" "$train" --plan="$plans/$2/plan.json" "${six[@]}" --nproc="$3" \
      --checkpoint_dir="$dir" --resume --losses_out="$work/resume_$2.json"
}
run full6 "$train" --plan="$plans/pipe_single/plan.json" "${six[@]}" --nproc=1 \
    --losses_out="$work/full6.json"
run save "$train" --plan="$plans/pipe_pp2/plan.json" "${six[@]}" --nproc=2 --save_every=3 \
    --checkpoint_dir="$work/ckpt" --losses_out="$work/save.json"
same full6 save
resume "$work/ckpt" pipe_pp4 4
tail_same full6 resume_pipe_pp4
resume "$work/ckpt" pipe_single 1
tail_same full6 resume_pipe_single

train_plan tied_single 1
train_plan tied_pp2 2
train_plan tied_pp2_gpipe 2
train_plan tied_pp2_v2 2
train_plan tied_pp4 4
close tied_single tied_pp2 tied_pp2_gpipe tied_pp2_v2 tied_pp4
same tied_pp2 tied_pp2_gpipe tied_pp2_v2 tied_pp4
train_plan tied_fsdp2 2
train_plan tied_pp2_fsdp2 4
close tied_fsdp2 tied_pp2_fsdp2

run tied_full6 "$train" --plan="$plans/tied_pp2/plan.json" "${six[@]}" --nproc=2 \
    --losses_out="$work/tied_full6.json"
run tied_save "$train" --plan="$plans/tied_pp2/plan.json" "${six[@]}" --nproc=2 --save_every=3 \
    --checkpoint_dir="$work/tied_ckpt" --export_hf="$work/tied_hf" --losses_out="$work/tied_save.json"
same tied_full6 tied_save
PYTHONPATH="$(dirname "$formats")" /usr/bin/python3 - "$work" <<'PY' || fail "table not saved once"
import json, struct, sys
import numpy as np
import loom_formats
work = sys.argv[1]
# The loader checks that the shards cover each tensor exactly once.
saved = loom_formats.load_checkpoint(f"{work}/tied_ckpt", step=3).params()
assert "transformer.wte.weight" in saved and "lm_head.weight" not in saved, sorted(saved)
blob = open(f"{work}/tied_hf/model.safetensors", "rb").read()
(n,) = struct.unpack_from("<Q", blob)
header = json.loads(blob[8:8 + n])
table = header["transformer.wte.weight"]
b, e = table["data_offsets"]
exported = np.frombuffer(blob[8 + n + b:8 + n + e], "<f4").reshape(table["shape"])
last = loom_formats.load_checkpoint(f"{work}/tied_ckpt", step=6).params()
assert "lm_head.weight" not in header
assert np.array_equal(exported, last["transformer.wte.weight"]), "export is not the saved table"
print("saved and exported once:", table["shape"])
PY
resume "$work/tied_ckpt" tied_pp2 2
tail_same tied_full6 resume_tied_pp2
resume "$work/tied_ckpt" tied_pp4 4
tail_same tied_full6 resume_tied_pp4
resume "$work/tied_ckpt" tied_single 1
/usr/bin/python3 - "$work" <<'PY' || fail "pp 2 -> 1 rank resume is off"
import json, sys
work = sys.argv[1]
full = json.load(open(f"{work}/tied_full6.json"))["losses"]
resumed = json.load(open(f"{work}/resume_tied_single.json"))
worst = max(abs(a - b) / abs(a) for a, b in zip(full[3:], resumed["losses"]))
print("pp 2 -> 1 rank", resumed["losses"], "max relative difference", worst)
assert resumed["first_step"] == 4 and len(resumed["losses"]) == 3 and worst < 1e-6
PY

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
