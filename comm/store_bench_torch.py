"""The PyTorch half of //comm:store_bench: times torch.distributed.TCPStore on
the same workloads as the loom half (store_bench.cc), one run per command, so
that store_bench can interleave the two and both see the same machine.

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch.
Reads commands from stdin, one per line, and answers each with one line:
  rendezvous N        N clients connect, add 1 to a counter, and wait until
                      the last one sets "go"; timed from the start signal
                      until every client is through. Answers seconds.
  throughput OP C K   C clients each make K calls of OP (set, get or add;
                      64-byte values, own key for set/get, one shared counter
                      for add); timed from the start signal until the last
                      client is done. Answers calls per second in total.
Each client is a forked process; the server runs in this one. The first line
out is "version <torch version>"; a failed run answers "error <why>".
"""

import argparse
import datetime
import os
import select
import sys
import time

import torch
import torch.distributed as dist

HOST = "127.0.0.1"
VALUE = b"v" * 64


def read_exactly(fd, count, deadline):
    """Reads `count` bytes from pipe `fd`, failing at the deadline."""
    data = b""
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"only {len(data)} of {count} clients reported")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, count - len(data))
            if not chunk:
                raise RuntimeError("a client died before reporting")
            data += chunk
    return data


def spawn(count, body):
    """Forks `count` clients that wait for a start byte, run body(i, port) and
    report one byte; returns (pids, start pipes, done pipe, ready pipe)."""
    done_r, done_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pids, starts = [], []
    for i in range(count):
        start_r, start_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(start_w)
                port = int.from_bytes(read_exactly(start_r, 4, time.monotonic() + 300), "little")
                body(i, port, lambda: os.write(ready_w, b"r"),
                     lambda: read_exactly(start_r, 1, time.monotonic() + 300))
                os.write(done_w, b"d")
            except BaseException as error:  # report, never hang the parent
                print(f"client {i}: {error}", file=sys.stderr)
                code = 1
            os._exit(code)
        os.close(start_r)
        pids.append(pid)
        starts.append(start_w)
    os.close(done_w)
    os.close(ready_w)
    return pids, starts, done_r, ready_r


def reap(pids, fds):
    for fd in fds:
        os.close(fd)
    for pid in pids:
        os.waitpid(pid, 0)


def server(timeout):
    return dist.TCPStore(HOST, 0, None, True, timeout, wait_for_workers=False)


def client(port, timeout):
    return dist.TCPStore(HOST, port, None, False, timeout, wait_for_workers=False)


def rendezvous_once(n, timeout, limit):
    def body(i, port, ready, wait_start):
        store = client(port, timeout)
        if store.add("arrived", 1) == n:
            store.set("go", "1")
        store.wait(["go"])

    # Clients are forked before the server exists, so that they inherit no
    # server state, and are handed the port as their start signal.
    pids, starts, done_r, ready_r = spawn(n, body)
    master = server(timeout)
    port = master.port.to_bytes(4, "little")
    start = time.monotonic()
    for fd in starts:
        os.write(fd, port)
    read_exactly(done_r, n, start + limit)
    elapsed = time.monotonic() - start
    reap(pids, starts + [done_r, ready_r])
    return elapsed


def throughput_once(op, clients, ops, timeout, limit):
    def body(i, port, ready, wait_start):
        store = client(port, timeout)
        key = f"key/{i}"
        store.set(key, VALUE)
        ready()
        wait_start()
        if op == "set":
            for _ in range(ops):
                store.set(key, VALUE)
        elif op == "get":
            for _ in range(ops):
                store.get(key)
        else:
            for _ in range(ops):
                store.add("counter", 1)

    pids, starts, done_r, ready_r = spawn(clients, body)
    master = server(timeout)
    port = master.port.to_bytes(4, "little")
    for fd in starts:
        os.write(fd, port)
    read_exactly(ready_r, clients, time.monotonic() + limit)
    start = time.monotonic()
    for fd in starts:
        os.write(fd, b"g")
    read_exactly(done_r, clients, start + limit)
    elapsed = time.monotonic() - start
    reap(pids, starts + [done_r, ready_r])
    return clients * ops / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout_s", type=float, default=120)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=args.timeout_s)
    print(f"version {torch.__version__}", flush=True)
    for line in sys.stdin:
        words = line.split()
        try:
            if words[:1] == ["rendezvous"] and len(words) == 2:
                answer = f"{rendezvous_once(int(words[1]), timeout, args.timeout_s):.6f}"
            elif words[:1] == ["throughput"] and len(words) == 4:
                answer = f"{throughput_once(words[1], int(words[2]), int(words[3]), timeout, args.timeout_s):.1f}"
            else:
                answer = f"error unknown command {line.strip()!r}"
        except Exception as error:  # answer, so that store_bench never waits
            answer = f"error {error}"
        print(answer, flush=True)


if __name__ == "__main__":
    main()
