#!/usr/bin/env bash
# Plans the set of models and meshes that a planner or format change must
# keep equivalent (docs/plan_equivalence.md): every layout the runtime tests
# train (runtime/executor/testdata/BUILD), Llama 3 8B at its README meshes,
# GPT-2 on fsdp x tp, and a --mesh=auto search. Compare two sets with
# tools/plan/compare_plans.py.
#
#   tools/plan/plan_set.sh bazel-bin/tools/plan/plan /tmp/plans-after
set -u
[[ $# -eq 2 ]] || { echo "usage: $0 PLAN_BINARY OUTDIR" >&2; exit 2; }
PLAN=$1; OUT=$2; mkdir -p $OUT
run() { name=$1; shift; "$PLAN" "$@" --out=$OUT/$name > $OUT/$name.log 2>&1 || echo "FAILED $name"; }
while read -r name model mesh extra; do
  run $name --model=$model --batch=4 --seq=16 --mesh=$mesh --device=cpu --devices-per-host=4 $extra
done <<'PL'
llama_single tiny fsdp=1
llama_fsdp4 tiny fsdp=4
llama_tp2 tiny tp=2
llama_fsdp2_tp2 tiny fsdp=2,tp=2
llama_hsdp2x2 tiny dp=2,fsdp=2
gpt2_single tiny:family=gpt2 fsdp=1
gpt2_fsdp4 tiny:family=gpt2 fsdp=4
gpt2_tp2 tiny:family=gpt2 tp=2
gpt2_fsdp2_tp2 tiny:family=gpt2 fsdp=2,tp=2
gpt2_hsdp2x2 tiny:family=gpt2 dp=2,fsdp=2
gpt2_v251_single tiny:family=gpt2,vocab=251 fsdp=1
gpt2_v251_fsdp4 tiny:family=gpt2,vocab=251 fsdp=4
gpt2_v251_fsdp2_tp2 tiny:family=gpt2,vocab=251 fsdp=2,tp=2
llama_bf16_single tiny fsdp=1 --dtype=bf16
llama_bf16_fsdp4 tiny fsdp=4 --dtype=bf16
llama_bf16_tp2 tiny tp=2 --dtype=bf16
llama_bf16_fsdp2_tp2 tiny fsdp=2,tp=2 --dtype=bf16
llama_bf16_hsdp2x2 tiny dp=2,fsdp=2 --dtype=bf16
gpt2_bf16_fsdp4 tiny:family=gpt2 fsdp=4 --dtype=bf16
gpt2_v251_bf16_single tiny:family=gpt2,vocab=251 fsdp=1 --dtype=bf16
gpt2_v251_bf16_fsdp2_tp2 tiny:family=gpt2,vocab=251 fsdp=2,tp=2 --dtype=bf16
llama_bf16_gradf32_fsdp4 tiny fsdp=4 --dtype=bf16 --grad-reduce-dtype=f32
llama_bf16_gradf32_hsdp2x2 tiny dp=2,fsdp=2 --dtype=bf16 --grad-reduce-dtype=f32
llama_bf16_gradf32_fsdp2_tp2 tiny fsdp=2,tp=2 --dtype=bf16 --grad-reduce-dtype=f32
PL
run llama3_8b_bf16_fsdp4_tp2 --model=llama3-8b --mesh=fsdp=4,tp=2 --batch=8 --dtype=bf16
run llama3_8b_fsdp8_b8 --model=llama3-8b --mesh=8 --axes=fsdp --batch=8
run gpt2_fsdp2_tp2_cpu --model=gpt2 --mesh=fsdp=2,tp=2 --batch=4 --device=cpu --devices-per-host=4
run tiny_auto_cpu4 --model=tiny --mesh=auto --devices=4 --batch=4 --seq=16 --device=cpu --devices-per-host=4
