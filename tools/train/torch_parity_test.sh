#!/usr/bin/env bash
# The runtime against the same model written in plain PyTorch
# (tests/torch_ref, Debian's python3-torch): tiny Llama and tiny GPT-2, the
# plan's init, the same synthetic batches, 20 AdamW steps on 4 fsdp ranks.
# Losses must agree within 1e-4 relative (issue #8), and so must the final
# parameters (read back from the runtime's sharded checkpoint), which
# catches what a loss comparison at this init is too blunt to see.
# A mixed-precision plan (a name with _bf16_) runs against torch_train.py
# --dtype=bf16-mixed (a bf16 model, float32 master copies under AdamW). torch
# rounds every op's result to bf16 where Loom's kernels round once, so the
# bounds are bf16's: losses within 1e-3 relative, and params and master
# copies within 1e-1 in relative L2 norm (AdamW turns the noise in tiny
# gradients into lr-sized steps, so an element-wise maximum says little).
# A zero-initialised bias is nothing but its 20 steps, so it differs most
# and depends on the BLAS kernels' summation order (GPT-2's ln_1.bias
# reached 0.18 on an AMD Zen 3 with code that was within 0.1 on the
# machine before): biases get 3e-1, still far from the ~100 % of a missing
# master update.
# Args: train, torch_train.py, then (model spec, plan) pairs.
set -u
train="$1" torch_train="$2"; shift 2
work="$(mktemp -d /tmp/loom-parity.XXXXXXXX)"
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
while [[ $# -ge 2 ]]; do
  model="$1" plan="$2"; shift 2
  name="$(basename "$(dirname "$plan")")"
  dtype=float32
  [[ "$name" == *_bf16_* ]] && dtype=bf16-mixed
  "$train" --plan="$plan" --steps=20 --nproc=4 --timeout_s=60 --progress=false \
      --data=synthetic --data_seed=99 --checkpoint_dir="$work/$name.ck" \
      --losses_out="$work/$name.loom.json" > "$work/$name.loom.log" 2>&1 \
      || { cat "$work/$name.loom.log"; fail "$name: train"; }
  /usr/bin/python3 "$torch_train" --model="$model" --batch=4 --seq=16 --plan="$plan" \
      --data=synthetic --data-seed=99 --data-step=1 --steps=20 --quiet --dtype="$dtype" \
      --out="$work/$name.torch.json" --save-final="$work/$name.torch.npz" \
      > "$work/$name.torch.log" 2>&1 || { cat "$work/$name.torch.log"; fail "$name: torch"; }
  PYTHONPATH="$(dirname "$torch_train")" /usr/bin/python3 - "$work" "$name" "$dtype" <<'PY' || fail "$name differs"
import json, sys
import numpy as np
import loom_formats
work, name, dtype = sys.argv[1:]
loom = json.load(open(f"{work}/{name}.loom.json"))["losses"]
torch = json.load(open(f"{work}/{name}.torch.json"))["losses"]
assert len(loom) == len(torch) == 20, (len(loom), len(torch))
worst_loss = max(abs(a - b) / abs(b) for a, b in zip(loom, torch))
checkpoint = loom_formats.load_checkpoint(f"{work}/{name}.ck")
final = np.load(f"{work}/{name}.torch.npz")
hidden = final["transformer.wte.weight"].shape[1] if "transformer.wte.weight" in final.files else 0
key_bias = f"c_attn.bias[{hidden}:{2 * hidden}]"
if dtype == "bf16-mixed":
    compared = [n for n in final.files if n in checkpoint.tensors and not n.endswith(key_bias)]
    assert any(n.startswith("master:") for n in compared), compared
    def relative(n):
        return float(np.linalg.norm(checkpoint.tensors[n] - final[n]) / np.linalg.norm(final[n]))
    # A zero-initialised bias is nothing but its 20 AdamW steps, each about
    # lr in size whatever its gradient's noise: it gets a bound of its own.
    def is_bias(n):  # "master:transformer.h.0.attn.c_attn.bias[128:192]" is one
        return n.split("[")[0].endswith("bias")
    biases = sorted((relative(n), n) for n in compared if is_bias(n))
    weights = sorted((relative(n), n) for n in compared if not is_bias(n))
    worst_bias = biases[-1] if biases else (0.0, "none")
    print(f"{name}: 20 steps (bf16 mixed), worst loss difference {worst_loss:.2e}, worst relative L2 "
          f"difference {weights[-1][0]:.2e} ({weights[-1][1]}) over {len(weights)} weights and master "
          f"copies, {worst_bias[0]:.2e} ({worst_bias[1]}) over {len(biases)} biases")
    sys.exit(0 if worst_loss <= 1e-3 and weights[-1][0] <= 1e-1 and worst_bias[0] <= 0.3 else 1)
params = checkpoint.params()
assert set(params) == set(final.files), set(params) ^ set(final.files)
# GPT-2's key bias (c_attn.bias[H:2H]) has an identically zero gradient
# (softmax ignores a shift shared by all keys); AdamW normalises the float32
# rounding noise left in it (~1e-11) into lr-sized steps in both runs, so
# it carries no signal to compare.
diffs = sorted((float(np.max(np.abs(params[n] - final[n])) / max(np.max(np.abs(final[n])), 1e-12)), n)
               for n in final.files if not n.endswith(key_bias))
worst_param, worst_name = diffs[-1]
print(f"{name}: 20 steps, worst loss difference {worst_loss:.2e}, "
      f"worst final-parameter difference {worst_param:.2e} ({worst_name}, relative to its max); "
      f"next {diffs[-2][0]:.2e} ({diffs[-2][1]})")
sys.exit(0 if worst_loss <= 1e-4 and worst_param <= 1e-4 else 1)
PY
done
echo PASS
