#!/usr/bin/python3
"""Trains a zoo model in plain PyTorch from a Loom checkpoint (or plan.json
init specs) on a Loom token feed with torch.optim.AdamW, and writes the
per-step losses: the reference run of issue #8's end-to-end check.

  /usr/bin/python3 tests/torch_ref/torch_train.py --model=tiny:family=gpt2 \
      --batch=4 --seq=16 --checkpoint=DIR --data=FILE --steps=20 \
      --out=losses.json

Step k (0-based) trains on the data feed's step `first + k` global batch,
`first` being the checkpoint's data step (its metadata `data_step`, else its
step) unless --data-step is given. The loss printed for a step is the loss of
that step's forward pass, before its update. docs/torch_reference.md has the
details.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loom_formats  # noqa: E402
import loom_torch_model  # noqa: E402


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True,
                   help="zoo spec: tiny[:key=value,...] or a published name")
    p.add_argument("--batch", type=int, required=True,
                   help="global batch (rows per step)")
    p.add_argument("--seq", type=int, required=True, help="tokens per row")
    p.add_argument("--checkpoint", help="Loom checkpoint dir (or step dir)")
    p.add_argument("--checkpoint-step", type=int,
                   help="step to load (default: the one 'latest' names)")
    p.add_argument("--plan", help="plan.json: init specs when there is no "
                   "--checkpoint, and the AdamW hyper-parameters of its "
                   "dist.optimizer_step unless given on the command line")
    p.add_argument("--init-seed", type=int,
                   help="without --checkpoint or --plan: initialise as the "
                   "planner would with this seed (see init_spec_for)")
    p.add_argument("--data", required=True, help="token file or 'synthetic'")
    p.add_argument("--data-seed", type=int, default=0,
                   help="FeedConfig.seed of the run (default 0)")
    p.add_argument("--data-step", type=int,
                   help="feed step of the first training step")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--lr", type=float)
    p.add_argument("--beta1", type=float)
    p.add_argument("--beta2", type=float)
    p.add_argument("--eps", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--max-grad-norm", type=float, default=0.0,
                   help="clip by global norm (clip_grad_norm_); 0: off")
    p.add_argument("--dtype", choices=["float32", "float64", "bf16-mixed"],
                   default="float32",
                   help="bf16-mixed: a bf16 model with float32 master copies "
                   "that AdamW updates (a Loom --dtype=bf16 plan)")
    p.add_argument("--out", help="write the losses as JSON here")
    p.add_argument("--save-final", help="write the final parameters here as "
                   ".npz (zoo names), for comparisons")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


ADAMW_DEFAULTS = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                       weight_decay=0.01)


def adamw_hyperparameters(args: argparse.Namespace,
                          plan: Optional[dict]) -> Dict[str, float]:
    """Command line, else plan.json's first dist.optimizer_step attrs, else
    the defaults plan.json uses (torch's, with weight_decay 0.01)."""
    hp = dict(ADAMW_DEFAULTS)
    if plan is not None:
        instructions = [instr for program in plan.get("programs", [])
                        for block in program.get("blocks", [])
                        for instr in block.get("instructions", [])]
        for instr in instructions:
            if instr.get("op") == "dist.optimizer_step":
                attrs = instr.get("attrs", {})
                for key in hp:
                    if key in attrs:
                        hp[key] = float(attrs[key])
                break
    for key in hp:
        value = getattr(args, key)
        if value is not None:
            hp[key] = value
    return hp


def init_spec_for(name: str, seed: int, stream: int) -> loom_formats.InitSpec:
    """The init plan.json gives a parameter (planner/export/plan_json.cc,
    initJson): names ending in norm.weight, ln_1/ln_2/ln_f.weight are ones,
    names ending in `.bias` zeros (slices such as `c_attn.bias[0:64]` too),
    the rest normal(0, 0.02); the stream is
    the parameter's ordinal among the function's parameters, which is the
    order named_parameters() lists the models of loom_torch_model in."""
    name = name.split("[", 1)[0]  # a slice inits like the tensor it is of
    if name.endswith(("norm.weight", "ln_1.weight", "ln_2.weight",
                      "ln_f.weight")):
        return loom_formats.InitSpec("ones", 0.0, 0.0, seed, stream)
    if name.endswith(".bias"):
        return loom_formats.InitSpec("zeros", 0.0, 0.0, seed, stream)
    return loom_formats.InitSpec("normal", 0.0, 0.02, seed, stream)


class Trainer:
    """A model, its AdamW and the feed: one train_step per feed step."""

    def __init__(self, config: loom_torch_model.ModelConfig, dtype: torch.dtype,
                 hp: Dict[str, float], max_grad_norm: float,
                 mixed: bool = False):
        self.model = loom_torch_model.build_model(config).to(dtype)
        self.dtype = dtype
        self.max_grad_norm = max_grad_norm
        self.params = list(self.model.parameters())
        # Mixed precision: AdamW steps float32 master copies (as Loom's
        # master:NAME buffers) from the bf16 gradients, and the bf16 params
        # are the masters rounded after every step.
        self.masters = ([torch.nn.Parameter(p.detach().float().clone())
                         for p in self.params] if mixed else None)
        # foreach=False: the single-tensor path the runtime's AdamW follows.
        self.optimizer = torch.optim.AdamW(
            self.masters if mixed else self.params, lr=hp["lr"],
            betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
            weight_decay=hp["weight_decay"], foreach=False)

    def load_state(self, tensors: Dict[str, np.ndarray],
                   checkpoint: Optional[loom_formats.Checkpoint]) -> None:
        loom_torch_model.load_named_state(self.model, tensors, self.dtype)
        if self.masters is not None:
            if checkpoint is not None:
                raise ValueError("--dtype=bf16-mixed starts from --plan or "
                                 "--init-seed, not a checkpoint")
            # The masters start from the init's float32 values; the params
            # are those rounded.
            for (name, _), master in zip(self.model.named_parameters(),
                                         self.masters):
                master.data.copy_(torch.as_tensor(tensors[name],
                                                  dtype=torch.float32))
        if checkpoint is None:
            return
        t = checkpoint.optimizer_step()
        named = dict(self.model.named_parameters())
        moments = {n: checkpoint.adam_state(n) for n in named}
        have = [n for n, m in moments.items() if m is not None]
        if not have:
            if t:
                raise ValueError(f"checkpoint says optimizer step {t} but "
                                 "holds no exp_avg:/exp_avg_sq: tensors")
            return
        if len(have) != len(named):
            raise ValueError(f"checkpoint has AdamW moments of {len(have)} of "
                             f"{len(named)} parameters")
        for name, param in named.items():
            m, v = moments[name]
            self.optimizer.state[param] = {
                "step": torch.tensor(float(t)),
                "exp_avg": torch.tensor(m, dtype=self.dtype),
                "exp_avg_sq": torch.tensor(v, dtype=self.dtype),
            }

    def train_step(self, ids: np.ndarray,
                   labels: np.ndarray) -> Tuple[float, float]:
        """(loss, global gradient norm before clipping) of one step."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.model.loss(torch.as_tensor(ids), torch.as_tensor(labels))
        loss.backward()
        stepped = self.params
        if self.masters is not None:
            for param, master in zip(self.params, self.masters):
                master.grad = param.grad.float()
                param.grad = None
            stepped = self.masters
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(stepped,
                                                  self.max_grad_norm)
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in stepped]))
        self.optimizer.step()
        if self.masters is not None:
            with torch.no_grad():
                for param, master in zip(self.params, self.masters):
                    param.copy_(master)
        return float(loss.detach()), float(norm)


def initial_state(args: argparse.Namespace, model: torch.nn.Module,
                  plan: Optional[dict]):
    """(tensors by zoo name, checkpoint or None, its data step)."""
    if args.checkpoint:
        ckpt = loom_formats.load_checkpoint(args.checkpoint,
                                            args.checkpoint_step)
        return ckpt.params(), ckpt, ckpt.data_step()
    shapes = {n: list(p.shape) for n, p in model.named_parameters()}
    if plan is not None:
        specs = loom_formats.init_specs_from_plan(plan)
        missing = sorted(set(shapes) - set(specs))
        if missing:
            raise ValueError(f"plan.json has no init spec for {missing[:3]}")
    elif args.init_seed is not None:
        specs = {n: (init_spec_for(n, args.init_seed, i), s)
                 for i, (n, s) in enumerate(shapes.items())}
    else:
        raise ValueError("give --checkpoint, --plan or --init-seed")
    return {n: loom_formats.init_tensor(*specs[n]) for n in shapes}, None, 0


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    config = loom_torch_model.config_from_spec(args.model)
    if args.seq > config.max_seq:
        raise SystemExit(f"--seq {args.seq} exceeds the model's max_seq "
                         f"{config.max_seq}")
    plan = None
    if args.plan:
        with open(args.plan) as f:
            plan = json.load(f)
    dtype = {"float64": torch.float64, "bf16-mixed": torch.bfloat16}.get(
        args.dtype, torch.float32)
    hp = adamw_hyperparameters(args, plan)
    trainer = Trainer(config, dtype, hp, args.max_grad_norm,
                      mixed=args.dtype == "bf16-mixed")
    tensors, ckpt, data_step = initial_state(args, trainer.model, plan)
    trainer.load_state(tensors, ckpt)
    if args.data_step is not None:
        data_step = args.data_step
    feed = loom_formats.TokenFeed(args.data, config.vocab, args.seq,
                                  args.batch, args.data_seed)
    losses, norms = [], []
    for k in range(args.steps):
        ids, labels = feed.batch_at(data_step + k)
        loss, norm = trainer.train_step(ids, labels)
        losses.append(loss)
        norms.append(norm)
        if not args.quiet:
            print(f"step {k} (data step {data_step + k}): loss {loss:.9g} "
                  f"grad norm {norm:.6g}", flush=True)
    result = {
        "losses": losses, "model": args.model, "steps": args.steps,
        "grad_norms": norms,
        "batch": args.batch, "seq": args.seq, "dtype": args.dtype,
        "first_data_step": data_step, "data": args.data,
        "data_seed": args.data_seed,
        "optimizer": dict(hp, max_grad_norm=args.max_grad_norm),
        "torch": torch.__version__,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    if args.save_final:
        final = {n: p.detach().float().numpy() for n, p in
                 trainer.model.named_parameters()}
        if trainer.masters is not None:
            for (n, _), master in zip(trainer.model.named_parameters(),
                                      trainer.masters):
                final[f"master:{n}"] = master.detach().numpy()
        np.savez(args.save_final, **final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
