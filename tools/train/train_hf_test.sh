#!/usr/bin/env bash
# --init_from_hf and --export_hf end to end (docs/runtime_hf.md), on tiny
# Llama over 4 processes:
# 1. fsdp 4 trains 3 steps, saves a checkpoint and exports safetensors; the
#    export, read here by hand, holds the checkpoint's weights in Hugging
#    Face's names and layouts ([out, in] projections, lm_head);
# 2. fsdp 2 x tp 2 and one rank start from that export: the same first loss,
#    not the init's, and fsdp 2 x tp 2 exports the weights it trained;
# 3. a missing file, a truncated file and --resume with --init_from_hf fail
#    with messages that name the cause.
# Args: train, loom_formats.py, the fsdp4, fsdp2_tp2 and single plans.
set -u
train="$1" formats="$2" fsdp4="$3" fsdp2tp2="$4" single="$5"
work="$(mktemp -d /tmp/loom-train-hf.XXXXXXXX)"
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # name, then train flags
  local name="$1"; shift
  "$train" --timeout_s=60 --progress=false --data=synthetic --data_seed=5 "$@" \
      > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name"; }
}

run trained --plan="$fsdp4" --nproc=4 --steps=3 --checkpoint_dir="$work/ck" \
    --export_hf="$work/hf" --losses_out="$work/trained.json"
grep -q "exported the weights to $work/hf" "$work/trained.log" || fail "no export line"
run tp --plan="$fsdp2tp2" --nproc=4 --steps=2 --init_from_hf="$work/hf" \
    --export_hf="$work/hf_tp" --losses_out="$work/tp.json"
grep -q "loaded 21 parameters from $work/hf/model.safetensors" "$work/tp.log" \
    || { cat "$work/tp.log"; fail "no load line"; }
run single --plan="$single" --nproc=1 --steps=1 --init_from_hf="$work/hf/model.safetensors" \
    --losses_out="$work/single.json"

PYTHONPATH="$(dirname "$formats")" /usr/bin/python3 - "$work" <<'PY' || fail "weights or losses differ"
import json, struct, sys
import numpy as np
import loom_formats
work = sys.argv[1]

def read_safetensors(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + b:8 + n + e], "<f4").reshape(t["shape"])
    return out

hf = read_safetensors(f"{work}/hf/model.safetensors")
params = loom_formats.load_checkpoint(f"{work}/ck").params()
names = {"tok_embeddings.weight": ("model.embed_tokens.weight", False),
         "norm.weight": ("model.norm.weight", False), "output.weight": ("lm_head.weight", True)}
layer = {"attention_norm.weight": ("input_layernorm.weight", False),
         "ffn_norm.weight": ("post_attention_layernorm.weight", False),
         "attention.wq.weight": ("self_attn.q_proj.weight", True),
         "attention.wk.weight": ("self_attn.k_proj.weight", True),
         "attention.wv.weight": ("self_attn.v_proj.weight", True),
         "attention.wo.weight": ("self_attn.o_proj.weight", True),
         "feed_forward.w1.weight": ("mlp.gate_proj.weight", True),
         "feed_forward.w2.weight": ("mlp.down_proj.weight", True),
         "feed_forward.w3.weight": ("mlp.up_proj.weight", True)}
for i in range(2):
    for zoo, (name, t) in layer.items():
        names[f"layers.{i}.{zoo}"] = (f"model.layers.{i}.{name}", t)
assert set(params) == set(names), set(params) ^ set(names)
assert set(hf) == {n for n, _ in names.values()}, set(hf) ^ {n for n, _ in names.values()}
for zoo, (name, transposed) in names.items():
    want = params[zoo].T if transposed else params[zoo]
    assert np.array_equal(hf[name], want), zoo
trained = json.load(open(f"{work}/trained.json"))["losses"]
tp = json.load(open(f"{work}/tp.json"))["losses"]
single = json.load(open(f"{work}/single.json"))["losses"]
assert abs(tp[0] - single[0]) <= 1e-5 * abs(single[0]), (tp[0], single[0])
assert tp[0] != trained[0], "the loaded weights gave the init's loss"
# fsdp 2 x tp 2 exported the weights of its own 2 steps.
after = read_safetensors(f"{work}/hf_tp/model.safetensors")
assert set(after) == set(hf) and any(not np.array_equal(after[n], hf[n]) for n in hf)
print(f"export matches the checkpoint ({len(names)} tensors); first loss {tp[0]:.6f} "
      f"(fsdp2 x tp2) vs {single[0]:.6f} (1 rank), init's {trained[0]:.6f}")
PY

expect_error() {  # name, expected message, then train flags
  local name="$1" message="$2"; shift 2
  if "$train" --timeout_s=60 --progress=false --steps=1 "$@" > "$work/$name.log" 2>&1; then
    fail "$name: train succeeded"
  fi
  grep -qF -- "$message" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: no '$message'"; }
}
expect_error missing "$work/none" --plan="$single" --nproc=1 --init_from_hf="$work/none"
cp "$work/hf/model.safetensors" "$work/cut.safetensors"
truncate -s 4000 "$work/cut.safetensors"
expect_error truncated "$work/cut.safetensors: tensor '" --plan="$single" --nproc=1 \
    --init_from_hf="$work/cut.safetensors"
expect_error both "--init_from_hf and --resume" --plan="$single" --nproc=1 \
    --init_from_hf="$work/hf" --resume --checkpoint_dir="$work/ck"
echo PASS
