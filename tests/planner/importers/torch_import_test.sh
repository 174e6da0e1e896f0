#!/usr/bin/env bash
# End-to-end check of the PyTorch importer: the GPT-2- and Llama-style
# samples import, plan-opt verifies the result, and the float64 nn evaluator
# reproduces PyTorch's float64 outputs on the same weights; an op without an
# nn counterpart is refused with a message that names it.
set -uo pipefail
importer="$1" samples="$2" plan_opt="$3" compare="$4"
out="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
check() {  # check NAME COMMAND...
  local name="$1"; shift
  local log
  if log=$("$@" 2>&1); then
    echo "ok   $name"
  else
    echo "FAIL $name:"; echo "$log" | head -40
    failures=$((failures + 1))
  fi
}
has() {  # has FILE PATTERN: grep -E on a file, for check
  grep -qE -- "$2" "$1" || { echo "no match for '$2' in $1"; return 1; }
}
for sample in gpt2_block llama_block gpt2_lm llama_lm; do
  mlir="$out/$sample.mlir" json="$out/$sample.json"
  check "$sample imports" /usr/bin/python3 "$importer" "$samples:$sample" -o "$mlir" \
    --reference "$json"
  check "$sample verifies" "$plan_opt" "$mlir" -o /dev/null
  check "$sample matches torch" "$compare" "$mlir" "$json"
done
# Names stay PyTorch's; nn.Linear weights are stored [in, out]; a fused
# projection that is split imports as one nn.linear per chunk.
check "linear weight transposed" has "$out/llama_block.mlir" \
  '%attention.wk.weight: tensor<64x32xf32> \{nn.param, nn.name = "attention.wk.weight", nn.init = \{kind = "normal", mean = 0.0, std = 0.02\}\}'
check "norm scale init" has "$out/llama_block.mlir" \
  'nn.name = "attention_norm.weight", nn.init = \{kind = "ones", mean = 0.0, std = 0.0\}'
check "fused qkv chunks" has "$out/gpt2_block.mlir" \
  'nn.name = "attn.c_attn.weight\[64:128, :\]"'
check "tied head" has "$out/gpt2_lm.mlir" \
  'nn.matmul %transformer_ln_f, %transformer.wte.weight transpose_rhs'
check "locations" has "$out/llama_lm.mlir" \
  'nn.attention .* loc\("layers.1.attention"\(".*sample_blocks.py":[0-9]+:1\)\)'
# The zoo's graphs of the same configs, fed the PyTorch models' weights by
# parameter name, give PyTorch's losses: the zoo builds the real models.
check "zoo gpt2 matches torch" "$compare" \
  --zoo=tiny:family=gpt2,layers=2,hidden=64,heads=4,ffn=256,vocab=96,seq=16 "$out/gpt2_lm.json"
check "zoo llama matches torch" "$compare" \
  --zoo=tiny:family=llama,layers=2,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=96,seq=16 \
  "$out/llama_lm.json"

log=$(/usr/bin/python3 "$importer" "$samples:relu_block" -o "$out/relu.mlir" 2>&1)
code=$?
pattern="^torch_import: unsupported operation 'torch.nn.functional.relu' \(node 'relu', called from <root>\); supported: .*nn.Linear"
if [[ $code -eq 1 ]] && grep -qE "$pattern" <<<"$log"; then
  echo "ok   unsupported op is named"
else
  echo "FAIL unsupported op is named: exit $code, output:"; echo "$log"
  failures=$((failures + 1))
fi
exit $((failures > 0))
