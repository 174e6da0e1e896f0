#!/usr/bin/env bash
# End-to-end check of the plan command line: zoo models and .mlir files
# print a summary (and the graph), bad input exits 2 with a message that
# names the problem and, for IR, its location.
set -uo pipefail
tool="$1"
testdata="$(dirname "$0")/testdata"
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
expect unknown-model 2 "^plan: unknown model 'gpt5'; known models are gpt2," -- --model=gpt5
expect bad-file 2 'bad_linear\.mlir:7:8: error: .nn\.linear. op input features do not match' -- \
  --model="$testdata/bad_linear.mlir"
expect missing-file 2 "plan: cannot read model file '.*nope\.mlir'" -- --model=nope.mlir
expect bad-emit 2 "plan: --emit='plan' is not an output; use graph or summary" -- \
  --model=gpt2 --emit=plan
expect bad-flag 2 "plan: .*--memory-gb" -- --model=gpt2 --memory-gb=80
expect bad-seq 2 'plan: model gpt2: seq 4096 exceeds the model.s max_seq 1024' -- \
  --model=gpt2 --seq=4096
expect no-model 2 'plan: --model is required' --
exit $((failures > 0))
