"""PyTorch's half of comm-bench: the same sweep through torch.distributed's
gloo backend, printing the same columns, so the two can be compared on one
machine (compare_with_torch.sh runs both). One process per rank, started by
our launcher or torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):

  launch --nproc=4 -- /usr/bin/python3 torch_comm_bench.py -b 4K -e 64M --op=all_reduce

Written for Debian's torch 1.13, whose gloo backend has neither
all_gather_into_tensor nor reduce_scatter:
  all_gather      list all_gather into views of one output tensor (gloo has
                  no _all_gather_base); in place: the input is the own view.
  reduce_scatter  the fallback users write: all_reduce the whole input, then
                  copy this rank's chunk out. Out of place it first clones
                  the input (which must stay intact); in place it reduces the
                  input itself. Each call waits before copying its chunk, so
                  these rows are always blocking.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}
DTYPES = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64}
ELEMENT_SIZE = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def input_values(rank, count, dtype):
    """Rank r's element i is 1 + (r + i) % 3, as in comm-bench."""
    return (1 + (torch.arange(count, dtype=torch.int64) + rank) % 3).to(dtype)


class Op:
    """One collective: its buffers for a size, its call and its expected output."""

    def __init__(self, name, rank, n, dtype):
        self.name, self.rank, self.n, self.dtype = name, rank, n, dtype

    def layout(self, elements):
        """(input count, output count, reported count) or None if too small."""
        if self.name == "all_reduce":
            return (elements, elements, elements) if elements else None
        c = elements // self.n
        if c == 0:
            return None
        if self.name == "all_gather":
            return (c, c * self.n, c)
        return (c * self.n, c, c)

    def buffers(self, layout, in_place):
        """Fresh (input, output) views; in place they share one buffer."""
        in_count, out_count, _ = layout
        if self.name == "all_reduce":
            t = input_values(self.rank, in_count, self.dtype)
            return t, t
        if self.name == "all_gather":
            out = torch.full((out_count,), -7, dtype=self.dtype)
            if in_place:
                inp = out[self.rank * in_count:(self.rank + 1) * in_count]
                inp.copy_(input_values(self.rank, in_count, self.dtype))
                return inp, out
            return input_values(self.rank, in_count, self.dtype), out
        out = torch.full((out_count,), -7, dtype=self.dtype)
        inp = input_values(self.rank, in_count, self.dtype)
        if in_place:
            out = inp[self.rank * out_count:(self.rank + 1) * out_count]
        return inp, out

    def issue(self, inp, out, in_place):
        """Starts one call; returns a handle to wait on, or None when done."""
        if self.name == "all_reduce":
            return dist.all_reduce(out, async_op=True)
        if self.name == "all_gather":
            return dist.all_gather(list(out.chunk(self.n)), inp, async_op=True)
        work = inp if in_place else inp.clone()
        dist.all_reduce(work)
        out.copy_(work.chunk(self.n)[self.rank])
        return None

    def expected(self, out_count):
        n, r = self.n, self.rank
        if self.name == "all_reduce":
            return sum(input_values(q, out_count, torch.float64) for q in range(n))
        if self.name == "all_gather":
            c = out_count // n
            return torch.cat([input_values(q, c, torch.float64) for q in range(n)])
        full = sum(input_values(q, out_count * n, torch.float64) for q in range(n))
        return full[r * out_count:(r + 1) * out_count]


def run_iters(op, inp, out, in_place, iters):
    handles = [op.issue(inp, out, in_place) for _ in range(iters)]
    for h in handles:
        if h is not None:
            h.wait()


def mean_over_ranks(value, n):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() / n


def measure(op, layout, in_place, nbytes, args, n):
    inp, out = op.buffers(layout, in_place)
    run_iters(op, inp, out, in_place, args.w)
    dist.barrier()
    start = time.perf_counter()
    run_iters(op, inp, out, in_place, args.n)
    local_us = (time.perf_counter() - start) * 1e6 / args.n
    time_us = mean_over_ranks(local_us, n)
    algbw = nbytes / 1e3 / time_us
    wrong = None
    if args.c:
        inp, out = op.buffers(layout, in_place)
        run_iters(op, inp, out, in_place, 1)
        bad = (out.to(torch.float64) - op.expected(layout[1])).abs() > 1e-5
        t = torch.tensor([int(bad.sum().item())], dtype=torch.int64)
        dist.all_reduce(t)
        wrong = t.item()
    return time_us, algbw, algbw * BUS_FACTOR[op.name](n), wrong


def fmt(cell):
    if cell is None:
        return "  %10s  %7s  %7s  %6s" % ("n/a", "n/a", "n/a", "n/a")
    t, a, b, w = cell
    return "  %10.1f  %7.3f  %7.3f  %6s" % (t, a, b, "N/A" if w is None else w)


def sweep(name, args, rank, n):
    op = Op(name, rank, n, DTYPES[args.d])
    es = ELEMENT_SIZE[args.d]
    if rank == 0:
        print("#\n# %s (torch %s gloo)" % (name, torch.__version__))
        print("#%62s%-35s  %s" % ("", "out-of-place", "in-place"))
        print("#%11s  %12s  %6s  %6s  %4s  %10s  %7s  %7s  %6s  %10s  %7s  %7s  %6s" %
              ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
               "time", "algbw", "busbw", "#wrong"))
    wrong_total, busbw = 0, []
    size = parse_bytes(args.b)
    while size <= parse_bytes(args.e):
        layout = op.layout(size // es)
        if layout is not None:
            nbytes = max(layout[0], layout[1]) * es
            cells = []
            for in_place in (False, True):
                if name == "all_reduce" and not in_place:
                    cells.append(None)  # torch's all_reduce works in place only
                    continue
                cell = measure(op, layout, in_place, nbytes, args, n)
                cells.append(cell)
                busbw.append(cell[2])
                wrong_total += cell[3] or 0
            if rank == 0:
                redop = "none" if name == "all_gather" else "sum"
                print(" %11d  %12d  %6s  %6s  %4s%s%s" %
                      (nbytes, layout[2], args.d, redop, -1, fmt(cells[0]), fmt(cells[1])),
                      flush=True)
        size *= args.f
    if rank == 0:
        print("# Out of bounds values : %d %s" % (wrong_total, "OK" if wrong_total == 0 else
                                                  "FAILED"))
        print("# Avg bus bandwidth    : %.4f GB/s" % (sum(busbw) / max(1, len(busbw))),
              flush=True)
    return wrong_total


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-b", default="4K")
    parser.add_argument("-e", default="64M")
    parser.add_argument("-f", type=int, default=2)
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("-w", type=int, default=5)
    parser.add_argument("-c", type=int, default=1)
    parser.add_argument("-d", default="f32", choices=sorted(DTYPES))
    parser.add_argument("--op", default="all_reduce",
                        help="all_reduce, all_gather, reduce_scatter or all")
    args = parser.parse_args()
    ops = list(BUS_FACTOR) if args.op == "all" else [args.op]
    if any(o not in BUS_FACTOR for o in ops):
        sys.exit("--op=%s is not one of %s, all" % (args.op, ", ".join(BUS_FACTOR)))
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    if rank == 0:
        print("# torch_comm_bench: %d ranks, torch %s gloo, sizes %s..%s x%d, -n %d, -w %d per "
              "size, -c %d, -d %s" % (n, torch.__version__, args.b, args.e, args.f, args.n, args.w,
                                      args.c, args.d))
    wrong = sum(sweep(o, args, rank, n) for o in ops)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0 if wrong == 0 else 2)


if __name__ == "__main__":
    main()
