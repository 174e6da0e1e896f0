#!/usr/bin/env bash
# Evaluation, metrics and TensorBoard through //tools:train:
#  - --eval_every on a held-out token file: the eval losses of fsdp 4 and
#    hsdp 2x2 over gloo, tp 2 and fsdp x tp 2x2 under mpirun equal the
#    1-rank run's within 1e-5 relative (the e2e test's bound), evaluated
#    after steps 4 and 8 and after the last (10);
#  - turning evaluation on leaves the training losses bit for bit;
#  - under --deterministic, hsdp 2x2's eval losses are the 1-rank run's bits;
#  - the metrics log's keys, the eval loss in the step lines;
#  - the TensorBoard event file read back: by TensorBoard itself where the
#    python3 on PATH has it (else said), always by a record check here;
#  - bad eval flags refused with a message that names the fix.
# Args: train, then the plans: single, fsdp4, hsdp2x2, tp2, fsdp2_tp2.
set -u
train="$1" single="$2" fsdp4="$3" hsdp="$4" tp2="$5" fsdp2tp2="$6"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" train-eval

# A held-out token file (format: docs/runtime_data.md) of ids below the
# tiny model's vocabulary of 256.
/usr/bin/python3 - "$work/heldout.tok" <<'EOF2'
import random, struct, sys
random.seed(11)
tokens = [random.randrange(256) for _ in range(5000)]
with open(sys.argv[1], "wb") as f:
    f.write(b"LOOMTOKS" + struct.pack("<IIQ", 1, 2, len(tokens)))
    f.write(struct.pack("<%di" % len(tokens), *tokens))
EOF2

common=(--steps=10 --timeout_s=60 --progress=false)
eval=(--eval_every=4 --eval_data="$work/heldout.tok" --eval_batches=3)
# The metrics log's directory does not exist yet: train makes it.
run single "$train" --plan="$single" "${common[@]}" "${eval[@]}" --losses_out="$work/single.json" \
    --metrics_out="$work/logs/run1/metrics.jsonl" --tensorboard_dir="$work/tb"
mv "$work/logs/run1/metrics.jsonl" "$work/metrics.jsonl"
grep -q "step 4/10 loss .* eval_loss " "$work/single.log" || fail "no eval loss: $(cat "$work/single.log")"
run fsdp4 "$train" --plan="$fsdp4" "${common[@]}" "${eval[@]}" --nproc=4 \
    --losses_out="$work/fsdp4.json"
run fsdp4_noeval "$train" --plan="$fsdp4" "${common[@]}" --nproc=4 \
    --losses_out="$work/fsdp4_noeval.json"
run hsdp "$train" --plan="$hsdp" "${common[@]}" "${eval[@]}" --nproc=4 \
    --losses_out="$work/hsdp.json"
# Deterministic mode: the hsdp eval losses are the 1-rank run's bits.
run det_single "$train" --plan="$single" "${common[@]}" "${eval[@]}" --deterministic \
    --losses_out="$work/det_single.json"
run det_hsdp "$train" --plan="$hsdp" "${common[@]}" "${eval[@]}" --deterministic --nproc=4 \
    --losses_out="$work/det_hsdp.json"
/usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(p))["eval_losses"] for p in sys.argv[1:])
assert a == b and len(a) == 3, (a, b)' "$work/det_single.json" "$work/det_hsdp.json" \
    || fail "deterministic eval losses differ"

source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
trap cleanup EXIT
for layout in tp2:2:"$tp2" fsdp2_tp2:4:"$fsdp2tp2"; do
  IFS=: read -r name ranks plan <<< "$layout"
  port=$(free_port)
  run "mpi_$name" mpirun "${mpirun_flags[@]}" --timeout 120 -np "$ranks" -x MASTER_PORT="$port" \
      -x OPENBLAS_NUM_THREADS=1 "$train" --plan="$plan" "${common[@]}" "${eval[@]}" \
      --backend=mpi --losses_out="$work/mpi_$name.json"
done

/usr/bin/python3 - "$work" <<'EOF2' || fail "eval losses"
import json, sys
work = sys.argv[1]
load = lambda name: json.load(open(f"{work}/{name}.json"))
single = load("single")
steps = [e["step"] for e in single["eval_losses"]]
assert steps == [4, 8, 10], steps
for name in ["fsdp4", "hsdp", "mpi_tp2", "mpi_fsdp2_tp2"]:
    run = load(name)
    assert [e["step"] for e in run["eval_losses"]] == steps, (name, run["eval_losses"])
    worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"])
                for a, b in zip(single["eval_losses"], run["eval_losses"]))
    print(f"{name}: eval losses {[round(e['loss'], 6) for e in run['eval_losses']]}, "
          f"worst relative difference to 1 rank {worst:.2e}")
    assert worst <= 1e-5, name
# Evaluation changes nothing in training: the same bits.
assert load("fsdp4")["losses"] == load("fsdp4_noeval")["losses"]
EOF2

/usr/bin/python3 - "$work/metrics.jsonl" "$work/single.json" <<'EOF2' || fail "bad metrics log: $(head -3 "$work/metrics.jsonl")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
losses = json.load(open(sys.argv[2]))
assert [l["step"] for l in lines] == list(range(1, 11))
always = {"step", "loss", "lr", "tokens_per_s", "step_s", "peak_bytes", "phase_peak_bytes",
          "reserved_bytes", "comm_bytes", "exposed_comm_s"}
for l in lines:
    keys = always | ({"eval_loss", "eval_s"} if l["step"] in (4, 8, 10) else set())
    assert set(l) == keys, (sorted(l), sorted(keys))
    assert {"forward", "backward", "optimizer"} <= set(l["phase_peak_bytes"]), l
    assert l["reserved_bytes"] >= l["peak_bytes"] > 0, l
    if "eval_loss" in l:
        assert "eval" in l["phase_peak_bytes"], l
assert [l["eval_loss"] for l in lines if "eval_loss" in l] == \
    [e["loss"] for e in losses["eval_losses"]]
EOF2

# The event file: framing and CRCs here; TensorBoard's own reader where
# the python3 on PATH has it.
/usr/bin/python3 - "$work/tb" <<'EOF2' || fail "bad event file"
import glob, struct, sys
files = glob.glob(sys.argv[1] + "/events.out.tfevents.*")
assert len(files) == 1, files
data = open(files[0], "rb").read()
def crc32c(b):
    crc = 0xffffffff
    for byte in b:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
def masked(b):
    c = crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff
at, records = 0, 0
while at < len(data):
    (n,), (lc,) = struct.unpack_from("<Q", data, at), struct.unpack_from("<I", data, at + 8)
    assert lc == masked(data[at:at + 8]), at
    (dc,) = struct.unpack_from("<I", data, at + 12 + n)
    assert dc == masked(data[at + 12:at + 12 + n]), at
    at += 16 + n
    records += 1
assert records == 11, records  # the version event and one per step
EOF2
if python3 -c "import tensorboard" 2> /dev/null; then
  python3 - "$work/tb" "$work/single.json" <<'EOF2' || fail "TensorBoard cannot read the event file"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1])
acc.Reload()
evals = [(e.step, e.value) for e in acc.Scalars("eval/loss")]
want = [(e["step"], e["loss"]) for e in json.load(open(sys.argv[2]))["eval_losses"]]
assert [s for s, _ in evals] == [s for s, _ in want], evals
assert all(abs(v - w) < 1e-6 * abs(w) for (_, v), (_, w) in zip(evals, want)), (evals, want)
assert len(acc.Scalars("train/loss")) == 10
print("TensorBoard reads", len(acc.Tags()["scalars"]), "scalar tags")
EOF2
else
  echo "TensorBoard not importable by python3: the event file was checked by its records only"
fi

# Refusals.
"$train" --plan="$single" --steps=1 --eval_every=2 > "$work/no_data.log" 2>&1 \
    && fail "--eval_every without --eval_data was accepted"
grep -q -- "--eval_every needs --eval_data" "$work/no_data.log" || fail "$(cat "$work/no_data.log")"
"$train" --plan="$single" --steps=1 --eval_every=2 --data="$work/heldout.tok" \
    --eval_data="$work/heldout.tok" > "$work/same.log" 2>&1 && fail "eval on the training file"
grep -q "is the training file" "$work/same.log" || fail "$(cat "$work/same.log")"
# An output path that is a directory is refused before the first step.
"$train" --plan="$single" --steps=1 --trace="$work" > "$work/dir.log" 2>&1 && fail "--trace=DIR"
grep -q -- "--trace=$work is a directory; name a file in it" "$work/dir.log" || fail "$(cat "$work/dir.log")"
grep -q "^step 1" "$work/dir.log" && fail "trained before refusing --trace=DIR"
echo "PASS"
