#!/usr/bin/python3
"""Compares five clipped AdamW steps of adamw_trace (the runtime's AdamW on
two shards, the clip norm summed over them) with torch.optim.AdamW after
torch.nn.utils.clip_grad_norm_ on the same data, in float32, to 1e-6
relative. Runs on Debian's /usr/bin/python3, which has python3-torch."""
import math
import subprocess
import sys

import torch


def expected():
    params = [torch.tensor([math.sin(0.1 * i + k) for i in range(n)],
                           dtype=torch.float32, requires_grad=True)
              for k, n in ((0, 7), (1, 5))]
    optimizer = torch.optim.AdamW(params, lr=0.05, betas=(0.9, 0.95),
                                  eps=1e-8, weight_decay=0.1)
    rows = []
    for step in range(1, 6):
        for k, p in enumerate(params):
            p.grad = torch.tensor(
                [0.3 * step * math.cos(0.37 * i + 1.3 * step + k)
                 for i in range(p.numel())], dtype=torch.float32)
        total = float(torch.nn.utils.clip_grad_norm_(params, max_norm=1.0))
        optimizer.step()
        coefficient = min(1.0, 1.0 / (total + 1e-6))
        rows.append([step, coefficient] +
                    [float(x) for p in params for x in p.detach()])
    return rows


def main():
    output = subprocess.run([sys.argv[1]], check=True, capture_output=True,
                            text=True).stdout
    actual = [[float(x) for x in line.split()] for line in output.splitlines()]
    want = expected()
    if len(actual) != len(want):
        sys.exit(f"FAIL: {len(actual)} steps printed, expected {len(want)}")
    clipped = sum(1 for row in want if row[1] < 1.0)
    if not 0 < clipped < len(want):
        sys.exit(f"FAIL: the data should clip some steps, not {clipped} of 5")
    worst = 0.0
    for got, ref in zip(actual, want):
        if len(got) != len(ref):
            sys.exit(f"FAIL: step {ref[0]}: {len(got)} values, want {len(ref)}")
        for index, (a, b) in enumerate(zip(got[1:], ref[1:])):
            error = abs(a - b) / max(abs(b), 1e-3)
            worst = max(worst, error)
            if error > 1e-6:
                sys.exit(f"FAIL: step {ref[0]} value {index}: "
                         f"runtime {a!r} vs torch {b!r}")
    print(f"ok: 5 AdamW steps ({clipped} clipped) match torch "
          f"{torch.__version__}; worst relative error {worst:.2e}")


if __name__ == "__main__":
    main()
