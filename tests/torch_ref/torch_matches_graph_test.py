#!/usr/bin/python3
"""Ties the PyTorch reference (loom_torch_model, loom_formats, torch_train)
to the zoo graph, without the executor. For tiny Llama and tiny GPT-2,
graph_reference (C++) initialises the parameters as plan.json says, writes
them as a checkpoint with a token file, and evaluates the step-0 loss and
gradients with the float64 nn evaluator on the plan-autodiff graph, plus one
step of the runtime's AdamW saved as a 3-rank checkpoint. This test then
requires:

* the Python feed gives the same ids and labels as runtime/data for steps 0
  and 1, and the Python Philox init the same weights as runtime/init;
* the torch model's step-0 loss equals the evaluator's within 1e-5 relative
  and its gradients within 1e-4 of each tensor's largest gradient in
  float32; in float64 both within 1e-10;
* torch.optim.AdamW on the evaluator's gradients gives the parameters and
  moments of the runtime's AdamW (step-1 checkpoint, read back unsharded);
* torch_train.py runs from the step-0 checkpoint, from init specs and
  resumes from the step-1 checkpoint with its AdamW state;
* the plan tool's plan.json has the init specs and AdamW hyper-parameters
  graph_reference assumed, and torch_train --plan starts from those weights;
* torch's own float32 and float64 runs agree to 1e-5 over 20 steps.

Runs on Debian's /usr/bin/python3 with python3-torch 1.13.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

# argv: graph_reference, torch_train.py (whose directory holds the reference
# modules: under Bazel, the runfiles tree) and, optionally, the plan tool.
HERE = os.path.dirname(os.path.abspath(sys.argv[2] if len(sys.argv) > 2
                                       else __file__))
sys.path.insert(0, HERE)
import loom_formats  # noqa: E402
import loom_torch_model  # noqa: E402
import torch_train  # noqa: E402

LOSS_TOLERANCE = 1e-5
GRAD_TOLERANCE = 1e-4
# In float64 torch and the evaluator agree to rounding, and only a tight
# bound catches small semantic slips: exact instead of tanh GELU moves the
# tiny GPT-2's loss by under 1e-5 relative at these weights.
FLOAT64_TOLERANCE = 1e-10
ADAMW_TOLERANCE = 1e-6

CASES = [
    # (spec, batch, seq, max_grad_norm of the 20-step run): the zoo's tiny
    # defaults (Llama with GQA 4/2) and tiny GPT-2, at a seq below max_seq
    # so positions do not cover wpe; GPT-2's run clips every step.
    ("tiny", 4, 12, 0.0),
    ("tiny:family=gpt2", 4, 12, 0.05),
]
DRIFT_STEPS = 20
DRIFT_TOLERANCE = 1e-5
INIT_SEED = 3
DATA_SEED = 5


class Failure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def relative_tensor_error(got: np.ndarray, want: np.ndarray,
                          floor: float = 1e-12) -> float:
    """max |got - want| over the tensor's largest |want|, at least `floor`."""
    scale = max(float(np.abs(want).max()), floor)
    return float(np.abs(got - want).max()) / scale


def torch_loss_and_grads(config, params, ids, labels, dtype):
    model = loom_torch_model.build_model(config).to(dtype)
    loom_torch_model.load_named_state(model, params, dtype)
    loss = model.loss(torch.as_tensor(ids), torch.as_tensor(labels))
    loss.backward()
    grads = {n: p.grad.double().numpy() for n, p in model.named_parameters()}
    return float(loss), grads


def run_train(train_py: str, *flags: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    subprocess.run(["/usr/bin/python3", train_py, *flags, f"--out={out}",
                    "--quiet"], check=True)
    with open(out) as f:
        return json.load(f)


def check_plan(plan_bin: str, spec: str, batch: int, seq: int, ref: dict,
               out: str, train_py: str, common: list, loss0: float) -> str:
    """The planner's own plan.json (1 device) must give the init specs and
    AdamW hyper-parameters graph_reference and torch_train assume, and
    torch_train --plan must start from the same weights."""
    plan_dir = os.path.join(out, "plan")
    planned = subprocess.run(
        [plan_bin, f"--model={spec}", f"--batch={batch}", f"--seq={seq}",
         "--mesh=1", "--axes=fsdp", "--device=cpu", "--devices-per-host=1",
         f"--seed={INIT_SEED}", f"--out={plan_dir}"],
        capture_output=True, text=True)
    check(planned.returncode == 0, f"{spec}: plan failed:\n{planned.stderr}")
    plan_path = os.path.join(plan_dir, "plan.json")
    with open(plan_path) as f:
        plan = json.load(f)
    specs = loom_formats.init_specs_from_plan(plan)
    for p in ref["params"]:
        want = (loom_formats.InitSpec.from_json(p["init"]), p["shape"])
        check(specs.get(p["name"]) == want, f"{spec}: plan.json's init of "
              f"{p['name']} is {specs.get(p['name'])}, graph_reference used "
              f"{want}")
    check(len(specs) == len(ref["params"]), f"{spec}: plan.json has "
          f"{len(specs)} parameters, the graph {len(ref['params'])}")
    hp = torch_train.adamw_hyperparameters(
        argparse.Namespace(**{k: None for k in torch_train.ADAMW_DEFAULTS}),
        plan)
    want_hp = ref["adamw"]
    check(hp == dict(lr=want_hp["lr"], beta1=want_hp["betas"][0],
                     beta2=want_hp["betas"][1], eps=want_hp["eps"],
                     weight_decay=want_hp["weight_decay"]),
          f"{spec}: plan.json's AdamW {hp} is not the runtime default "
          f"{want_hp}")
    from_plan = run_train(train_py, *common, f"--plan={plan_path}",
                          "--steps=1")
    check(from_plan["losses"][0] == loss0, f"{spec}: torch_train --plan "
          f"starts at loss {from_plan['losses'][0]}, the checkpoint {loss0}")
    return (f"plan.json: {len(specs)} init specs and the AdamW attrs match; "
            "torch_train --plan starts from the same weights")


def check_case(helper: str, plan_bin: str, spec: str, batch: int, seq: int,
               max_grad_norm: float, work: str) -> list:
    out = os.path.join(work, spec.replace(":", "_").replace("=", "_"))
    subprocess.run([helper, f"--model={spec}", f"--batch={batch}",
                    f"--seq={seq}", f"--out={out}", f"--init-seed={INIT_SEED}",
                    f"--data-seed={DATA_SEED}"], check=True)
    with open(os.path.join(out, "reference.json")) as f:
        ref = json.load(f)
    config = loom_torch_model.config_from_spec(spec)
    rows = []

    # Data: the determinism rule in Python against runtime/data.
    feed = loom_formats.TokenFeed(ref["tokens"], config.vocab, seq, batch,
                                  DATA_SEED)
    for b in ref["batches"]:
        ids, labels = feed.batch_at(b["step"])
        check(ids.reshape(-1).tolist() == b["ids"] and
              labels.reshape(-1).tolist() == b["labels"],
              f"{spec}: the Python feed's step {b['step']} batch differs "
              "from runtime/data's")
    synthetic = loom_formats.TokenFeed("synthetic", config.vocab, seq, batch,
                                       DATA_SEED)
    for b in ref["synthetic_batches"]:
        ids, labels = synthetic.batch_at(b["step"])
        check(ids.reshape(-1).tolist() == b["ids"] and
              labels.reshape(-1).tolist() == b["labels"],
              f"{spec}: the Python synthetic feed's step {b['step']} batch "
              "differs from runtime/data's")
    ids0, labels0 = feed.batch_at(0)

    # Names and order: the torch model's parameters are the graph's.
    model = loom_torch_model.build_model(config)
    names = [n for n, _ in model.named_parameters()]
    check(names == [p["name"] for p in ref["params"]],
          f"{spec}: torch parameter names/order differ from the graph's:\n"
          f"{names}\nvs\n{[p['name'] for p in ref['params']]}")

    # Checkpoint (1 rank) and init: Python Philox against runtime/init.
    ck0 = loom_formats.load_checkpoint(ref["checkpoint"], 0)
    check(ck0.step == 0 and ck0.world_size == 1 and ck0.data_step() == 0 and
          ck0.optimizer_step() == 0, f"{spec}: step-0 checkpoint header")
    params0 = ck0.params()
    check(sorted(params0) == sorted(names), f"{spec}: checkpoint tensors")
    worst_init, inexact = 0.0, 0
    for stream, p in enumerate(ref["params"]):
        spec_json = p["init"]
        mirrored = torch_train.init_spec_for(p["name"], INIT_SEED, stream)
        check(loom_formats.InitSpec.from_json(spec_json) == mirrored,
              f"{spec}: init spec of {p['name']}: C++ {spec_json} vs Python "
              f"{mirrored}")
        mine = loom_formats.init_tensor(mirrored, p["shape"])
        theirs = params0[p["name"]]
        inexact += int(np.count_nonzero(mine != theirs))
        worst_init = max(worst_init, float(np.abs(mine - theirs).max()))
    check(worst_init <= 1e-7, f"{spec}: Python init differs from runtime/init "
          f"by {worst_init:.3g}")
    rows.append(f"init: {inexact} of {sum(v.size for v in params0.values())} "
                f"elements not bit-identical (max diff {worst_init:.2g})")

    # Loss and gradients against the float64 evaluator.
    want_loss = ref["loss"]
    want_grads = {n: np.asarray(g).reshape(params0[n].shape)
                  for n, g in ref["grads"].items()}
    # GPT-2's key bias gets an exactly zero gradient (softmax ignores a
    # shift shared by all keys), so each tensor's scale is floored at 1e-3 of
    # the model's largest gradient.
    floor = 1e-3 * max(float(np.abs(g).max()) for g in want_grads.values())
    for dtype in (torch.float64, torch.float32):
        loss, grads = torch_loss_and_grads(config, params0, ids0, labels0,
                                           dtype)
        loss_error = abs(loss - want_loss) / abs(want_loss)
        grad_errors = {n: relative_tensor_error(grads[n], want_grads[n], floor)
                       for n in names}
        worst = max(grad_errors, key=grad_errors.get)
        rows.append(f"{str(dtype)[6:]}: loss {loss:.10f} vs evaluator "
                    f"{want_loss:.10f}, relative {loss_error:.2e}; worst grad "
                    f"{grad_errors[worst]:.2e} ({worst})")
        exact = dtype == torch.float64
        check(loss_error <= (FLOAT64_TOLERANCE if exact else LOSS_TOLERANCE),
              f"{spec} {dtype}: loss {loss!r} vs evaluator {want_loss!r}, "
              f"relative {loss_error:.3g}")
        check(grad_errors[worst] <= (FLOAT64_TOLERANCE if exact
                                     else GRAD_TOLERANCE),
              f"{spec} {dtype}: gradient of {worst} off by "
              f"{grad_errors[worst]:.3g} of its largest element")

    # AdamW: torch on the evaluator's gradients vs the runtime's step,
    # read back from the 3-rank step-1 checkpoint ('latest').
    ck1 = loom_formats.load_checkpoint(ref["checkpoint"])
    check(ck1.step == 1 and ck1.world_size == 3 and ck1.optimizer_step() == 1
          and ck1.data_step() == 1, f"{spec}: step-1 checkpoint header")
    hp = ref["adamw"]
    model = loom_torch_model.build_model(config)
    loom_torch_model.load_named_state(model, params0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp["lr"],
                                  betas=tuple(hp["betas"]), eps=hp["eps"],
                                  weight_decay=hp["weight_decay"],
                                  foreach=False)
    named = dict(model.named_parameters())
    for n, p in named.items():
        p.grad = torch.as_tensor(want_grads[n], dtype=torch.float32)
    optimizer.step()
    worst_adamw = 0.0
    for n, p in named.items():
        state = optimizer.state[p]
        moments = ck1.adam_state(n)
        check(moments is not None, f"{spec}: step 1 has no moments of {n}")
        for got, want in ((p.detach().numpy(), ck1.tensors[n]),
                          (state["exp_avg"].numpy(), moments[0]),
                          (state["exp_avg_sq"].numpy(), moments[1])):
            worst_adamw = max(worst_adamw, relative_tensor_error(got, want))
    rows.append(f"AdamW step: worst relative difference {worst_adamw:.2e}")
    check(worst_adamw <= ADAMW_TOLERANCE, f"{spec}: torch AdamW vs runtime "
          f"AdamW differ by {worst_adamw:.3g}")

    # The CLI: from the step-0 checkpoint, from init specs, and resumed.
    train_py = os.path.join(HERE, "torch_train.py")
    common = [f"--model={spec}", f"--batch={batch}", f"--seq={seq}",
              f"--data={ref['tokens']}", f"--data-seed={DATA_SEED}"]
    full = run_train(train_py, *common, f"--checkpoint={ref['checkpoint']}",
                     "--checkpoint-step=0", "--steps=3")
    check(set(full) >= {"losses", "model", "steps"} and full["steps"] == 3 and
          len(full["losses"]) == 3 and full["model"] == spec,
          f"{spec}: torch_train output {full}")
    cli_error = abs(full["losses"][0] - want_loss) / abs(want_loss)
    check(cli_error <= LOSS_TOLERANCE, f"{spec}: torch_train step 0 loss "
          f"{full['losses'][0]} vs evaluator {want_loss}")
    fresh = run_train(train_py, *common, f"--init-seed={INIT_SEED}",
                      "--steps=1")
    check(abs(fresh["losses"][0] - full["losses"][0]) <= 1e-6 * want_loss,
          f"{spec}: init from specs gives loss {fresh['losses'][0]}, the "
          f"checkpoint {full['losses'][0]}")
    resumed = run_train(train_py, *common, f"--checkpoint={ref['checkpoint']}",
                        "--steps=2")
    check(resumed["first_data_step"] == 1, f"{spec}: resumed at data step "
          f"{resumed['first_data_step']}, not 1")
    resume_errors = [abs(a - b) / abs(b) for a, b in
                     zip(resumed["losses"], full["losses"][1:])]
    rows.append(f"torch_train: losses {['%.6f' % x for x in full['losses']]}"
                f"; resumed from step 1 {['%.6f' % x for x in resumed['losses']]}"
                f" (relative {max(resume_errors):.1e})")
    check(max(resume_errors) <= GRAD_TOLERANCE,
          f"{spec}: resuming from the step-1 checkpoint gives "
          f"{resumed['losses']}, the uninterrupted run {full['losses'][1:]}")

    if plan_bin:
        rows.append(check_plan(plan_bin, spec, batch, seq, ref, out, train_py,
                               common, full["losses"][0]))

    # Stability: torch's own float32 and float64 runs drift apart far less
    # than the 1e-4 the runtime is held to.
    runs = {}
    for dtype in (torch.float32, torch.float64):
        trainer = torch_train.Trainer(config, dtype, torch_train.ADAMW_DEFAULTS,
                                      max_grad_norm)
        trainer.load_state(params0, None)
        runs[dtype] = [trainer.train_step(*feed.batch_at(k))
                       for k in range(DRIFT_STEPS)]
    drift = max(abs(a[0] - b[0]) / abs(b[0]) for a, b in
                zip(runs[torch.float32], runs[torch.float64]))
    clipped = sum(norm > max_grad_norm for _, norm in runs[torch.float64]) \
        if max_grad_norm else 0
    first, last = runs[torch.float64][0][0], runs[torch.float64][-1][0]
    rows.append(f"{DRIFT_STEPS} steps (clip {max_grad_norm}, {clipped} "
                f"clipped): loss {first:.4f} -> {last:.4f}; float32 vs "
                f"float64 worst relative {drift:.2e}")
    check(drift <= DRIFT_TOLERANCE, f"{spec}: torch float32 and float64 "
          f"losses drift apart by {drift:.3g} in {DRIFT_STEPS} steps")
    return rows


def main() -> int:
    helper = os.path.abspath(sys.argv[1])
    plan_bin = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else ""
    work = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    failed = False
    for spec, batch, seq, max_grad_norm in CASES:
        try:
            rows = check_case(helper, plan_bin, spec, batch, seq,
                              max_grad_norm, work)
            print(f"ok: {spec} batch {batch} seq {seq}")
        except Failure as error:
            print(f"FAIL: {error}")
            failed = True
            continue
        for row in rows:
            print(f"  {row}")
    print(f"torch {torch.__version__}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
