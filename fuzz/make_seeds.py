#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora under fuzz/corpus/ (run from the repo root).

The seeds are committed; rerun this after a protocol or grammar change and
commit the difference. Each file is named by the SHA-1 of its content, as
libFuzzer names the inputs it keeps.

  python3 fuzz/make_seeds.py
"""
import hashlib
import os
import re
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(corpus, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(ROOT, corpus)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as out:
        out.write(data)


# --- TCPStore wire protocol (docs/comm_store.md) -----------------------------

def u8(v): return struct.pack("<B", v)
def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)
def i64(v): return struct.pack("<q", v)
def field(b): return u32(len(b)) + b
def frame(body): return u32(len(body)) + body
def keys(*ks): return u32(len(ks)) + b"".join(field(k) for k in ks)


HELLO = frame(u8(1) + u32(0x4D4F4F4C) + u16(1) + field(b"fuzz"))


def send(client, data):
    """One fuzzer command: client `client` sends `data` (split if long)."""
    out = b""
    for at in range(0, max(len(data), 1), 0xFFFF):
        chunk = data[at:at + 0xFFFF]
        out += u8(client) + u16(len(chunk)) + chunk
    return out


def hangup(client):
    return u8(0x80 | client)


def tcp_store_seeds():
    requests = {
        "set": frame(u8(2) + field(b"k") + field(b"v")),
        "get": frame(u8(3) + field(b"k") + i64(0)),
        "get_block": frame(u8(3) + field(b"missing") + i64(-1)),
        "add": frame(u8(4) + field(b"n") + i64(5)),
        "add_bad": frame(u8(4) + field(b"k") + i64(1)),
        "cas": frame(u8(5) + field(b"k") + field(b"v") + field(b"w")),
        "cas_missing": frame(u8(5) + field(b"x") + field(b"") + field(b"y")),
        "delete": frame(u8(6) + field(b"k")),
        "check": frame(u8(7) + keys(b"k", b"n")),
        "numkeys": frame(u8(8)),
        "wait": frame(u8(9) + keys(b"k", b"late") + i64(1)),
        "append": frame(u8(10) + field(b"k") + field(b"more")),
        "multiget": frame(u8(11) + keys(b"k", b"n") + i64(0)),
        "multiset": frame(u8(12) + u32(2) + field(b"a") + field(b"1") + field(b"b") + field(b"2")),
        "join": frame(u8(13) + i64(2) + i64(10)),
        "join_count": frame(u8(13) + i64(0) + i64(-1)),
    }
    everything = b"".join(requests.values())
    write("tcp_store_server", send(0, HELLO + everything))
    for name, request in requests.items():
        write("tcp_store_server", send(0, HELLO + requests["set"] + request))
    # A get parked on one connection, woken by a set on another.
    write("tcp_store_server",
          send(0, HELLO + requests["get_block"]) + send(1, HELLO) +
          send(1, frame(u8(2) + field(b"missing") + field(b"now"))))
    # Two joiners meeting, then hanging up.
    write("tcp_store_server",
          send(0, HELLO + requests["join"]) + send(1, HELLO + requests["join"]) +
          hangup(0) + hangup(1))
    # A frame sent a byte at a time.
    trickle = b"".join(send(2, bytes([b])) for b in HELLO + requests["multiset"])
    write("tcp_store_server", trickle)
    # Refusals: wrong token, other version, not a hello, oversize, unknown op,
    # trailing bytes, a length past the end, a huge count.
    write("tcp_store_server", send(0, frame(u8(1) + u32(0x4D4F4F4C) + u16(1) + field(b"nope"))))
    write("tcp_store_server", send(0, frame(u8(1) + u32(0x4D4F4F4C) + u16(9) + field(b"fuzz"))))
    write("tcp_store_server", send(0, b"GET / HTTP/1.1\r\n\r\n"))
    write("tcp_store_server", send(0, HELLO + u32(0x7FFFFFFF)))
    write("tcp_store_server", send(0, HELLO + frame(u8(200))))
    write("tcp_store_server", send(0, HELLO + frame(u8(8) + b"x")))
    write("tcp_store_server", send(0, HELLO + frame(u8(2) + field(b"k") + u32(1000))))
    write("tcp_store_server", send(0, HELLO + frame(u8(7) + u32(0xFFFFFFFF))))
    # Values near the 64 KiB limit of the fuzz server, and an append over it.
    big = b"v" * 60000
    write("tcp_store_server",
          send(0, HELLO + frame(u8(2) + field(b"big") + field(big))) +
          send(0, frame(u8(10) + field(b"big") + field(big))) +
          send(0, frame(u8(11) + keys(b"big", b"big") + i64(0))))


# --- mesh specs ------------------------------------------------------------------

def mesh_seeds():
    specs = ["dp=2,tp=4", "2x4", "8", "fsdp=8", "dp=2, tp=2, pp=2", "1", "4x4x4",
             "dp=0", "x=2,x=2", "2x", "=2", "dp=", "dp=-1", "9999999999", "a b=2",
             "dp=2,,tp=2", "16777216", "16777217", "4096x4096x2", " dp = 2 "]
    for spec in specs:
        write("mesh_spec", b"\x00" + spec.encode())
        write("mesh_spec", b"\x01" + spec.encode())
    for mesh, axes in [("8x8", "fsdp,tp"), ("8", "fsdp"), ("2x2x2", "dp,fsdp,tp"),
                       ("fsdp=8,tp=8", ""), ("8x8", "fsdp"), ("0x8", "dp,tp"),
                       ("8x", "dp,tp"), ("8x8", "dp,dp"), ("8x8", "1a,tp"), ("", "")]:
        write("mesh_spec", b"\x02" + (mesh + "\n" + axes).encode())


# --- model graphs ----------------------------------------------------------------

def mlir_seeds(repo):
    sources = ["tools/plan/testdata/mlp_lm.mlir", "tools/plan/testdata/bad_linear.mlir"]
    for folder in ["tests/planner/nn", "tests/planner/dist"]:
        for name in sorted(os.listdir(os.path.join(repo, folder))):
            if name.endswith(".mlir"):
                sources.append(os.path.join(folder, name))
    for source in sources:
        with open(os.path.join(repo, source)) as f:
            text = f.read()
        for case in text.split("// -----"):
            # RUN and CHECK lines mean nothing to the parser; drop them.
            lines = [l for l in case.splitlines() if not re.match(r"\s*// (RUN|CHECK)", l)]
            body = "\n".join(lines).strip()
            if body:
                write("mlir_model", body + "\n")


# --- safetensors headers (docs/runtime_hf.md) -------------------------------------

def safetensors_seeds():
    """Each seed: the data buffer's size (u64) and the header's JSON."""
    def seed(data_bytes, header):
        write("safetensors_header", struct.pack("<Q", data_bytes) + header.encode())
    seed(24, '{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}')
    seed(36, '{"__metadata__":{"format":"pt"},'
             '"a":{"dtype":"BF16","shape":[2,2,2],"data_offsets":[0,16]},'
             '"b":{"dtype":"F16","shape":[10],"data_offsets":[16,36]}}')
    seed(4, '{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},'
            '"e":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]}}')
    seed(16, '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
             '"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}')
    seed(8, '{"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}')


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tcp_store_seeds()
    mesh_seeds()
    mlir_seeds(repo)
    safetensors_seeds()
    for corpus in sorted(os.listdir(ROOT)):
        print(corpus, len(os.listdir(os.path.join(ROOT, corpus))), "seeds")


if __name__ == "__main__":
    main()
