#!/usr/bin/python3
"""Loom's loss on Hugging Face weights against PyTorch's on the same weights.

For tiny Llama and tiny GPT-2 this test makes random weights in Hugging
Face's layouts, writes them as safetensors by hand (no safetensors or
transformers package: the format is an 8-byte header length, the JSON
header, the data), and computes the loss of the synthetic batch (data seed,
step 1) with a plain-torch model written here after transformers'
LlamaForCausalLM and GPT2LMHeadModel:

* Llama: nn.Linear weights [out, in] (y = x W^T), rotate-half rope on
  q_proj / k_proj as in modeling_llama, grouped-query attention through
  repeat_kv, RMSNorm, SwiGLU (down(silu(gate) * up)), an untied lm_head;
* GPT-2: Conv1D weights [in, out] (y = x W + b), q, k, v fused in c_attn
  along out, learned positions, LayerNorm, gelu_new, the head tied to wte.

hf_loss then loads the file into the plan (one rank and 2 x 2 fsdp x tp
ranks) and computes its loss. They must agree within 1e-4 relative, the
bound torch_parity_test uses for float32. Also loaded: the same weights as
BF16 (torch computes with them rounded), a sharded copy with its index, and
a Llama whose head is tied to the embedding (no lm_head.weight in the file).
A Qwen2 planned from its config.json (Hugging Face names, q/k/v biases,
tied head, Llama 3.1 rope scaling, eps 1e-6) runs against the same
reference, which reads the config.

The tiny models' sizes come from the plans' parameter shapes; heads are
tiny's 4 (docs/model_zoo.md), norm eps the zoo's 1e-5. Runs on Debian's
/usr/bin/python3 with python3-torch.
Args: hf_loss, loom_formats.py, then plan.json paths (PLAN,CONFIG for a
plan made from a config.json).
"""
from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HEADS = 4
EPS = 1e-5
THETA = 10000.0


# ------------------------------------------------------------ safetensors

def write_safetensors(path, tensors, dtype="F32"):
    """tensors: name -> float32 numpy array, written as F32 or BF16."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        a = np.ascontiguousarray(array, np.float32)
        if dtype == "BF16":
            bits = a.view(np.uint32)
            rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16
            blob = rounded.astype("<u2").tobytes()
        else:
            blob = a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def bf16_rounded(tensors):
    out = {}
    for name, a in tensors.items():
        bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
        rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16) << 16
        out[name] = rounded.astype(np.uint32).view(np.float32)
    return out


# ------------------------------------------------------------ models

def shapes_of(plan):
    return {b["name"]: b["global_shape"] for b in plan["buffers"] if b["role"] == "param"}


def random_llama(shapes, rng):
    vocab, hidden = shapes["tok_embeddings.weight"]
    layers = sum(1 for n in shapes if n.endswith("attention.wq.weight"))
    kv = shapes["layers.0.attention.wk.weight"][1]
    ffn = shapes["layers.0.feed_forward.w1.weight"][1]
    def w(*s, scale=0.08):
        return (rng.standard_normal(s) * scale).astype(np.float32)
    t = {"model.embed_tokens.weight": w(vocab, hidden, scale=0.5)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + w(hidden, scale=0.1)
        t[p + "self_attn.q_proj.weight"] = w(hidden, hidden)
        t[p + "self_attn.k_proj.weight"] = w(kv, hidden)
        t[p + "self_attn.v_proj.weight"] = w(kv, hidden)
        t[p + "self_attn.o_proj.weight"] = w(hidden, hidden)
        t[p + "post_attention_layernorm.weight"] = 1 + w(hidden, scale=0.1)
        t[p + "mlp.gate_proj.weight"] = w(ffn, hidden)
        t[p + "mlp.up_proj.weight"] = w(ffn, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, ffn)
    t["model.norm.weight"] = 1 + w(hidden, scale=0.1)
    t["lm_head.weight"] = w(vocab, hidden, scale=0.3)
    return t, layers


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def random_from_plan(shapes, rng):
    """Weights for a plan with Hugging Face names (from a config.json): the
    plan holds *_proj.weight transposed, so the file's shape is reversed."""
    t = {}
    for name, shape in shapes.items():
        if name.endswith("_proj.weight"):
            t[name] = (rng.standard_normal(shape[::-1]) * 0.08).astype(np.float32)
        elif "norm" in name:
            t[name] = (1 + rng.standard_normal(shape) * 0.1).astype(np.float32)
        else:
            t[name] = (rng.standard_normal(shape) * (0.5 if "embed" in name else 0.05)).astype(
                np.float32)
    return t, sum(1 for n in shapes if n.endswith("self_attn.q_proj.weight"))


def inverse_frequencies(d, config):
    """transformers' rope init: default, or rope_type llama3
    (_compute_llama3_parameters)."""
    theta = config.get("rope_theta", THETA)
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    scaling = config.get("rope_scaling")
    if not scaling:
        return inv_freq
    assert scaling["rope_type"] == "llama3", scaling
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(q, k, v):
    """q [B, Hq, S, D], k, v [B, Hkv, S, D]: causal, repeat_kv for GQA."""
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1:
        b, h, s, d = k.shape
        k = k[:, :, None].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)
        v = v[:, :, None].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = q.shape[2]
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def llama_loss(t, layers, ids, labels, config=None):
    """LlamaForCausalLM (and Qwen2, whose q/k/v projections have biases)."""
    config = config or {}
    eps = config.get("rms_norm_eps", EPS)
    T = {k: torch.from_numpy(v) for k, v in t.items()}
    b, s = ids.shape
    hidden = T["model.embed_tokens.weight"].shape[1]
    d = hidden // config.get("num_attention_heads", HEADS)
    freqs = torch.arange(s, dtype=torch.float64)[:, None] * inverse_frequencies(d, config)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()

    def proj(x, p):
        return F.linear(x, T[p + ".weight"], T.get(p + ".bias"))

    x = F.embedding(ids, T["model.embed_tokens.weight"])
    for i in range(layers):
        p = f"model.layers.{i}."
        h = rms_norm(x, T[p + "input_layernorm.weight"], eps)
        q = proj(h, p + "self_attn.q_proj").view(b, s, -1, d).transpose(1, 2)
        k = proj(h, p + "self_attn.k_proj").view(b, s, -1, d).transpose(1, 2)
        v = proj(h, p + "self_attn.v_proj").view(b, s, -1, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = attention(q, k, v).transpose(1, 2).reshape(b, s, hidden)
        x = x + proj(o, p + "self_attn.o_proj")
        h = rms_norm(x, T[p + "post_attention_layernorm.weight"], eps)
        x = x + proj(F.silu(proj(h, p + "mlp.gate_proj")) * proj(h, p + "mlp.up_proj"),
                     p + "mlp.down_proj")
    head = T.get("lm_head.weight", T["model.embed_tokens.weight"])
    logits = F.linear(rms_norm(x, T["model.norm.weight"], eps), head)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).item()


def random_gpt2(shapes, rng):
    vocab, hidden = shapes["transformer.wte.weight"]
    positions = shapes["transformer.wpe.weight"][0]
    layers = sum(1 for n in shapes if n.endswith("attn.c_proj.weight"))
    ffn = shapes["transformer.h.0.mlp.c_fc.weight"][1]
    def w(*s, scale=0.08):
        return (rng.standard_normal(s) * scale).astype(np.float32)
    t = {"transformer.wte.weight": w(vocab, hidden, scale=0.5),
         "transformer.wpe.weight": w(positions, hidden, scale=0.1)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        t[p + "ln_1.weight"] = 1 + w(hidden, scale=0.1)
        t[p + "ln_1.bias"] = w(hidden, scale=0.05)
        t[p + "attn.c_attn.weight"] = w(hidden, 3 * hidden)  # Conv1D [in, out]
        t[p + "attn.c_attn.bias"] = w(3 * hidden, scale=0.05)
        t[p + "attn.c_proj.weight"] = w(hidden, hidden)
        t[p + "attn.c_proj.bias"] = w(hidden, scale=0.05)
        t[p + "ln_2.weight"] = 1 + w(hidden, scale=0.1)
        t[p + "ln_2.bias"] = w(hidden, scale=0.05)
        t[p + "mlp.c_fc.weight"] = w(hidden, ffn)
        t[p + "mlp.c_fc.bias"] = w(ffn, scale=0.05)
        t[p + "mlp.c_proj.weight"] = w(ffn, hidden)
        t[p + "mlp.c_proj.bias"] = w(hidden, scale=0.05)
    t["transformer.ln_f.weight"] = 1 + w(hidden, scale=0.1)
    t["transformer.ln_f.bias"] = w(hidden, scale=0.05)
    return t, layers


def conv1d(x, weight, bias):
    return torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight).view(*x.shape[:-1], -1)


def gpt2_loss(t, layers, ids, labels):
    T = {k: torch.from_numpy(v) for k, v in t.items()}
    b, s = ids.shape
    hidden = T["transformer.wte.weight"].shape[1]
    d = hidden // HEADS
    x = F.embedding(ids, T["transformer.wte.weight"]) + T["transformer.wpe.weight"][:s]
    for i in range(layers):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (hidden,), T[p + "ln_1.weight"], T[p + "ln_1.bias"], EPS)
        q, k, v = conv1d(h, T[p + "attn.c_attn.weight"], T[p + "attn.c_attn.bias"]).split(hidden, 2)
        q, k, v = (z.view(b, s, HEADS, d).transpose(1, 2) for z in (q, k, v))
        o = attention(q, k, v).transpose(1, 2).reshape(b, s, hidden)
        x = x + conv1d(o, T[p + "attn.c_proj.weight"], T[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (hidden,), T[p + "ln_2.weight"], T[p + "ln_2.bias"], EPS)
        m = F.gelu(conv1d(h, T[p + "mlp.c_fc.weight"], T[p + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + conv1d(m, T[p + "mlp.c_proj.weight"], T[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (hidden,), T["transformer.ln_f.weight"], T["transformer.ln_f.bias"], EPS)
    logits = F.linear(x, T["transformer.wte.weight"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).item()


# ------------------------------------------------------------ the test

def loom_loss(hf_loss, plan_path, weights, seed):
    run = subprocess.run([hf_loss, f"--plan={plan_path}", f"--weights={weights}",
                          f"--data_seed={seed}"], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise AssertionError(f"hf_loss {plan_path} {weights} failed:\n{run.stderr}")
    return json.loads(run.stdout)["loss"]


def main():
    hf_loss, formats = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(formats))
    import loom_formats
    seed = 99
    work = tempfile.mkdtemp(prefix="loom-hf-parity.")
    failures = []
    for arg in sys.argv[3:]:
        # A plan made from a config.json comes as PLAN,CONFIG.
        plan_path, _, config_path = arg.partition(",")
        config = json.load(open(config_path)) if config_path else {}
        plan = json.load(open(plan_path))
        shapes = shapes_of(plan)
        gpt2 = "transformer.wte.weight" in shapes
        name = os.path.basename(os.path.dirname(plan_path))
        rng = np.random.default_rng(7)
        make = random_gpt2 if gpt2 else random_from_plan if config else random_llama
        tensors, layers = make(shapes, rng)
        if gpt2:
            loss_fn = gpt2_loss
        else:
            def loss_fn(t, layers, ids, labels, config=config):
                return llama_loss(t, layers, ids, labels, config)
        ids_shape = plan["buffers"][plan["interface"]["ids"]]["global_shape"]
        feed = loom_formats.TokenFeed("synthetic", plan["interface"]["vocab"], ids_shape[1],
                                      ids_shape[0], seed)
        ids, labels = (torch.from_numpy(a.copy()) for a in feed.batch_at(1))
        cases = []
        path = os.path.join(work, f"{name}.f32.safetensors")
        write_safetensors(path, tensors)
        cases.append(("F32", path, loss_fn(tensors, layers, ids, labels)))
        path = os.path.join(work, f"{name}.bf16.safetensors")
        write_safetensors(path, tensors, "BF16")
        cases.append(("BF16", path, loss_fn(bf16_rounded(tensors), layers, ids, labels)))
        # Sharded: two files and transformers' index.
        shard_dir = os.path.join(work, f"{name}.sharded")
        os.makedirs(shard_dir)
        names = list(tensors)
        halves = [names[:len(names) // 2], names[len(names) // 2:]]
        weight_map = {}
        for k, half in enumerate(halves):
            file = f"model-{k + 1:05d}-of-00002.safetensors"
            write_safetensors(os.path.join(shard_dir, file), {n: tensors[n] for n in half})
            weight_map.update({n: file for n in half})
        json.dump({"metadata": {}, "weight_map": weight_map},
                  open(os.path.join(shard_dir, "model.safetensors.index.json"), "w"))
        cases.append(("sharded", shard_dir, cases[0][2]))
        if "lm_head.weight" in tensors or "output.weight" in shapes:
            tied = {n: a for n, a in tensors.items() if n != "lm_head.weight"}
            path = os.path.join(work, f"{name}.tied.safetensors")
            write_safetensors(path, tied)
            cases.append(("tied head", path, loss_fn(tied, layers, ids, labels)))
        for what, weights, expected in cases:
            got = loom_loss(hf_loss, plan_path, weights, seed)
            relative = abs(got - expected) / abs(expected)
            ok = relative <= 1e-4
            print(f"{name} {what}: loom {got:.7f} torch {expected:.7f} relative {relative:.2e}"
                  f" {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} {what}")
        # Random weights, not the init: the loss is far from log(vocab).
        assert abs(cases[0][2] - math.log(plan["interface"]["vocab"])) > 0.05, cases[0][2]
    if failures:
        print("FAIL:", ", ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
