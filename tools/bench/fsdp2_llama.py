"""The PyTorch side of tools/bench/fsdp2_side_by_side.sh: the zoo's Llama
(planner/models/zoo_builder.cc: rms_norm, rope on pairs (i, i + D/2), causal
grouped-query attention, silu(w1 x) * w3 x, untied output head, mean
cross-entropy) written the way a PyTorch user writes it, trained with AdamW
on random tokens on 1 rank (no FSDP) or on N local ranks under FSDP2
(`fully_shard` on each block and on the root, gloo). Prints nothing but
errors; writes {"step_seconds": [...]} of rank 0 to --out, each step timed
from its forward to the end of its optimizer step on rank 0, as Loom's
`train` times a step.

  python fsdp2_llama.py --layers=4 --hidden=256 --heads=8 --kv-heads=4 \
      --ffn=768 --vocab=2048 --seq=128 --batch=8 --nproc=2 \
      --variant=prefetch-fused --steps=10 --out=times.json

Variants: `plain` (FSDP2's defaults and AdamW's foreach path) and
`prefetch-fused` (each block prefetches the next one's all-gather in the
forward and the previous one's in the backward, explicitly, and
AdamW(fused=True)). Both run with torch.set_num_threads(1).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab", "seq",
                 "batch", "steps"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--nproc", type=int, default=1,
                   help="local ranks; 1 trains without FSDP")
    p.add_argument("--variant", choices=["plain", "prefetch-fused"],
                   default="plain")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--out", required=True, help="JSON of rank 0's step times")
    args = p.parse_args()
    if args.hidden % args.heads or args.heads % args.kv_heads:
        p.error(f"hidden {args.hidden} must divide by heads {args.heads}, "
                f"and heads by kv heads {args.kv_heads}")
    if args.batch % args.nproc:
        p.error(f"batch {args.batch} does not divide among {args.nproc} ranks")
    return args


class Attention(nn.Module):
    def __init__(self, a: argparse.Namespace):
        super().__init__()
        self.heads, self.kv_heads = a.heads, a.kv_heads
        self.head_dim = a.hidden // a.heads
        self.wq = nn.Linear(a.hidden, a.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(a.hidden, a.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(a.hidden, a.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(a.heads * self.head_dim, a.hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=self.heads != self.kv_heads)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


def rotate(x, cos, sin):
    """Rotate-half rope on [B, H, S, D]: pairs (i, i + D/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, a: argparse.Namespace):
        super().__init__()
        self.attention_norm = nn.RMSNorm(a.hidden, eps=1e-5)
        self.attention = Attention(a)
        self.ffn_norm = nn.RMSNorm(a.hidden, eps=1e-5)
        self.w1 = nn.Linear(a.hidden, a.ffn, bias=False)
        self.w2 = nn.Linear(a.ffn, a.hidden, bias=False)
        self.w3 = nn.Linear(a.hidden, a.ffn, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, a: argparse.Namespace):
        super().__init__()
        self.tok_embeddings = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = nn.RMSNorm(a.hidden, eps=1e-5)
        self.output = nn.Linear(a.hidden, a.vocab, bias=False)
        head_dim = a.hidden // a.heads
        inv = a.rope_theta ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
        angle = torch.arange(a.seq, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cos(angle).float(), persistent=False)
        self.register_buffer("sin", torch.sin(angle).float(), persistent=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, labels):
        x = self.tok_embeddings(tokens)
        for block in self.layers:
            x = block(x, self.cos, self.sin)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


def shard(model: Llama, variant: str) -> None:
    """FSDP2 as torchtitan applies it: each block, then the root."""
    from torch.distributed.fsdp import fully_shard
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    if variant == "prefetch-fused":
        blocks = list(model.layers)
        for i, block in enumerate(blocks):
            if i + 1 < len(blocks):
                block.set_modules_to_forward_prefetch([blocks[i + 1]])
            if i > 0:
                block.set_modules_to_backward_prefetch([blocks[i - 1]])


def run(rank: int, args: argparse.Namespace, port: int) -> None:
    torch.set_num_threads(1)
    distributed = args.nproc > 1
    if distributed:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    torch.manual_seed(0)
    model = Llama(args)
    if distributed:
        shard(model, args.variant)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                                  fused=args.variant == "prefetch-fused")
    rows = args.batch // args.nproc
    generator = torch.Generator().manual_seed(1234 + rank)
    times = []
    for _ in range(args.steps):
        tokens = torch.randint(args.vocab, (rows, args.seq), generator=generator)
        labels = torch.randint(args.vocab, (rows, args.seq), generator=generator)
        start = time.perf_counter()
        loss = model(tokens, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"rank {rank}: loss {loss.item()} is not finite")
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"step_seconds": times, "torch": torch.__version__}, f)
    if distributed:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    args = parse_args()
    port = free_port()
    if args.nproc == 1:
        run(0, args, port)
    else:
        mp.spawn(run, args=(args, port), nprocs=args.nproc)


if __name__ == "__main__":
    main()
