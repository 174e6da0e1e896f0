#!/usr/bin/env bash
# End-to-end check of the plan command line: zoo models, Hugging Face
# config.json files and .mlir files print a summary (and the graph), bad
# input exits 2 with a message that names the problem and, for IR, its
# location.
set -uo pipefail
tool="$1"
testdata="$(dirname "$0")/testdata"
hf_testdata="$(dirname "$0")/../../planner/models/testdata"
failures=0
expect() {  # expect NAME EXIT_CODE PATTERN -- ARGS...
  local name="$1" want_code="$2" pattern="$3"; shift 4
  local out code
  out=$("$tool" "$@" 2>&1); code=$?
  if [[ $code -ne $want_code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $code (want $want_code), output:"; echo "$out" | head -40
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
expect gpt2-summary 0 'parameters: 124,439,808 ' -- --model=gpt2
expect llama-405b-blocks 0 'blocks: .*\(126 x 3,187,703,808\)' -- --model=llama3-405b --seq=16
expect tiny-graph 0 'func\.func @tiny\(%arg0: tensor<2x8xi32>' -- \
  --model=tiny:layers=2 --seq=8 --batch=2 --emit=graph
expect tiny-graph-names 0 'nn\.name = "layers\.1\.feed_forward\.w2\.weight"' -- \
  --model=tiny:layers=2 --seq=8 --batch=2 --emit=graph
expect tiny-graph-summary 0 '^layers\.1 ' -- --model=tiny:layers=2 --seq=8 --emit=graph
expect bf16 0 'parameters: 106,816 \(106\.8 K, 208\.6 KiB\)' -- --model=tiny --dtype=bf16
expect file 0 'model @mlp_lm: 1 blocks, 7 ops, 16 tokens per step' -- \
  --model="$testdata/mlp_lm.mlir" --emit=graph
expect hf-config 0 'parameters: 494,032,768 ' -- --model="$hf_testdata/qwen2.5-0.5b.config.json"
expect hf-config-plan 0 '^# Plan: .*qwen2\.5-0\.5b\.config\.json' -- \
  --model="$hf_testdata/qwen2.5-0.5b.config.json" --mesh=8 --axes=fsdp --batch=8 --seq=64
expect hf-config-auto 0 '^- priced from the pipeline.s own programs: [0-9]+ placements, [0-9]+ template plans' -- \
  --model="$hf_testdata/gpt2.config.json" --mesh=auto --devices=8 --seq=32 --pin tp=1 \
  --pin prefetch=1 --pin reshard=true --pin bucket-mb=0
expect unknown-model 2 "^plan: unknown model 'gpt5'; known models are gpt2," -- --model=gpt5
expect bad-file 2 'bad_linear\.mlir:7:8: error: .nn\.linear. op input features do not match' -- \
  --model="$testdata/bad_linear.mlir"
expect missing-file 2 "plan: cannot read model file '.*nope\.mlir'" -- --model=nope.mlir
expect bad-emit 2 "plan: --emit='table' is not an output; use plan, graph or summary" -- \
  --model=gpt2 --emit=table
expect bad-flag 2 "plan: .*--memory" -- --model=gpt2 --memory=80
expect plan-needs-mesh 2 'plan: --emit=plan needs --mesh' -- --model=gpt2 --emit=plan
# Planning: the ZeRO-3 volume of Llama 3 8B under fsdp=8, the files --out
# writes, and the refusals.
expect default-plan 0 '\| fsdp \| all_gather \| 66 \| 54,373,150,720 \|' --
expect default-scatter 0 '\| fsdp \| reduce_scatter \| 33 \| 28,105,914,368 \|' --
expect default-dtypes 0 '\| fsdp \| reduce_scatter \| f32 \| f32 \| 33 \|' --
out="${TEST_TMPDIR:-/tmp}/plan_out"
expect tiny-plan 0 '^# Plan: tiny' -- --model=tiny:layers=2 --seq=8 --batch=4 --mesh=2x2 \
  --axes=fsdp,tp --device=cpu --devices-per-host=4 --out="$out"
for f in plan.json plan.mlir report.md trace.json; do
  if [[ -s "$out/$f" ]]; then echo "ok   wrote $f"; else echo "FAIL $f missing"; failures=$((failures + 1)); fi
done
if grep -q '"format_version": 2' "$out/plan.json" && grep -q '"tid": 2' "$out/trace.json"; then
  echo "ok   plan.json version and trace comm track"
else
  echo "FAIL plan.json or trace.json content"; failures=$((failures + 1))
fi
# The AdamW hyperparameters reach every optimizer step; the defaults are
# PyTorch's AdamW with lr 1e-3 and weight decay 0.01.
adam_out="${TEST_TMPDIR:-/tmp}/adam_out"
expect adam-flags 0 '^# Plan: tiny' -- --model=tiny:layers=2 --seq=8 --batch=2 --mesh=2 \
  --axes=fsdp --device=cpu --devices-per-host=2 --adam-lr=0.0003 --adam-beta1=0.8 \
  --adam-beta2=0.95 --adam-eps=1e-6 --weight-decay=0 --out="$adam_out/set"
expect adam-defaults 0 '^# Plan: tiny' -- --model=tiny:layers=2 --seq=8 --batch=2 --mesh=2 \
  --axes=fsdp --device=cpu --devices-per-host=2 --out="$adam_out/default"
if python3 - "$adam_out" <<'PY'
import json, sys
def attrs(name):
    plan = json.load(open(f"{sys.argv[1]}/{name}/plan.json"))
    blocks = {b["name"]: b["instructions"] for b in plan["programs"][0]["blocks"]}
    steps = blocks["optimizer"]
    assert steps and all(i["op"] == "dist.optimizer_step" for i in steps)
    return {json.dumps(i["attrs"], sort_keys=True) for i in steps}
assert attrs("set") == {json.dumps({"beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "lr": 0.0003,
                                    "weight_decay": 0.0}, sort_keys=True)}, attrs("set")
assert attrs("default") == {json.dumps({"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "lr": 0.001,
                                        "weight_decay": 0.01}, sort_keys=True)}, attrs("default")
PY
then
  echo "ok   adam flags in plan.json"
else
  echo "FAIL adam flags in plan.json"; failures=$((failures + 1))
fi
expect adam-bad-lr 2 "error: 'dist.optimizer_step' op lr must be positive, got: 0; use a learning rate such as 0.001" -- \
  --model=tiny:layers=2 --seq=8 --batch=2 --mesh=2 --axes=fsdp --device=cpu --devices-per-host=2 \
  --adam-lr=0
# Mixed precision: bf16 params with f32 masters; --grad-reduce-dtype=f32
# reduce-scatters the bf16 gradients in f32 into f32 gradient shards
# (FSDP2's reduce_dtype), without it they travel and stay bf16.
mp_model='tiny:family=llama,layers=2,hidden=64,heads=4,kv_heads=2,ffn=128,vocab=256,seq=16'
mp_out="${TEST_TMPDIR:-/tmp}/mp_out"
mp_flags=(--model="$mp_model" --mesh=2 --axes=fsdp --batch=4 --device=cpu --dtype=bf16)
expect grad-reduce-f32 0 '\| fsdp \| reduce_scatter \| f32 \| f32 \| 3 \|' -- "${mp_flags[@]}" \
  --grad-reduce-dtype=f32 --out="$mp_out/f32"
expect grad-reduce-default 0 '\| fsdp \| reduce_scatter \| bf16 \| f32 \| 3 \|' -- "${mp_flags[@]}" \
  --out="$mp_out/default"
# check_grad_dtypes DIR GRAD: plan.json's reduce-scatters travel as and yield
# GRAD, every grad: buffer (and the optimizer step's grad operand) is GRAD at
# GRAD's size, params are bf16 and masters f32.
check_grad_dtypes() {
  python3 - "$1/plan.json" "$2" <<'PY'
import json, math, sys
plan, want = json.load(open(sys.argv[1])), sys.argv[2]
size = {"bf16": 2, "f32": 4}
buffers = plan["buffers"]
errors = []
blocks = {b["name"]: b["instructions"] for b in plan["programs"][0]["blocks"]}
ops = [i for block in blocks.values() for i in block]
scatters = [i for i in ops if i["op"].startswith("dist.reduce_scatter")]
if not scatters:
    errors.append("no reduce_scatter")
for i in scatters:
    results = [buffers[r]["dtype"] for r in i["results"]]
    if i["attrs"].get("wire_type") != want or results != [want]:
        errors.append(f"{i['op']} #{i['index']}: wire {i['attrs'].get('wire_type')}, result {results}")
grads = [b for b in buffers if b["name"].startswith("grad:")]
if len(grads) != 21:
    errors.append(f"{len(grads)} grad buffers, want 21")
for b in grads:
    if b["dtype"] != want or b["bytes"] != math.prod(b["local_shape"]) * size[want]:
        errors.append(f"{b['name']}: {b['dtype']}, {b['bytes']} bytes")
for b in buffers:
    kind = b["name"].split(":")[0] if ":" in b["name"] else b["role"]
    if (kind == "param" and b["dtype"] != "bf16") or (kind == "master" and b["dtype"] != "f32"):
        errors.append(f"{b['name']}: {b['dtype']}")
steps = [i for i in blocks["optimizer"] if i["op"] == "dist.optimizer_step"]
if len(steps) != 21 or any(len(i["operands"]) != 5 or buffers[i["operands"][1]]["dtype"] != want
                           for i in steps):
    errors.append("optimizer steps do not take [param, grad, exp_avg, exp_avg_sq, master] "
                  f"with a {want} grad")
if errors:
    print("\n".join(errors))
    sys.exit(1)
PY
}
for want in f32 default; do
  dtype=$([[ $want == f32 ]] && echo f32 || echo bf16)
  if check_grad_dtypes "$mp_out/$want" "$dtype" &&
     grep -q "^- dtypes: params bf16; gradients $dtype\$" "$mp_out/$want/report.md"; then
    echo "ok   grad-reduce-$want plan.json and report dtypes"
  else
    echo "FAIL grad-reduce-$want plan.json or report dtypes"; failures=$((failures + 1))
  fi
done
expect grad-reduce-bad 2 "plan: --grad-reduce-dtype='fp32' is not a gradient reduction type; use bf16 or f32" -- \
  "${mp_flags[@]}" --grad-reduce-dtype=fp32
# The candidates and the winner reduce gradients in the type asked for.
expect grad-reduce-auto 0 '^- winner: ' -- \
  --model=tiny --mesh=auto --devices=8 --grad-reduce-dtype=f32
expect mesh-axes 2 "plan: --mesh=8 has 1 axes but --axes='fsdp,tp' names 2" -- \
  --model=tiny --mesh=8 --axes=fsdp,tp
expect mesh-size 2 "plan: --mesh=8xq: axis size 'q' is not a positive integer" -- \
  --model=tiny --mesh=8xq --axes=fsdp,tp
expect mesh-hosts 2 'plan: the mesh has 12 devices, not a multiple of --devices-per-host=8' -- \
  --model=tiny --mesh=12 --axes=fsdp
expect bad-strategy 2 "plan: .*error: 'dist.mesh' op unknown strategy 'zz' for mesh axis 'zz'" -- \
  --model=tiny --batch=2 --mesh=2 --axes=zz
expect bad-device 2 'plan: --device: .*tpu' -- --model=tiny --mesh=2 --axes=fsdp --device=tpu
expect cannot-split 2 "error: 'nn.reshape' op cannot split factor .* unevenly over the tp axis 'tp' of size 3" -- \
  --model=llama3-8b --seq=16 --batch=8 --mesh=8x3 --axes=fsdp,tp
expect over-budget 2 'plan needs .* per rank at its peak, over the 10 GiB device memory .*lower the batch' -- \
  --model=llama3-8b --mesh=8 --axes=fsdp --batch=8 --memory-gb=10
# Offload (docs/planner_offload.md): Llama 3 70B on one 8-GPU H100 host does
# not fit in bf16 with selective recompute (98.6 GiB of AdamW state per
# GPU); with the states offloaded it fits and the report shows the price;
# the host cap refuses what does not fit the host.
offload_70b=(--model=llama3-70b --mesh=fsdp=8 --device=h100 --dtype=bf16 --recompute=selective)
expect offload-70b-refused 2 'over the 80 GiB device memory .*optimizer states 98\.6 GiB.*--offload=optimizer' -- \
  "${offload_70b[@]}"
expect offload-70b-fits 0 '^- offload: optimizer states .* copies on the host link \(pcie, 55\.0 GB/s\) [0-9.]+ s of which [0-9.]+ s exposed, host AdamW [0-9.]+ s' -- \
  "${offload_70b[@]}" --offload=optimizer
expect offload-70b-host-peak 0 '^- peak host memory per rank: 115\.2 GiB' -- "${offload_70b[@]}" --offload=optimizer
expect offload-host-cap 2 'plan needs 115\.2 GiB per rank at its peak, over the 100 GiB host memory for offloaded buffers' -- \
  "${offload_70b[@]}" --offload=optimizer --host-memory-gb=100
expect offload-bad-mode 2 "plan-offload: mode 'params' is not an offload; use none or optimizer" -- \
  --model=tiny --batch=2 --mesh=2 --axes=fsdp --device=cpu --offload=params
# --mesh=auto offloads where nothing fits with the states on the device
# (70B on one host: fsdp 8 at 6.304 s, 115.2 GiB of host memory), says so,
# and plans the winner with --offload=optimizer; --offload pins the choice,
# and the host cap applies to the search too.
auto_70b_host=(--model=llama3-70b --mesh=auto --devices=8 --pin pp=1 --pin tp=1)
expect offload-auto 0 '^- winner: fsdp 8 \| .*offload optimizer: step .*\(host 115\.2 GiB\)' -- \
  "${auto_70b_host[@]}"
expect offload-auto-why 0 'It keeps the optimizer states in host memory \(offload\).*No candidate fits with the optimizer states on the device' -- \
  "${auto_70b_host[@]}"
expect offload-auto-plan 0 '^- peak host memory per rank: 115\.2 GiB' -- "${auto_70b_host[@]}"
expect offload-auto-off 2 'No candidate fits in 80\.0 GiB.*without --offload=none the search may offload' -- \
  "${auto_70b_host[@]}" --offload=none
expect offload-auto-host-cap 2 'of host memory; the smallest device peak is .* over the host cap' -- \
  "${auto_70b_host[@]}" --host-memory-gb=64
expect offload-auto-pinned 0 '^- winner: .*offload optimizer' -- \
  --model=tiny --mesh=auto --devices=2 --device=cpu --offload=optimizer
expect offload-auto-bad 2 "plan: --offload='params' is not none or optimizer" -- \
  --model=tiny --mesh=auto --devices=2 --offload=params
expect bad-seq 2 'plan: model gpt2: seq 4096 exceeds the model.s max_seq 1024' -- \
  --model=gpt2 --seq=4096
expect no-model 2 'plan: --model is required' -- --emit=summary
# --mesh=auto: the search's table, explanation and progress, the winner's
# files with candidates.json, pins, and the choices practice makes.
auto_out="${TEST_TMPDIR:-/tmp}/auto_out"
tiny_auto='tiny:layers=2,hidden=256,heads=8,kv_heads=8,ffn=512,vocab=1024,seq=512'
expect auto-table 0 '^\| 1 \| .* \| yes \|$' -- --model="$tiny_auto" --mesh=auto --devices=16 \
  --out="$auto_out"
expect auto-why 0 '^Why .* won: against .* decided it' -- --model="$tiny_auto" --mesh=auto --devices=16
expect auto-progress 0 '^plan: search: [0-9]+ of [0-9]+ candidates evaluated' -- \
  --model="$tiny_auto" --mesh=auto --devices=16
expect auto-plan-report 0 '^# Plan: tiny' -- --model="$tiny_auto" --mesh=auto --devices=16
for f in plan.json plan.mlir report.md trace.json candidates.json; do
  if [[ -s "$auto_out/$f" ]]; then echo "ok   auto wrote $f"; else echo "FAIL auto $f missing"; failures=$((failures + 1)); fi
done
if grep -q '"format": "loom.mesh_search"' "$auto_out/candidates.json" && \
   grep -q '"rank": 1,' "$auto_out/candidates.json"; then
  echo "ok   candidates.json ranks the candidates"
else
  echo "FAIL candidates.json content"; failures=$((failures + 1))
fi
expect auto-pin 0 '^- winner: [a-z0-9 x]* \+ tp 2 \|' -- --model="$tiny_auto" --mesh=auto --devices=16 \
  --pin tp=2
expect auto-max-tp 0 '^- winner: (pp [0-9]+[^|+]* \+ )?(fsdp|dp|hsdp) [0-9x]+ \|' -- \
  --model="$tiny_auto" --mesh=auto --devices=16 --max-tp=1
expect auto-8b-no-tp 0 '^- winner: (fsdp|hsdp) [0-9x]+ \|' -- --model=llama3-8b --mesh=auto --devices=128
# Without recompute activation memory forces 70B to tp 8; recompute frees
# it to a smaller tp degree (docs/planner_recompute.md).
# Llama 3 70B on 256 H100s: activation memory forces tp 8 without
# recompute and sequence parallelism, tp 4 with selective recompute
# without sequence parallelism, and with it tp 4 fits without recompute.
expect auto-70b-fsdp-tp 0 '^- winner: (fsdp|hsdp) [0-9x]+ \+ tp 8 \|' -- --model=llama3-70b \
  --mesh=auto --devices=256 --recompute=none --pin sequence-parallel=false --pin pp=1
# With pipeline stages allowed, interleaved stages with a smaller tp inside
# beat tp 8 without stages (docs/planner_stages.md, "Pipelines in the
# search": pp 8 x4 chunks with tp 2, 2.516 s, against fsdp 32 + tp 8's 2.639 s).
expect auto-70b-pipeline 0 '^- winner: pp [48] interleaved x[24] \+ (fsdp|hsdp) [0-9x]+ \+ tp [24] \|' -- \
  --model=llama3-70b --mesh=auto --devices=256 --recompute=none --pin sequence-parallel=false
expect auto-70b-recompute 0 '^- winner: (fsdp|hsdp) [0-9x]+ \+ tp [124] \| .*recompute (selective|full)' \
  -- --model=llama3-70b --mesh=auto --devices=256 --pin sequence-parallel=false
expect auto-70b-sp 0 '^Why .* It shards the sequence on tp \(sequence parallelism\)' \
  -- --model=llama3-70b --mesh=auto --devices=256
expect auto-70b-sp-winner 0 '^- winner: (fsdp|hsdp) [0-9x]+ \+ tp 4 \| .*, sp' \
  -- --model=llama3-70b --mesh=auto --devices=256
expect auto-bad-recompute 2 "plan: --recompute='some' is not none, selective, full or auto" -- \
  --model=tiny --mesh=auto --devices=8 --recompute=some
# An explicit mesh plans one sequence per data-parallel rank by default.
expect explicit-default-batch 0 '^- peak memory per rank' -- --model=llama3-8b --mesh=8 --axes=fsdp
# The terminal groups the repeated layers' parameters; report.md lists each.
expect grouped-params 0 '^\| layers\.\{0\.\.31\}\.attention\.wq\.weight \(x32\) \|' -- \
  --model=llama3-8b --mesh=8 --axes=fsdp
expect recompute-plan 0 '^## Recompute \(per rank\)' -- --model=tiny --mesh=fsdp=2 --batch=2 \
  --recompute=full
# Per-layer recompute: runs of mode:count; --recompute=auto mixes them.
expect recompute-layers 0 '^## Recompute \(per rank\)' -- --model=tiny --mesh=fsdp=2 --batch=2 \
  --recompute=selective --recompute-layers=full:1
expect recompute-layers-bad 2 "plan-recompute layers: 'full:x' is not mode:count" -- \
  --model=tiny --mesh=fsdp=2 --batch=2 --recompute-layers=full:x
expect recompute-layers-auto 2 'plan: --recompute-layers applies to an explicit mesh' -- \
  --model=tiny --mesh=auto --devices=4 --recompute-layers=full:1
expect recompute-auto-mix 0 'plan: --recompute=auto chose full:[0-9]+,selective:[0-9]+' -- \
  --model=llama3-70b --mesh=fsdp=32,tp=8 --batch=32 --memory-gb=25 --recompute=auto
# Gradient accumulation: the plan is the whole step; the levers need
# micro-steps, the batch must split into them, and --mesh=auto picks them.
expect accumulate-plan 0 '^- optimizer step: 2 micro-steps \(parameter gathers kept from the first; gradient reductions deferred to the last\)' -- \
  --model=tiny --mesh=fsdp=2 --batch=4 --micro-steps=2 --keep-gathered --defer-grad-sync
expect accumulate-levers-alone 2 'plan: --keep-gathered and --defer-grad-sync act between the micro-steps' -- \
  --model=tiny --mesh=fsdp=2 --keep-gathered
expect accumulate-split 2 'plan: --batch=8 does not split into --micro-steps=3 equal micro-batches' -- \
  --model=tiny --mesh=fsdp=2 --batch=8 --micro-steps=3
expect accumulate-auto 2 'plan: --micro-steps applies to an explicit mesh' -- \
  --model=tiny --mesh=auto --devices=4 --micro-steps=2
# Sequence parallelism: tp's all-reduces become reduce-scatters and
# all-gathers; the sequence must divide by tp.
expect sequence-parallel 0 '^\| tp \| reduce_scatter \|' -- --model=tiny --mesh=tp=2 --batch=2 \
  --sequence-parallel
expect sequence-parallel-uneven 2 'sequence-parallel splits the sequence of argument #0 \(15 tokens\) over tp=2' \
  -- --model=tiny --mesh=tp=2 --batch=2 --seq=15 --sequence-parallel
# auto: the least recompute that fits. Llama 3 8B at seq 8192 on 8 GPUs
# needs some; with room to spare it needs none.
expect recompute-auto 0 'plan: --recompute=auto chose (selective|full)' -- --model=llama3-8b \
  --mesh=8 --axes=fsdp --seq=8192 --recompute=auto
expect recompute-auto-none 0 'plan: --recompute=auto chose none' -- --model=tiny --mesh=fsdp=2 \
  --recompute=auto
expect recompute-bad 2 "plan-recompute mode 'some' is not none, full or selective" -- \
  --model=tiny --mesh=fsdp=2 --batch=2 --recompute=some
expect auto-needs-devices 2 'plan: --mesh=auto needs --devices=N' -- --model=tiny --mesh=auto
# A graph file is searched at its own batch, planned whole per template.
expect auto-file 0 '^- priced from the pipeline.s own programs: .* each the whole graph' -- \
  --model="$testdata/mlp_lm.mlir" --mesh=auto --devices=2 --device=cpu
expect auto-file-batch 2 'plan: --batch applies to zoo models only; the IR of .* fixes its batch' \
  -- --model="$testdata/mlp_lm.mlir" --mesh=auto --devices=2 --batch=8
expect auto-axes 2 'plan: --axes does not apply to --mesh=auto' -- --model=tiny --mesh=auto \
  --devices=8 --axes=fsdp
expect auto-bad-pin 2 "plan: --pin 'cp=2': unknown key 'cp'" -- --model=tiny --mesh=auto \
  --devices=8 --pin cp=2
expect auto-no-fit 2 'plan: No candidate fits in 0.0 GiB.*raise --memory-gb' -- --model="$tiny_auto" \
  --mesh=auto --devices=8 --memory-gb=0.001
tiny_gpt2='tiny:family=gpt2,layers=9,hidden=64,heads=4,kv_heads=4,ffn=256,vocab=250,seq=16'
expect auto-gpt2 0 '^- winner: ' -- --model="$tiny_gpt2" --mesh=auto --devices=8
expect auto-programs 0 '^- priced from the pipeline.s own programs: .* repeated to the model' \
  -- --model="$tiny_gpt2" --mesh=auto --devices=8 --pin tp=2
expect pin-needs-auto 2 'plan: --pin applies to --mesh=auto, not to --mesh=8' -- --model=tiny \
  --batch=8 --mesh=8 --axes=fsdp --pin tp=2
# Validation of a given mesh: the device count and tp across hosts.
expect devices-mismatch 2 'plan: --mesh=8x8 has 8 x 8 = 64 devices but --devices=128' -- \
  --model=tiny --mesh=8x8 --axes=fsdp,tp --devices=128
tp_model='tiny:layers=1,hidden=256,heads=16,kv_heads=16,ffn=512,vocab=1024,seq=16'
expect tp-across-hosts 2 "plan: the tp axis 'tp' \(size 16\) spans 2 hosts of 8 devices, so its all-reduces cross infiniband \(50 GB/s per device instead of 450 GB/s on nvlink\)" -- \
  --model="$tp_model" --batch=2 --mesh=2x16 --axes=fsdp,tp
expect tp-across-hosts-allowed 0 "plan: warning: the tp axis 'tp' \(size 16\) spans 2 hosts" -- \
  --model="$tp_model" --batch=2 --mesh=2x16 --axes=fsdp,tp --allow-tp-across-hosts
# Machine profiles replace the datasheet figures; a bad one names its field.
profile="${TEST_TMPDIR:-/tmp}/profile.json"
cat > "$profile" <<'JSON'
{"format": "loom.machine_profile", "version": 1, "name": "test-cpu", "measured_on": "ci",
 "date": "2026-11-30",
 "device": {"name": "cpu", "memory_bytes": 17179869184, "memory_bandwidth_bytes_per_s": 2e10},
 "gemm": [{"dtype": "f32", "shape_class": "small", "m": 64, "n": 64, "k": 64, "flops_per_s": 5e10}],
 "collectives": [{"backend": "gloo", "kind": "all_reduce", "group_size": 2,
                  "link_class": "intra_host", "latency_s": 5e-5, "bus_bandwidth_bytes_per_s": 1e9}]}
JSON
cp "$profile" "${profile%.json}.good.json"
prof_out="${TEST_TMPDIR:-/tmp}/prof_out"
expect profile-plan 0 '^# Plan: tiny' -- --model=tiny --batch=4 --mesh=2x2 --axes=fsdp,tp \
  --device=cpu --devices-per-host=4 --profile="$profile" --out="$prof_out"
if grep -q '"machine_profile": "test-cpu"' "$prof_out/plan.json"; then
  echo "ok   plan.json names the profile"
else
  echo "FAIL plan.json lacks the profile"; failures=$((failures + 1))
fi
sed -i 's/"m": 64/"m": -1/' "$profile"
expect profile-bad 2 'machine profile .*profile.json: gemm\[0\]\.m: expected an integer >= 1, got -1' -- \
  --model=tiny --batch=4 --mesh=2x2 --axes=fsdp,tp --device=cpu --profile="$profile"
expect profile-device 2 "machine profile 'test-cpu' was measured on device 'cpu' but the plan is for 'h100-sxm'" -- \
  --model=tiny --batch=8 --mesh=8 --axes=fsdp --profile="${profile%.json}.good.json"
exit $((failures > 0))
