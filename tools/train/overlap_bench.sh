#!/usr/bin/env bash
# What prefetch and async communication buy: one plan trained on 4 local
# ranks (gloo), once as planned (all-gathers prefetched one unit ahead,
# reduce-scatters overlapped with the next unit's backward) and once with
# every collective waited right after it is issued. Prints a markdown table:
# median step time and the communication compute did not hide (from the
# measured trace). docs/runtime.md records a run.
#   bazel run -c opt //tools/train:overlap_bench [-- MODEL MESH BATCH SEQ STEPS]
set -eu
plan_tool="$1" train="$2"; shift 2
model="${1:-tiny:layers=4,hidden=256,heads=8,kv_heads=4,ffn=768,vocab=2048,seq=128}"
mesh="${2:-fsdp=4}" batch="${3:-8}" seq="${4:-128}" steps="${5:-12}"
work="$(mktemp -d /tmp/loom-overlap.XXXXXXXX)"
trap 'rm -rf "$work"' EXIT
"$plan_tool" --model="$model" --mesh="$mesh" --batch="$batch" --seq="$seq" --device=cpu \
    --devices-per-host=4 --out="$work/plan" > /dev/null
nproc=$(/usr/bin/python3 -c "import json; print(eval('*'.join(str(s) for s in json.load(open('$work/plan/plan.json'))['mesh']['shape'])))")
for mode in true false; do
  OPENBLAS_NUM_THREADS=1 "$train" --plan="$work/plan/plan.json" --steps="$steps" --nproc="$nproc" \
      --overlap=$mode --comm_checks=off --trace="$work/trace_$mode.json" \
      --losses_out="$work/losses_$mode.json" \
      --progress=false > "$work/log_$mode.txt" 2>&1 || { cat "$work/log_$mode.txt"; exit 1; }
done
/usr/bin/python3 - "$work" "$model" "$mesh" "$batch" "$seq" "$steps" "$nproc" <<'PY'
import json, sys
work, model, mesh, batch, seq, steps, nproc = sys.argv[1:]
print(f"# {model}, mesh {mesh}, batch {batch} x seq {seq}, {steps} steps on {nproc} local ranks (gloo)")
print("| schedule | median step ms | comm ms/step | exposed comm ms/step | exposed share | loss at the end |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
rows = {}
for mode, name in (("true", "planned (prefetch 1, async)"), ("false", "every collective waited at once")):
    losses = json.load(open(f"{work}/losses_{mode}.json"))
    summary = json.load(open(f"{work}/trace_{mode}.json"))["loomSummary"]
    ranks = summary["ranks"]
    comm = sum(r["comm_ms"] for r in ranks) / len(ranks) / int(steps)
    exposed = sum(r["exposed_comm_ms"] for r in ranks) / len(ranks) / int(steps)
    step_ms = losses["median_step_seconds"] * 1e3
    rows[mode] = step_ms
    print(f"| {name} | {step_ms:.1f} | {comm:.1f} | {exposed:.1f} | {exposed / step_ms:.0%} | {losses['losses'][-1]:.6f} |")
print(f"\nspeed-up from overlap: {rows['false'] / rows['true']:.2f}x")
PY
