#!/usr/bin/env bash
# Runs comm-bench (gloo backend) and torch_comm_bench.py (PyTorch 1.13's
# gloo) on the same ranks of this machine and prints one side-by-side table
# of bus bandwidth per op and size. Runs are interleaved (ours, torch, ours,
# torch, ... per op, ROUNDS times) and each cell keeps its best round, so a
# burst of load from other jobs does not bias one side.
#   tools/comm_bench/compare_with_torch.sh [NPROC] [extra comm-bench/torch flags]
# Environment: ROUNDS (2), OPS ("all_reduce all_gather reduce_scatter"),
# SWEEP ("-b 4K -e 64M -f 2 -n 5 -w 1 -c 1"), CHECKS (off), PYTHON
# (/usr/bin/python3, which has torch), BAZEL_BIN (bazel info -c opt bazel-bin).
# Build first:
#   bazel build -c opt //tools:comm-bench //tools:launch
set -euo pipefail
cd "$(dirname "$0")/../.."
nproc="${1:-4}"
bin="${BAZEL_BIN:-$(bazel info -c opt bazel-bin 2>/dev/null)}"
launch="$bin/tools/launch/launch"
bench="$bin/tools/comm_bench/comm-bench"
python="${PYTHON:-/usr/bin/python3}"
rounds="${ROUNDS:-2}"
read -r -a ops <<<"${OPS:-all_reduce all_gather reduce_scatter}"
read -r -a sweep <<<"${SWEEP:--b 4K -e 64M -f 2 -n 5 -w 1 -c 1}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

for round in $(seq "$rounds"); do
  for op in "${ops[@]}"; do
    "$launch" --nproc="$nproc" --no_prefix -- "$bench" "${sweep[@]}" --op="$op" \
      --checks="${CHECKS:-off}" >"$out/ours.$op.$round"
    "$launch" --nproc="$nproc" --no_prefix -- "$python" tools/comm_bench/torch_comm_bench.py \
      "${sweep[@]}" --op="$op" >"$out/torch.$op.$round"
  done
done

echo "# comm-bench vs torch $("$python" -c 'import torch; print(torch.__version__)') gloo," \
     "$nproc ranks, best busbw (GB/s) of $rounds interleaved rounds, ${sweep[*]}"
head -1 "$out/ours.${ops[0]}.1"
python3 - "$out" "$rounds" "${ops[@]}" <<'PY'
import sys
out, rounds, ops = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def best(side, op):
    """size -> [out-of-place busbw, in-place busbw, #wrong total], best of the rounds."""
    rows = {}
    for r in range(1, rounds + 1):
        for line in open("%s/%s.%s.%d" % (out, side, op, r)):
            f = line.split()
            if not f or line.startswith("#"):
                continue
            cell = rows.setdefault(int(f[0]), [None, None, 0])
            for i, col in ((0, 7), (1, 11)):
                if f[col] != "n/a":
                    cell[i] = max(cell[i] or 0.0, float(f[col]))
            cell[2] += sum(int(f[c]) for c in (8, 12) if f[c] not in ("n/a", "N/A"))
    return rows

def fmt(x):
    return "%8s" % ("n/a" if x is None else "%.4f" % x)

def ratio(a, b):
    return "%6s" % ("n/a" if a is None or b is None or b == 0 else "%.2f" % (a / b))

for op in ops:
    ours, torch = best("ours", op), best("torch", op)
    print("#\n# %s  (busbw GB/s; ratio = ours / torch)" % op)
    print("# %10s  %8s  %8s  %6s  %8s  %8s  %6s  %s" % ("size (B)", "ours oop", "torch oop",
          "ratio", "ours ip", "torch ip", "ratio", "#wrong"))
    for size in sorted(ours):
        o, t = ours[size], torch.get(size, [None, None, 0])
        print("  %10d  %8s  %8s  %6s  %8s  %8s  %6s  %d" % (size, fmt(o[0]), fmt(t[0]),
              ratio(o[0], t[0]), fmt(o[1]), fmt(t[1]), ratio(o[1], t[1]), o[2] + t[2]))
PY
