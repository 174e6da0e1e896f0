#!/usr/bin/env bash
# Loom against PyTorch FSDP2 on the same Llama shapes, batches and AdamW, on
# this machine's CPUs (issue #22, item 4). Builds //tools:plan and
# //tools:train with -c opt, plans each config (--device=cpu), trains it with
# `train --nproc`, and runs tools/bench/fsdp2_llama.py (FSDP2: fully_shard on
# each block and on the root, gloo) in a virtual environment with PyTorch
# from PyPI that this script creates outside the build. Loom and torch
# alternate within every round, the order flipping from round to round;
# every process gets one BLAS thread (OPENBLAS_NUM_THREADS=1,
# torch.set_num_threads(1)). Prints a markdown table of the median step
# over every measured step of every round, the per-round medians, and
# FSDP2 / Loom (above 1: Loom is faster). Not part of the build or of CI.
#
#   tools/bench/fsdp2_side_by_side.sh [--configs=tiny,64m] [--meshes=1,2,4]
#       [--rounds=2] [--warmup=2] [--steps=6] [--out=FILE]
#
# LOOM_BENCH_VENV (default ~/.cache/loom_bench_venv) is the environment;
# LOOM_BENCH_TORCH (default `torch`) is the pip requirement it installs.
# docs/fsdp2_side_by_side.md records runs.
set -euo pipefail

configs=tiny,64m meshes=1,2,4 rounds=2 warmup=2 steps=6 out=""
for arg in "$@"; do
  case "$arg" in
    --configs=*) configs="${arg#*=}" ;;
    --meshes=*) meshes="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --warmup=*) warmup="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fsdp2_side_by_side.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$rounds" "$steps"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "--rounds and --steps must be positive integers" >&2; exit 2; }
done
[[ "$warmup" =~ ^[0-9]+$ ]] || { echo "--warmup must be a non-negative integer" >&2; exit 2; }

repo="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${LOOM_BENCH_VENV:-$HOME/.cache/loom_bench_venv}"
torch_req="${LOOM_BENCH_TORCH:-torch}"

# The Llama shapes of the issue: name -> zoo spec; then per (config, ranks)
# the global batch.
declare -A spec=(
  [tiny]="layers=4,hidden=256,heads=8,kv_heads=4,ffn=768,vocab=2048,seq=128"
  [64m]="layers=4,hidden=1024,heads=16,kv_heads=8,ffn=2816,vocab=8192,seq=256"
)
declare -A batch=([tiny:1]=4 [tiny:2]=8 [tiny:4]=8 [64m:1]=2 [64m:2]=4 [64m:4]=4)

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "creating $venv with $torch_req from PyPI (a few GB, once)" >&2
  python3 -m venv "$venv" || {
    echo "python3 -m venv failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "$torch_req"
fi
torch_version="$("$venv/bin/python" -c "import torch; print(torch.__version__)")"

cd "$repo"
bazel build -c opt //tools:plan //tools:train >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
plan_tool="$bin/tools/plan/plan" train="$bin/tools/train/train"

work="$(mktemp -d /tmp/loom-fsdp2.XXXXXXXX)"
trap 'rm -rf "$work"' EXIT
cores="$(nproc --all)" cpu="$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

runs=()  # "config ranks"
for c in ${configs//,/ }; do
  [[ -n "${spec[$c]:-}" ]] || { echo "unknown config '$c' (tiny, 64m)" >&2; exit 2; }
  for r in ${meshes//,/ }; do
    [[ -n "${batch[$c:$r]:-}" ]] || { echo "no batch for $c on $r ranks (1, 2, 4)" >&2; exit 2; }
    s="${spec[$c]}" seq="${spec[$c]##*seq=}"
    "$plan_tool" --model="tiny:$s" --mesh="fsdp=$r" --batch="${batch[$c:$r]}" --seq="$seq" \
        --device=cpu --devices-per-host=4 --out="$work/plan_${c}_$r" > "$work/plan_${c}_$r.log" 2>&1 \
      || { cat "$work/plan_${c}_$r.log" >&2; exit 1; }
    runs+=("$c $r")
  done
done

results="$work/results.jsonl"
# What else ran during a run, in cores: the machine's busy time (/proc/stat)
# less this shell's waited-for children's (the run's own processes), over
# the wall time. The load average cannot say it: it counts the ranks.
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
own_ticks() { awk '{print $16 + $17}' "/proc/$$/stat"; }
begin_run() { run_busy=$(busy_ticks) run_own=$(own_ticks) run_start=$(date +%s.%N); }
others() {
  local busy own now
  busy=$(busy_ticks) own=$(own_ticks) now=$(date +%s.%N)
  awk -v b=$((busy - run_busy)) -v o=$((own - run_own)) -v start="$run_start" -v now="$now" \
      -v hz="$(getconf CLK_TCK)" 'BEGIN{v = (b - o) / hz / (now - start); printf "%.2f", v < 0 ? 0 : v}'
}
loom() {  # config ranks round
  local c="$1" r="$2" k="$3" log="$work/loom_${1}_${2}_$3"
  begin_run
  "$train" --plan="$work/plan_${c}_$r/plan.json" --steps=$((warmup + steps)) --nproc="$r" \
      --progress=false --losses_out="$log.json" > "$log.txt" 2>&1 || { cat "$log.txt" >&2; exit 1; }
  echo "{\"config\": \"$c\", \"ranks\": $r, \"round\": $k, \"side\": \"loom\", \"file\": \"$log.json\", \"others\": $(others)}" >> "$results"
}
torch_run() {  # config ranks round variant
  local c="$1" r="$2" k="$3" v="$4" log="$work/torch_${1}_${2}_${3}_$4" s="${spec[$1]}"
  local args=(--nproc="$r" --batch="${batch[$c:$r]}" --steps=$((warmup + steps)) --variant="$v")
  local kv
  for kv in ${s//,/ }; do args+=("--${kv%%=*}=${kv#*=}"); done
  begin_run
  "$venv/bin/python" "$repo/tools/bench/fsdp2_llama.py" "${args[@]//kv_heads/kv-heads}" \
      --out="$log.json" > "$log.txt" 2>&1 || { cat "$log.txt" >&2; exit 1; }
  echo "{\"config\": \"$c\", \"ranks\": $r, \"round\": $k, \"side\": \"$v\", \"file\": \"$log.json\", \"others\": $(others)}" >> "$results"
}

loads=()
for ((k = 1; k <= rounds; ++k)); do
  loads+=("round $k start: $(uptime | sed 's/.*load average/load average/')")
  for run in "${runs[@]}"; do
    read -r c r <<< "$run"
    echo "round $k: $c, $r rank(s)" >&2
    if ((k % 2)); then
      loom "$c" "$r" "$k"; torch_run "$c" "$r" "$k" plain; torch_run "$c" "$r" "$k" prefetch-fused
    else
      torch_run "$c" "$r" "$k" prefetch-fused; torch_run "$c" "$r" "$k" plain; loom "$c" "$r" "$k"
    fi
  done
done
loads+=("end: $(uptime | sed 's/.*load average/load average/')")

report="$(python3 - "$results" "$warmup" "$steps" "$rounds" "$torch_version" \
    "$cores $cpu" "$(git -C "$repo" rev-parse --short HEAD)" "${loads[@]}" <<'PY'
import collections, json, statistics, sys
results, warmup, steps, rounds, torch_version, cores, commit = sys.argv[1:8]
loads = sys.argv[8:]
warmup = int(warmup)
times = collections.defaultdict(list)    # (config, ranks, side) -> every measured step
rounds_ = collections.defaultdict(list)  # the same -> each round's median
others = collections.defaultdict(float)  # (config, ranks) -> most cores other work took
for line in open(results):
    r = json.loads(line)
    step_seconds = json.load(open(r["file"]))["step_seconds"][warmup:]
    key = (r["config"], r["ranks"], r["side"])
    times[key] += [s * 1e3 for s in step_seconds]
    rounds_[key].append(statistics.median(step_seconds) * 1e3)
    others[key[:2]] = max(others[key[:2]], r["others"])
print(f"Loom {commit} (-c opt) against PyTorch {torch_version} (PyPI) on {cores.split()[0]} cores "
      f"({' '.join(cores.split()[1:])}), "
      f"{rounds} rounds interleaved, {warmup} warm-up + {steps} measured steps per run, "
      "one BLAS thread per rank; ms per step, median over every measured step of every round "
      "(each round's median in brackets); FSDP2 / Loom above 1: Loom is faster.\n")
print("| config | ranks | batch | Loom | torch plain | torch prefetch + fused AdamW | plain / Loom | best / Loom | other work, cores |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
batches = {"tiny": {1: 4, 2: 8, 4: 8}, "64m": {1: 2, 2: 4, 4: 4}}
seen = []
for (c, n, _) in times:
    if (c, n) not in seen:
        seen.append((c, n))
def cell(key):
    each = " / ".join(f"{m:.0f}" for m in rounds_[key])
    return statistics.median(times[key]), f"{statistics.median(times[key]):.1f} ({each})"
for c, n in seen:
    loom, loom_cell = cell((c, n, "loom"))
    plain, plain_cell = cell((c, n, "plain"))
    fused, fused_cell = cell((c, n, "prefetch-fused"))
    what = "torch, no FSDP" if n == 1 else f"fsdp {n}"
    print(f"| {c} | {n} ({what}) | {batches[c][n]} | {loom_cell} | {plain_cell} | {fused_cell} | "
          f"{plain / loom:.2f} | {min(plain, fused) / loom:.2f} | {others[(c, n)]:.2f} |")
print("\nAt 1 rank torch runs without FSDP, so its second variant is fused AdamW alone. "
      "best: the faster torch variant. Other work: the most CPU that processes other than "
      "the benchmark's took during any run of the row, in cores (of " + cores.split()[0] + "); "
      "a row with more than a few tenths is noisy, and worth running again.\n")
for load in loads:
    print(f"- {load}")
PY
)"
echo "$report"
[[ -z "$out" ]] || echo "$report" > "$out"
