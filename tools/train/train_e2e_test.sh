#!/usr/bin/env bash
# End-to-end training through //tools:train on separate processes:
#  - fsdp on 4 ranks (--nproc, gloo), hsdp under //tools:launch, and every
#    layout of tiny Llama and GPT-2 (fsdp 4, tp 2, fsdp x tp 2x2, hsdp 2x2)
#    under mpirun with the mpi backend, each against the 1-rank run;
#  - a rank killed after step 12 of a 4-rank run (checkpoints every 5
#    steps), then --resume: steps 11..20 equal the uninterrupted run's;
#  - a rank killed while writing the step-15 checkpoint: latest stays 10,
#    and resuming again gives the same losses;
#  - the 4-rank fsdp checkpoint of step 10 resumed as fsdp x tp on 2x2;
#  - a warmup + cosine learning-rate schedule continued exactly by a
#    resumed run, and a schedule that ends inside its warmup refused;
#  - the metrics log: a JSON line per step with the run's losses.
#  - deterministic mode: hsdp 2x2 bit-identical to the 1-rank run, which
#    //tools:parity confirms from the dumps, and names the first differing
#    gradient of a run without the mode;
#  - mixed precision (bf16 params, f32 master copies): fsdp 4 over gloo and
#    tp 2 under mpirun within bf16 tolerance of the 1-rank bf16 run, and a
#    killed bf16 run resumed from its checkpoint reproduces the losses;
#  - gradient accumulation (two micro-steps, gathers kept, reductions
#    deferred): fsdp 4 over gloo and hsdp 2x2 under mpirun against the
#    1-rank run of the whole batch in one step;
#  - recompute (full, selective, per layer) and sequence parallelism under
#    mpirun against the 1-rank run without them.
# Args: train, launch, parity, then the plans: single, fsdp4, fsdp2_tp2, hsdp2x2.
set -u
train="$1" launch="$2" parity="$3" single="$4" fsdp4="$5" fsdp2tp2="$6" hsdp="$7"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" train

# compare A B [TOLERANCE]: losses of B equal A's (from B's first_step on,
# 1-based) within TOLERANCE relative (default 1e-5).
compare() {
  /usr/bin/python3 - "$@" <<'EOF' || fail "losses differ: $*"
import json, sys
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
a = json.load(open(sys.argv[1]))["losses"]
b_all = json.load(open(sys.argv[2]))
b = b_all["losses"]
first = b_all.get("first_step", 1)
a = a[first - 1:first - 1 + len(b)]
assert len(a) == len(b) and len(b) > 0, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{sys.argv[2]}: {len(b)} steps from {first}, worst relative difference {worst:.2e}")
sys.exit(0 if worst <= tolerance else 1)
EOF
}


common=(--steps=20 --timeout_s=60 --progress=false)
run single "$train" --plan="$single" "${common[@]}" --losses_out="$work/single.json"
run fsdp4 "$train" --plan="$fsdp4" "${common[@]}" --nproc=4 --losses_out="$work/fsdp4.json" \
    --memory_out="$work/memory.json" --trace="$work/trace.json"
compare "$work/single.json" "$work/fsdp4.json"
grep -q "vs plan" "$work/fsdp4.log" || fail "no memory table: $(cat "$work/fsdp4.log")"
grep -q "4 ranks via train --nproc" "$work/fsdp4.log" || fail "launcher: $(head -3 "$work/fsdp4.log")"
/usr/bin/python3 - "$work/trace.json" <<'EOF' || fail "trace.json"
import json, sys
t = json.load(open(sys.argv[1]))
pids = {e["pid"] for e in t["traceEvents"] if e["ph"] == "X"}
assert pids == {0, 1, 2, 3}, pids
kinds = {c["kind"] for c in t["loomSummary"]["collectives"]}
assert {"all_gather", "reduce_scatter"} <= kinds, kinds
EOF

run hsdp "$launch" --nproc=4 --timeout=120s -- "$train" --plan="$hsdp" "${common[@]}" \
    --losses_out="$work/hsdp.json"
compare "$work/single.json" "$work/hsdp.json"
grep -q "4 ranks via torchrun" "$work/hsdp.log" || fail "launcher: $(head -3 "$work/hsdp.log")"

# Every layout of both models under mpirun with the mpi backend.
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
# mpi_test_env.sh set its own EXIT trap; remove our work directory too.
trap cleanup EXIT
plans="$(dirname "$(dirname "$single")")"
# mpi_run NAME RANKS PLAN: PLAN under mpirun with the mpi backend, losses
# to $work/NAME.json.
mpi_run() {
  local name="$1" ranks="$2" plan="$3" port
  port=$(free_port)
  run "$name" mpirun "${mpirun_flags[@]}" --timeout 120 -np "$ranks" -x MASTER_PORT="$port" \
      -x OPENBLAS_NUM_THREADS=1 "$train" --plan="$plan" "${common[@]}" \
      --backend=mpi --losses_out="$work/$name.json"
}
for model in llama gpt2; do
  if [[ "$model" == gpt2 ]]; then
    run gpt2_single "$train" --plan="$plans/gpt2_single/plan.json" "${common[@]}" \
        --losses_out="$work/gpt2_single.json"
  fi
  reference="$work/single.json"
  [[ "$model" == gpt2 ]] && reference="$work/gpt2_single.json"
  for layout in fsdp4:4 tp2:2 fsdp2_tp2:4 hsdp2x2:4; do
    name="${model}_${layout%%:*}" ranks="${layout##*:}"
    mpi_run "mpi_$name" "$ranks" "$plans/$name/plan.json"
    compare "$reference" "$work/mpi_$name.json"
  done
done

# The memory levers under mpirun: full, selective and per-layer recompute
# and sequence parallelism, against the 1-rank run without them.
for lever in llama_full_hsdp2x2:4 llama_sel_fsdp2_tp2:4 llama_mix_fsdp2_tp2:4 \
    llama_sp_fsdp2_tp2:4 llama_sp_full_fsdp2_tp2:4 gpt2_sp_tp2:2; do
  name="${lever%%:*}" reference="$work/single.json"
  [[ "$name" == gpt2_* ]] && reference="$work/gpt2_single.json"
  mpi_run "mpi_$name" "${lever##*:}" "$plans/$name/plan.json"
  compare "$reference" "$work/mpi_$name.json"
done

# Crash and resume: rank 1 dies after step 12; the latest checkpoint is 10.
"$train" --plan="$fsdp4" "${common[@]}" --nproc=4 --checkpoint_dir="$work/ck" --save_every=5 \
    --fault_kill_rank=1 --fault_kill_at_step=12 > "$work/killed.log" 2>&1 \
    && fail "the killed run exited 0"
grep -q "kills itself after step 12" "$work/killed.log" || fail "no kill: $(cat "$work/killed.log")"
[[ "$(cat "$work/ck/latest")" == step_10 ]] || fail "latest is not step 10: $(cat "$work/ck/latest")"
cp -r "$work/ck" "$work/ck2"
run resumed "$train" --plan="$fsdp4" "${common[@]}" --nproc=4 --checkpoint_dir="$work/ck" \
    --resume --save_every=0 --losses_out="$work/resumed.json"
grep -q "resumed from .*step 10" "$work/resumed.log" || fail "no resume line"
compare "$work/fsdp4.json" "$work/resumed.json"

# A learning-rate schedule (warmup, cosine decay) is a function of the
# step: a run killed after step 12 and resumed from step 10 continues it
# exactly, and the schedule changes the losses.
sched=(--lr_warmup_steps=3 --lr_decay=cosine --lr_min_ratio=0.1)
run sched "$train" --plan="$fsdp4" "${common[@]}" "${sched[@]}" --nproc=4 \
    --losses_out="$work/sched.json"
grep -q "step 2/20 loss .* lr " "$work/sched.log" || fail "no lr on the step lines: $(head -5 "$work/sched.log")"
"$train" --plan="$fsdp4" "${common[@]}" "${sched[@]}" --nproc=4 --checkpoint_dir="$work/cks" \
    --save_every=5 --fault_kill_rank=1 --fault_kill_at_step=12 > "$work/sched_killed.log" 2>&1 \
    && fail "the killed scheduled run exited 0"
run sched_resumed "$train" --plan="$fsdp4" "${common[@]}" "${sched[@]}" --nproc=4 \
    --checkpoint_dir="$work/cks" --resume --save_every=0 --losses_out="$work/sched_resumed.json"
compare "$work/sched.json" "$work/sched_resumed.json" 0
/usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(p))["losses"] for p in sys.argv[1:])
sys.exit(0 if a[1] != b[1] else 1)' "$work/fsdp4.json" "$work/sched.json" || fail "the schedule changed nothing"
"$train" --plan="$fsdp4" --steps=4 --lr_decay=cosine --lr_warmup_steps=4 --nproc=4 \
    > "$work/sched_bad.log" 2>&1 && fail "a decay ending inside the warmup was accepted"
grep -q "raise --lr_decay_steps" "$work/sched_bad.log" || fail "no schedule error: $(cat "$work/sched_bad.log")"

# The metrics log: one JSON line per step from rank 0, with the fields
# docs/runtime.md lists; the losses are the run's.
run metrics "$train" --plan="$fsdp4" "${common[@]}" "${sched[@]}" --nproc=4 --max_grad_norm=1 \
    --metrics_out="$work/metrics.jsonl" --losses_out="$work/metrics_losses.json"
/usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
losses = json.load(open(sys.argv[2]))["losses"]
assert [l["step"] for l in lines] == list(range(1, 21)), [l["step"] for l in lines]
assert [l["loss"] for l in lines] == losses
for l in lines:
    assert set(l) == {"step", "loss", "lr", "grad_norm", "tokens_per_s", "step_s", "peak_bytes",
                      "phase_peak_bytes", "reserved_bytes", "comm_bytes", "exposed_comm_s"}, l
    assert l["lr"] > 0 and l["tokens_per_s"] > 0 and l["step_s"] > 0 and l["peak_bytes"] > 0, l
    # fsdp 4 gathers and reduce-scatters every step; the host waits some.
    assert l["comm_bytes"] > 0 and 0 <= l["exposed_comm_s"] <= l["step_s"], l
assert lines[0]["lr"] < lines[3]["lr"] > lines[-1]["lr"]' "$work/metrics.jsonl" "$work/metrics_losses.json" \
    || fail "bad metrics log: $(head -3 "$work/metrics.jsonl")"

# A rank killed while writing its shards of step 15: step 15 never
# commits, latest stays step_10, and resuming gives the same losses.
cp -r "$work/ck2" "$work/ck3"
"$train" --plan="$fsdp4" "${common[@]}" --nproc=4 --checkpoint_dir="$work/ck3" --resume \
    --save_every=5 --fault_kill_rank=2 --fault_kill_in_save=15 > "$work/killed_in_save.log" 2>&1 \
    && fail "the run killed while saving exited 0"
grep -q "kills itself while saving step 15" "$work/killed_in_save.log" \
    || fail "no kill in save: $(cat "$work/killed_in_save.log")"
[[ "$(cat "$work/ck3/latest")" == step_10 ]] || fail "latest moved past the torn step: $(cat "$work/ck3/latest")"
[[ ! -e "$work/ck3/step_15/manifest.json" ]] || fail "the torn step 15 has a manifest"
run resumed_after_torn_save "$train" --plan="$fsdp4" "${common[@]}" --nproc=4 \
    --checkpoint_dir="$work/ck3" --resume --save_every=0 --losses_out="$work/resumed2.json"
compare "$work/fsdp4.json" "$work/resumed2.json"

# Reshard on load: the 4-rank fsdp step-10 checkpoint under fsdp x tp.
run reshard "$train" --plan="$fsdp2tp2" "${common[@]}" --nproc=4 --checkpoint_dir="$work/ck2" \
    --resume --losses_out="$work/reshard.json"
compare "$work/fsdp4.json" "$work/reshard.json"
# Deterministic mode and the parity tool.
short=(--steps=4 --timeout_s=60 --progress=false)
run det1 "$train" --plan="$single" "${short[@]}" --deterministic --dump_dir="$work/d1"
run det4 "$train" --plan="$hsdp" "${short[@]}" --nproc=4 --deterministic --dump_dir="$work/d4"
run plain4 "$train" --plan="$hsdp" "${short[@]}" --nproc=4 --dump_dir="$work/p4"
out=$("$parity" --a="$work/d1" --b="$work/d4") || fail "parity: $out"
grep -q "identical bit for bit over 4 steps" <<<"$out" || fail "deterministic hsdp differs: $out"
out=$("$parity" --a="$work/d1" --b="$work/p4") || fail "parity: $out"
grep -q "first divergence: step 1, gradient grad:" <<<"$out" || fail "no divergence named: $out"
echo "parity: $out"

# Mixed precision. Layouts round bf16 partial sums at different points, so
# they agree with the 1-rank run within bf16's precision, not bit for bit.
bf16=2e-3
run bf16_single "$train" --plan="$plans/llama_bf16_single/plan.json" "${common[@]}" \
    --losses_out="$work/bf16_single.json"
run bf16_fsdp4 "$train" --plan="$plans/llama_bf16_fsdp4/plan.json" "${common[@]}" --nproc=4 \
    --losses_out="$work/bf16_fsdp4.json"
compare "$work/bf16_single.json" "$work/bf16_fsdp4.json" "$bf16"
compare "$work/single.json" "$work/bf16_single.json" "$bf16"
mpi_run mpi_bf16_tp2 2 "$plans/llama_bf16_tp2/plan.json"
compare "$work/bf16_single.json" "$work/mpi_bf16_tp2.json" "$bf16"
# bf16 params are checkpointed as their (exact) f32 values next to the f32
# master copies, so a resume continues bit for bit.
"$train" --plan="$plans/llama_bf16_fsdp4/plan.json" "${common[@]}" --nproc=4 \
    --checkpoint_dir="$work/ck_bf16" --save_every=5 --fault_kill_rank=3 --fault_kill_at_step=12 \
    > "$work/bf16_killed.log" 2>&1 && fail "the killed bf16 run exited 0"
run bf16_resumed "$train" --plan="$plans/llama_bf16_fsdp4/plan.json" "${common[@]}" --nproc=4 \
    --checkpoint_dir="$work/ck_bf16" --resume --save_every=0 --losses_out="$work/bf16_resumed.json"
compare "$work/bf16_fsdp4.json" "$work/bf16_resumed.json" 0

# Gradient accumulation: batch 8 as two micro-steps, the gathers kept and
# the reductions deferred between them, over gloo and under mpirun, against
# the 1-rank run of batch 8 in one step; train feeds each micro-batch.
run accum_single "$train" --plan="$plans/accum_llama_single/plan.json" "${common[@]}" \
    --losses_out="$work/accum_single.json"
run accum_fsdp4 "$train" --plan="$plans/accum_llama_both_fsdp4_m2/plan.json" "${common[@]}" \
    --nproc=4 --losses_out="$work/accum_fsdp4.json"
compare "$work/accum_single.json" "$work/accum_fsdp4.json"
mpi_run mpi_accum_hsdp 4 "$plans/accum_llama_both_hsdp2x2_m2/plan.json"
compare "$work/accum_single.json" "$work/mpi_accum_hsdp.json"
echo "PASS"
