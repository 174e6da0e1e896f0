"""Runs a fixed set of collective calls through torch.distributed (gloo) on
WORLD_SIZE local processes and writes every rank's inputs and outputs to a
JSON file, which torch_compare then replays through loom's ProcessGroup and
compares bit for bit.

Usage: torch_reference.py WORLD_SIZE OUT.json

Where torch 1.13's gloo backend lacks a call (reduce_scatter, all_to_all with
lists, all_gather_into_tensor, AVG, bf16 and bool tensors, uneven all_gather,
send/recv_object_list), the reference is the fallback PyTorch users write:
all_reduce then take the chunk, one all_to_all_single over the
concatenation, all_gather then cat, SUM then divide, the arithmetic in f32
(bf16) or u8 (bool) on values for which that is exact, pad-gather-trim, and
sizes then pickles. Each case records which way it was computed.
"""

import json
import os
import pickle
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i8": torch.int8,
    "u8": torch.uint8,
    "i32": torch.int32,
    "i64": torch.int64,
    "bool": torch.bool,
}
FLOATS = ("f32", "f64", "f16", "bf16")
OPS = {
    "sum": dist.ReduceOp.SUM,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}
# bool reductions in u8 arithmetic: or, and, and, or, and the bitwise ones.
BOOL_AS_U8 = {"sum": "max", "product": "min", "min": "min", "max": "max",
              "band": "band", "bor": "bor", "bxor": "bxor"}


NAMES = {dtype: name for name, dtype in DTYPES.items()}


def encode(t):
    t = t.contiguous()
    dtype = NAMES[t.dtype]
    if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
        raw = t.view(torch.int16).numpy().tobytes()
    elif t.dtype == torch.bool:
        raw = t.to(torch.uint8).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    return {"dtype": dtype, "shape": list(t.shape), "hex": raw.hex()}


def values(dtype, rank, count, case, exact):
    """Deterministic inputs. `exact`: small integers, so that any order of
    summation (and f32 arithmetic standing in for bf16) gives the same
    result; otherwise random normals that only the same algorithm in the
    same order reproduces bit for bit."""
    gen = torch.Generator().manual_seed(1000 * case + rank)
    if dtype == "bool":
        return torch.randint(0, 2, (count,), generator=gen).to(torch.bool)
    if dtype == "u8":
        return torch.randint(0, 4, (count,), generator=gen).to(torch.uint8)
    if dtype in FLOATS and not exact:
        return torch.randn(count, generator=gen).to(DTYPES[dtype])
    return torch.randint(-3, 4, (count,), generator=gen).to(DTYPES[dtype])


def reduce_in_place(t, op, group=None):
    """all_reduce with `op` the way a torch 1.13 gloo user gets it."""
    name = t.dtype
    if op == "avg":
        reduce_in_place(t, "sum", group)
        size = dist.get_world_size(group)
        if t.is_floating_point():
            t.div_(size)
        else:
            t.copy_(torch.div(t, size, rounding_mode="trunc"))
        return
    if name == torch.bfloat16:
        wide = t.to(torch.float32)
        dist.all_reduce(wide, op=OPS[op], group=group)
        t.copy_(wide.to(torch.bfloat16))
        return
    if name == torch.bool:
        wide = t.to(torch.uint8)
        dist.all_reduce(wide, op=OPS[BOOL_AS_U8[op]], group=group)
        t.copy_(wide.to(torch.bool))
        return
    dist.all_reduce(t, op=OPS[op], group=group)


def via(dtype, op):
    if op == "avg":
        return "sum then divide"
    if dtype == "bf16":
        return "f32 all_reduce"
    if dtype == "bool":
        return "u8 all_reduce"
    return "torch"


def run_cases(rank, n):
    cases = []

    def add(name, op, how, inputs, outputs, **params):
        cases.append(dict(name=name, op=op, via=how, inputs=[encode(t) for t in inputs],
                          outputs=None if outputs is None else [encode(t) for t in outputs],
                          **params))

    case = 0
    for dtype in DTYPES:
        for op in list(OPS) + ["avg"]:
            case += 1
            if op in ("band", "bor", "bxor") and dtype in FLOATS:
                continue
            if op == "avg" and dtype == "bool":
                continue
            # Random floats where torch computes natively: the same Gloo ring
            # must give the same bits. Exact values where a stand-in does.
            exact = via(dtype, op) != "torch" or op == "product"
            t = values(dtype, rank, 1001, case, exact)
            x = t.clone()
            reduce_in_place(x, op)
            add(f"all_reduce {op} {dtype}", "all_reduce", via(dtype, op), [t], [x], reduce_op=op)

    for dtype, op in (("f32", "sum"), ("i64", "max"), ("f16", "min"), ("bf16", "sum")):
        case += 1
        root = n - 1
        t = values(dtype, rank, 257, case, exact=dtype != "f32")
        x = t.clone()
        if dtype == "bf16":
            reduce_in_place(x, op)  # reduce's result equals all_reduce's on the root
            how = "f32 all_reduce"
        else:
            dist.reduce(x, dst=root, op=OPS[op])
            how = "torch"
        add(f"reduce {op} {dtype} to {root}", "reduce", how, [t],
            [x] if rank == root else None, root=root, reduce_op=op)

    for dtype in ("f64", "i8", "bool"):
        case += 1
        t = values(dtype, rank, 33, case, exact=False)
        x = t.clone()
        if dtype == "bool":
            wide = x.to(torch.uint8)
            dist.broadcast(wide, src=1)
            x = wide.to(torch.bool)
            how = "u8 broadcast"
        else:
            dist.broadcast(x, src=1)
            how = "torch"
        add(f"broadcast {dtype} from 1", "broadcast", how, [t], [x], root=1)

    case += 1
    t = values("f32", rank, 10, case, exact=False)
    outs = [torch.empty(10) for _ in range(n)]
    dist.all_gather(outs, t)
    add("all_gather f32", "all_gather", "torch", [t], outs)
    add("all_gather_into_tensor f32", "all_gather_into_tensor", "all_gather then cat", [t],
        [torch.cat(outs)])

    case += 1
    t = values("i32", rank, 7, case, exact=False)
    outs = [torch.empty(7, dtype=torch.int32) for _ in range(n)] if rank == 0 else None
    dist.gather(t, gather_list=outs, dst=0)
    add("gather i32 to 0", "gather", "torch", [t], outs, root=0)

    case += 1
    ins = [values("u8", 100 + r, 5, case, exact=False) for r in range(n)]
    out = torch.empty(5, dtype=torch.uint8)
    dist.scatter(out, scatter_list=ins if rank == 1 else None, src=1)
    add("scatter u8 from 1", "scatter", "torch", ins if rank == 1 else [], [out], root=1)

    for dtype, op in (("f32", "sum"), ("i64", "max"), ("bf16", "sum"), ("f64", "avg"),
                      ("bool", "max")):
        case += 1
        t = values(dtype, rank, 6 * n, case, exact=True)
        x = t.clone()
        reduce_in_place(x, op)
        chunk = x[6 * rank:6 * (rank + 1)].clone()
        add(f"reduce_scatter {op} {dtype}", "reduce_scatter", "all_reduce then chunk",
            list(t.chunk(n)), [chunk], reduce_op=op)
        add(f"reduce_scatter_tensor {op} {dtype}", "reduce_scatter_tensor",
            "all_reduce then chunk", [t], [chunk], reduce_op=op)

    case += 1
    t = values("f32", rank, 3 * n, case, exact=False).reshape(n, 3)
    out = torch.empty(n, 3)
    dist.all_to_all_single(out, t)
    add("all_to_all_single f32 even", "all_to_all_single", "torch", [t], [out],
        input_splits=[], output_splits=[])

    # Rank s sends (s + d) % 3 + 1 rows of 2 to rank d.
    case += 1
    in_splits = [(rank + d) % 3 + 1 for d in range(n)]
    out_splits = [(s + rank) % 3 + 1 for s in range(n)]
    t = values("i64", rank, 2 * sum(in_splits), case, exact=False).reshape(-1, 2)
    out = torch.empty(sum(out_splits), 2, dtype=torch.int64)
    dist.all_to_all_single(out, t, out_splits, in_splits)
    add("all_to_all_single i64 uneven", "all_to_all_single", "torch", [t], [out],
        input_splits=in_splits, output_splits=out_splits)
    pieces = list(t.split(in_splits))
    add("all_to_all i64 uneven", "all_to_all", "all_to_all_single", pieces,
        list(out.split(out_splits)))

    if n == 4:
        # torch.distributed.all_to_all_single's documented example.
        doc_inputs = [[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15, 16, 17, 18],
                      [20, 21, 22, 23, 24], [30, 31, 32, 33, 34, 35, 36]]
        doc_in_splits = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]]
        doc_out_splits = [[2, 3, 2, 2], [2, 2, 1, 2], [1, 2, 1, 2], [1, 2, 1, 1]]
        doc_outputs = [[0, 1, 10, 11, 12, 20, 21, 30, 31], [2, 3, 13, 14, 22, 32, 33],
                       [4, 15, 16, 23, 34, 35], [5, 17, 18, 24, 36]]
        t = torch.tensor(doc_inputs[rank])
        out = torch.empty(len(doc_outputs[rank]), dtype=torch.int64)
        dist.all_to_all_single(out, t, doc_out_splits[rank], doc_in_splits[rank])
        assert out.tolist() == doc_outputs[rank], (rank, out.tolist())
        add("all_to_all_single documented example", "all_to_all_single", "torch", [t], [out],
            input_splits=doc_in_splits[rank], output_splits=doc_out_splits[rank])

    # The subgroup example: MAX over ranks [0, 2]. Every rank creates it.
    case += 1
    group = dist.new_group([0, 2])
    t = values("f32", rank, 16, case, exact=False)
    if rank in (0, 2):
        x = t.clone()
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=group)
        add("all_reduce max over ranks [0, 2]", "subgroup_all_reduce", "torch", [t], [x],
            ranks=[0, 2], reduce_op="max")
    else:
        add("all_reduce max over ranks [0, 2]", "subgroup_all_reduce", "torch", [], None,
            ranks=[0, 2], reduce_op="max")

    case += 1
    t = values("f64", rank, 9, case, exact=False)
    got = torch.empty(9, dtype=torch.float64)
    sent = dist.isend(t, (rank + 1) % n)
    dist.recv(got, (rank - 1) % n)
    sent.wait()
    add("send/recv f64 ring", "send_recv_ring", "torch", [t], [got])

    # all_gather with outputs of different sizes: rank r gives 2 + r values.
    # torch 1.13's gloo all_gather wants equal sizes, so the reference is the
    # usual workaround: pad to the longest, all_gather, trim.
    case += 1
    t = values("f32", rank, 2 + rank, case, exact=False)
    longest = 2 + n - 1
    padded = torch.zeros(longest)
    padded[:t.numel()] = t
    gathered = [torch.empty(longest) for _ in range(n)]
    dist.all_gather(gathered, padded)
    add("all_gather f32 uneven", "all_gather", "pad, all_gather, trim", [t],
        [g[:2 + r].clone() for r, g in enumerate(gathered)])

    # recv from any source: ranks 1.. send to rank 0, which records each
    # sender (in sender order; arrival order varies).
    case += 1
    if rank == 0:
        got = []
        for _ in range(n - 1):
            x = torch.empty(3, dtype=torch.int64)
            sender = dist.recv(x)
            got.append((sender, x))
        got.sort(key=lambda pair: pair[0])
        add("recv from any source i64", "recv_any_source", "torch", [], [x for _, x in got],
            senders=[s for s, _ in got])
    else:
        t = values("i64", rank, 3, case, exact=False)
        dist.send(t, 0)
        add("recv from any source i64", "recv_any_source", "torch", [t], None, senders=[])
    dist.barrier()

    # The object collectives, on strings of different lengths (torch pickles
    # them, loom sends their bytes; the objects that arrive must be equal).
    def text(r, salt):
        return f"rank {r} salt {salt}: " + "xyz" * (r + salt) + "\u00e9"

    objects = [text(1, i) for i in range(3)] if rank == 1 else [None] * 3
    dist.broadcast_object_list(objects, src=1)
    add("broadcast_object_list from 1", "broadcast_object_list", "torch", [], [],
        objects_in=[text(1, i) for i in range(3)] if rank == 1 else ["", "", ""],
        objects_out=objects, root=1)

    gathered = [None] * n
    dist.all_gather_object(gathered, text(rank, 4))
    add("all_gather_object", "all_gather_object", "torch", [], [],
        objects_in=[text(rank, 4)], objects_out=gathered)

    gathered = [None] * n if rank == 0 else None
    dist.gather_object(text(rank, 5), gathered, dst=0)
    add("gather_object to 0", "gather_object", "torch", [], [], objects_in=[text(rank, 5)],
        objects_out=gathered, root=0)

    received = [None]
    sources = [text(r, 6) for r in range(n)] if rank == 2 else None
    dist.scatter_object_list(received, sources, src=2)
    add("scatter_object_list from 2", "scatter_object_list", "torch", [], [],
        objects_in=sources or [], objects_out=received, root=2)

    # torch 1.13 has no send/recv_object_list; the reference is what torch 2
    # does: the pickles' sizes, then the pickles.
    how = "sizes then pickles (torch 2's send_object_list)"
    if rank == 0:
        sent = [text(0, 7), text(0, 8)]
        pickles = [torch.frombuffer(bytearray(pickle.dumps(o)), dtype=torch.uint8) for o in sent]
        dist.send(torch.tensor([p.numel() for p in pickles], dtype=torch.int64), 1)
        dist.send(torch.cat(pickles), 1)
        add("send/recv_object_list 0 to 1", "send_recv_object_list", how, [], [],
            objects_in=sent, objects_out=None)
    elif rank == 1:
        sizes = torch.empty(2, dtype=torch.int64)
        dist.recv(sizes, 0)
        data = torch.empty(int(sizes.sum()), dtype=torch.uint8)
        dist.recv(data, 0)
        received, offset = [], 0
        for size in sizes.tolist():
            received.append(pickle.loads(data[offset:offset + size].numpy().tobytes()))
            offset += size
        add("send/recv_object_list 0 to 1", "send_recv_object_list", how, [], [],
            objects_in=[], objects_out=received)
    else:
        add("send/recv_object_list 0 to 1", "send_recv_object_list", how, [], [],
            objects_in=[], objects_out=None)
    return cases


def worker(rank, n, store_path, out_dir):
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank,
                            world_size=n)
    cases = run_cases(rank, n)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(cases, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(n, os.path.join(tmp, "store"), tmp), nprocs=n)
        ranks = []
        for r in range(n):
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    names = [c["name"] for c in ranks[0]]
    assert all([c["name"] for c in cases] == names for cases in ranks)
    merged = []
    for i, name in enumerate(names):
        merged.append({"name": name, "ranks": [ranks[r][i] for r in range(n)]})
    with open(out, "w") as f:
        json.dump({"world_size": n, "torch": torch.__version__, "cases": merged}, f)
    print(f"wrote {len(merged)} cases for {n} ranks to {out}")


if __name__ == "__main__":
    main()
