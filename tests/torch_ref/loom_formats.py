"""Loom's on-disk formats and deterministic rules, in numpy, for the PyTorch
reference: the sharded checkpoint (docs/runtime_checkpoint.md), the token
file and the feed's determinism rule (docs/runtime_data.md), and parameter
initialisation by Philox4x32-10 (docs/runtime_kernels.md). Written from the
documents and checked against the C++ code by torch_matches_graph_test; no
loom code is imported.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

# ------------------------------------------------------------ Philox4x32-10

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF
_MASK64 = np.uint64(_MASK)


def philox4x32(counter: Sequence, key: Sequence) -> List[np.ndarray]:
    """Philox4x32-10 (Salmon et al., SC'11) on arrays: counter is four uint32
    arrays (or ints), key two. Returns the four output words as uint64
    arrays holding 32-bit values."""
    c = [np.asarray(x, dtype=np.uint64) & _MASK64 for x in counter]
    k0, k1 = (int(x) & _MASK for x in key)
    for round_index in range(10):
        if round_index:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        p0 = np.uint64(_M0) * c[0]
        p1 = np.uint64(_M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK64
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK64
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
    return c


def _split64(value) -> Tuple[np.ndarray, np.ndarray]:
    value = np.asarray(value, dtype=np.uint64)
    return value & _MASK64, value >> np.uint64(32)


# ------------------------------------------------------ parameter init


@dataclasses.dataclass(frozen=True)
class InitSpec:
    """runtime::init::InitSpec, as plan.json's buffers[].init holds it."""
    kind: str  # "normal", "zeros" or "ones"
    mean: float
    std: float
    seed: int
    stream: int

    def __post_init__(self):
        # The C++ InitSpec holds mean and std as float.
        object.__setattr__(self, "mean", float(np.float32(self.mean)))
        object.__setattr__(self, "std", float(np.float32(self.std)))

    @staticmethod
    def from_json(entry: dict) -> "InitSpec":
        return InitSpec(entry["kind"], float(entry["mean"]),
                        float(entry["std"]), int(entry["seed"]),
                        int(entry["stream"]))


def init_tensor(spec: InitSpec, shape: Sequence[int]) -> np.ndarray:
    """The whole tensor initShard fills: element i (row-major) is
    mean + std * normal(seed, stream, i), normal being Box-Muller in double
    on words 0 and 1 of Philox(counter (i lo, i hi, stream lo, stream hi),
    key (seed lo, seed hi)), rounded to float32; arithmetic after it in
    float32."""
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if spec.kind == "zeros":
        return np.zeros(shape, np.float32)
    if spec.kind == "ones":
        return np.ones(shape, np.float32)
    if spec.kind != "normal":
        raise ValueError(f"unknown init kind '{spec.kind}'")
    lo, hi = _split64(np.arange(count, dtype=np.uint64))
    s_lo, s_hi = _split64(spec.stream)
    words = philox4x32([lo, hi, s_lo, s_hi],
                       [spec.seed & _MASK, spec.seed >> 32])
    u1 = ((words[0] >> np.uint64(8)).astype(np.float64) + 1.0) / 16777216.0
    u2 = (words[1] >> np.uint64(8)).astype(np.float64) / 16777216.0
    normal = (np.sqrt(-2.0 * np.log(u1)) *
              np.cos(2.0 * math.pi * u2)).astype(np.float32)
    value = np.float32(spec.mean) + np.float32(spec.std) * normal
    return value.astype(np.float32).reshape(shape)


def init_specs_from_plan(plan: dict) -> Dict[str, Tuple[InitSpec, List[int]]]:
    """name -> (init spec, global shape) of every parameter of plan.json."""
    specs = {}
    for buffer in plan["buffers"]:
        if buffer["role"] == "param" and buffer.get("init"):
            specs[buffer["name"]] = (InitSpec.from_json(buffer["init"]),
                                     list(buffer["global_shape"]))
    return specs


# ----------------------------------------------------------- checkpoints

_CKPT_MAGIC = b"LOOMCKPT"
_CKPT_HEADER = struct.Struct("<8sIIIIQ")  # magic, version, rank, world, n, step
_DTYPES = {1: ("f32", np.dtype("<f4")), 2: ("i32", np.dtype("<i4"))}


def _crc32c_table() -> List[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected 0x82F63B78, init and xor 0xFFFFFFFF)."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class CheckpointError(Exception):
    pass


@dataclasses.dataclass
class _Record:
    name: str
    dtype: str
    shape: Tuple[int, ...]
    offsets: Tuple[int, ...]
    sizes: Tuple[int, ...]
    data: np.ndarray


def _read_rank_file(path: str, verify: bool) -> Tuple[dict, List[_Record]]:
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < _CKPT_HEADER.size:
        raise CheckpointError(f"{path}: shorter than the header")
    magic, version, rank, world, count, step = _CKPT_HEADER.unpack_from(blob)
    if magic != _CKPT_MAGIC or version != 1:
        raise CheckpointError(f"{path}: not a Loom rank file of version 1")
    pos = _CKPT_HEADER.size
    records = []
    for _ in range(count):
        start = pos
        (name_len,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        name = blob[pos:pos + name_len].decode()
        pos += name_len
        code, ndim = struct.unpack_from("<II", blob, pos)
        pos += 8
        if code not in _DTYPES or not 1 <= ndim <= 16:
            raise CheckpointError(f"{path}: tensor '{name}' has dtype code "
                                  f"{code}, rank {ndim}")
        dims = struct.unpack_from(f"<{3 * ndim}q", blob, pos)
        pos += 24 * ndim
        shape, offsets, sizes = dims[:ndim], dims[ndim:2 * ndim], dims[2 * ndim:]
        (nbytes,) = struct.unpack_from("<Q", blob, pos)
        pos += 8
        dtype_name, dtype = _DTYPES[code]
        if nbytes != int(np.prod(sizes)) * 4 or pos + nbytes + 4 > len(blob):
            raise CheckpointError(f"{path}: tensor '{name}' has {nbytes} data "
                                  f"bytes for box sizes {sizes}, or is cut")
        data = np.frombuffer(blob, dtype, int(np.prod(sizes)), pos)
        pos += nbytes
        (stored,) = struct.unpack_from("<I", blob, pos)
        if verify and crc32c(blob[start:pos]) != stored:
            raise CheckpointError(f"{path}: checksum mismatch for '{name}'")
        pos += 4
        records.append(_Record(name, dtype_name, tuple(shape), tuple(offsets),
                               tuple(sizes), data.reshape(sizes)))
    if pos != len(blob):
        raise CheckpointError(f"{path}: {len(blob) - pos} trailing bytes")
    header = dict(rank=rank, world_size=world, step=step)
    return header, records


@dataclasses.dataclass
class Checkpoint:
    """A whole checkpoint: every tensor assembled to its global shape."""
    directory: str
    step: int
    world_size: int
    mesh: str
    metadata: dict
    tensors: Dict[str, np.ndarray]

    def params(self) -> Dict[str, np.ndarray]:
        """Tensors whose names carry no `kind:` prefix (exp_avg:, grad:, ...),
        which are the model's parameters."""
        return {k: v for k, v in self.tensors.items() if ":" not in
                k.split("[")[0]}

    def adam_state(self, name: str) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """(exp_avg, exp_avg_sq) of parameter `name`, when saved (plan.json's
        buffer names `exp_avg:NAME`, `exp_avg_sq:NAME`)."""
        m = self.tensors.get(f"exp_avg:{name}")
        v = self.tensors.get(f"exp_avg_sq:{name}")
        return None if m is None or v is None else (m, v)

    def optimizer_step(self) -> int:
        """AdamW's step count t (updates done so far): metadata
        `optimizer_step`, else the checkpoint step when moments are saved,
        else 0."""
        if "optimizer_step" in self.metadata:
            return int(self.metadata["optimizer_step"])
        has_moments = any(k.startswith("exp_avg:") for k in self.tensors)
        return self.step if has_moments else 0

    def data_step(self) -> int:
        """The data-feed step the next training step reads: metadata
        `data_step`, else the checkpoint step."""
        return int(self.metadata.get("data_step", self.step))


def checkpoint_step_dir(directory: str, step: Optional[int] = None) -> str:
    """DIR/step_<step>, or the step DIR/latest names; a step directory
    itself (holding manifest.json) is returned as it is."""
    if step is None and os.path.exists(os.path.join(directory,
                                                    "manifest.json")):
        return directory
    if step is None:
        latest = os.path.join(directory, "latest")
        if not os.path.exists(latest):
            raise CheckpointError(f"{directory}: no 'latest' file and no "
                                  "manifest.json; is it a Loom checkpoint?")
        with open(latest) as f:
            name = f.read().strip()
        return os.path.join(directory, name)
    return os.path.join(directory, f"step_{step}")


def load_checkpoint(directory: str, step: Optional[int] = None,
                    verify: bool = True) -> Checkpoint:
    """Reads manifest.json and every rank_<r>.bin of a committed step and
    reassembles each tensor unsharded (padding is never stored, so the
    boxes tile the tensor). Checks magic, version, CRCs, the manifest against
    the records, and that the boxes cover each tensor exactly once."""
    step_dir = checkpoint_step_dir(directory, step)
    manifest_path = os.path.join(step_dir, "manifest.json")
    if not os.path.exists(manifest_path):
        raise CheckpointError(f"{step_dir}: no manifest.json; the step never "
                              "committed")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("format") != "loom-checkpoint" or \
            manifest.get("version") != 1:
        raise CheckpointError(f"{manifest_path}: not a version 1 manifest")
    records: Dict[Tuple[str, int], _Record] = {}
    for entry in manifest["files"]:
        header, recs = _read_rank_file(os.path.join(step_dir, entry["file"]),
                                       verify)
        if header["rank"] != entry["rank"] or \
                header["world_size"] != manifest["world_size"] or \
                header["step"] != manifest["step"]:
            raise CheckpointError(f"{entry['file']}: header {header} does not "
                                  "match the manifest")
        for rec in recs:
            records[(rec.name, entry["rank"])] = rec
    tensors = {}
    for t in manifest["tensors"]:
        name, shape = t["name"], tuple(t["shape"])
        dtype = np.float32 if t["dtype"] == "f32" else np.int32
        out = np.zeros(shape, dtype)
        covered = np.zeros(shape, np.int8)
        for shard in t["shards"]:
            rec = records.get((name, shard["rank"]))
            if rec is None or rec.shape != shape or \
                    rec.offsets != tuple(shard["offsets"]) or \
                    rec.sizes != tuple(shard["sizes"]) or \
                    rec.dtype != t["dtype"]:
                raise CheckpointError(f"tensor '{name}' of rank "
                                      f"{shard['rank']} disagrees with the "
                                      "manifest")
            box = tuple(slice(o, o + s) for o, s in
                        zip(rec.offsets, rec.sizes))
            out[box] = rec.data
            covered[box] += 1
        if not np.all(covered == 1):
            raise CheckpointError(f"tensor '{name}': boxes do not cover it "
                                  "exactly once")
        tensors[name] = out
    return Checkpoint(step_dir, int(manifest["step"]),
                      int(manifest["world_size"]), manifest.get("mesh", ""),
                      manifest.get("metadata") or {}, tensors)


# ------------------------------------------------------------ token data

_TOKS_HEADER = struct.Struct("<8sIIQ")  # magic, version, dtype, count


def read_token_file(path: str) -> np.ndarray:
    """All tokens of a Loom token file (u16 or i32) as int64."""
    with open(path, "rb") as f:
        blob = f.read()
    magic, version, code, count = _TOKS_HEADER.unpack_from(blob)
    if magic != b"LOOMTOKS" or version != 1 or code not in (1, 2):
        raise ValueError(f"{path}: not a Loom token file of version 1 "
                         f"(magic {magic!r}, version {version}, dtype {code})")
    dtype = np.dtype("<u2") if code == 1 else np.dtype("<i4")
    if len(blob) != _TOKS_HEADER.size + count * dtype.itemsize:
        raise ValueError(f"{path}: size does not match {count} tokens")
    return np.frombuffer(blob, dtype, count, _TOKS_HEADER.size).astype(np.int64)


def write_token_file(path: str, tokens: Sequence[int], dtype: str = "i32"):
    """Writes tokens in the token file format (dtype "u16" or "i32")."""
    np_dtype = np.dtype("<u2") if dtype == "u16" else np.dtype("<i4")
    data = np.asarray(tokens, np.int64)
    with open(path, "wb") as f:
        f.write(_TOKS_HEADER.pack(b"LOOMTOKS", 1, 1 if dtype == "u16" else 2,
                                  len(data)))
        f.write(data.astype(np_dtype).tobytes())


class TokenFeed:
    """The data feed's determinism rule: row `row` of step `step`'s global
    batch is a window of seq + 1 tokens, ids its first seq, labels its last
    seq. From a token file the window starts at (w0 | w1 << 32) mod
    (count - seq), w = Philox(counter (row lo, row hi, step lo, step hi),
    key (seed lo, seed hi)); synthetic token (step, row, p) is
    (w0 * vocab) >> 32 of Philox(counter (p, row, step lo, step hi))."""

    def __init__(self, spec: str, vocab: int, seq: int, global_batch: int,
                 seed: int = 0):
        self.vocab, self.seq, self.batch, self.seed = vocab, seq, global_batch, seed
        self.tokens = None if spec == "synthetic" else read_token_file(spec)
        if self.tokens is not None and len(self.tokens) < seq + 1:
            raise ValueError(f"{spec}: {len(self.tokens)} tokens, fewer than "
                             f"one window of {seq + 1}")

    def _key(self):
        return [self.seed & _MASK, self.seed >> 32]

    def windows(self, step: int) -> np.ndarray:
        """[global_batch, seq + 1] windows of `step`."""
        rows = np.arange(self.batch, dtype=np.uint64)
        s_lo, s_hi = _split64(step)
        if self.tokens is None:
            p = np.arange(self.seq + 1, dtype=np.uint64)
            r, pp = np.meshgrid(rows, p, indexing="ij")
            w0 = philox4x32([pp, r, np.full_like(r, s_lo), np.full_like(r, s_hi)],
                            self._key())[0]
            return ((w0 * np.uint64(self.vocab)) >> np.uint64(32)).astype(np.int64)
        r_lo, r_hi = _split64(rows)
        w = philox4x32([r_lo, r_hi, np.full_like(rows, s_lo),
                        np.full_like(rows, s_hi)], self._key())
        windows = len(self.tokens) - self.seq
        out = []
        for w0, w1 in zip(w[0].tolist(), w[1].tolist()):
            start = ((w1 << 32) | w0) % windows
            out.append(self.tokens[start:start + self.seq + 1])
        result = np.stack(out)
        if result.min() < 0 or result.max() >= self.vocab:
            raise ValueError(f"step {step}: a token lies outside [0, "
                             f"{self.vocab}); the file is for another vocab")
        return result

    def batch_at(self, step: int) -> Tuple[np.ndarray, np.ndarray]:
        """(ids, labels), each [global_batch, seq] int64, of `step`."""
        w = self.windows(step)
        return w[:, :-1], w[:, 1:]
