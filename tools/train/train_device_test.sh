#!/usr/bin/env bash
# //tools:train --device: where no GPU is usable, --device=cuda exits 3 with
# "train: skipped: no usable GPU: <reason>" (the convention of calibrate and
# comm-bench, which tests/gpu/run_all.sh reads); where one is, it trains tiny
# Llama for 3 steps, its losses match --device=cpu within 1e-4 relative, and
# a second CUDA run repeats them bit for bit (docs/runtime.md,
# "Reproducibility"). The flag refusals are checked everywhere.
# Args: train, the llama_single plan.
set -u
train="$1" plan="$2"
work="$(mktemp -d /tmp/loom-train-device.XXXXXXXX)"
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
common=(--plan="$plan" --steps=3 --timeout_s=60 --progress=false)

"$train" "${common[@]}" --device=cuda --losses_out="$work/cuda.json" >"$work/cuda.log" 2>&1
rc=$?
if [[ $rc -eq 3 ]]; then
  grep -q '^train: skipped: no usable GPU: ' "$work/cuda.log" ||
    { cat "$work/cuda.log" >&2; fail "exit 3 without 'train: skipped: no usable GPU: <reason>'"; }
  echo "cuda: $(cat "$work/cuda.log")"
elif [[ $rc -eq 0 ]]; then
  "$train" "${common[@]}" --device=cpu --losses_out="$work/cpu.json" >"$work/cpu.log" 2>&1 ||
    { cat "$work/cpu.log" >&2; fail "the cpu run exited $?"; }
  "$train" "${common[@]}" --device=cuda --losses_out="$work/cuda2.json" >"$work/cuda2.log" 2>&1 ||
    { cat "$work/cuda2.log" >&2; fail "the second cuda run exited $?"; }
  /usr/bin/python3 - "$work/cuda.json" "$work/cpu.json" "$work/cuda2.json" <<'PY' ||
import json, sys
cuda, cpu, again = (json.load(open(p))["losses"] for p in sys.argv[1:])
assert len(cuda) == len(cpu) == len(again) == 3, (cuda, cpu, again)
worst = max(abs(a - b) / abs(b) for a, b in zip(cuda, cpu))
print(f"cuda against cpu over {len(cpu)} steps: worst relative difference {worst:.2e}")
if again != cuda:
    print(f"a second cuda run differs: {again} against {cuda}")
    sys.exit(1)
print("a second cuda run repeats every loss bit for bit")
sys.exit(0 if worst <= 1e-4 else 1)
PY
    fail "cuda losses differ from the cpu run's or from run to run"
else
  cat "$work/cuda.log" >&2
  fail "--device=cuda exited $rc (0: trained, 3: skipped)"
fi

"$train" "${common[@]}" --device=tpu >"$work/tpu.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q -- '--device=tpu is not one of cpu, cuda' "$work/tpu.log" ||
  { cat "$work/tpu.log" >&2; fail "--device=tpu: exit $rc, want 2 naming the choices"; }

"$train" "${common[@]}" --device=cpu --backend=nccl >"$work/nccl.log" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -q -- 'nccl needs --device=cuda' "$work/nccl.log" ||
  { cat "$work/nccl.log" >&2; fail "--device=cpu --backend=nccl: exit $rc, want 1 saying why"; }

"$train" --helpfull 2>&1 | grep -qE '^ +--device' || fail "--helpfull does not list --device"
echo "PASS"
