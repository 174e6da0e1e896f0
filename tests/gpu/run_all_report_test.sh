#!/usr/bin/env bash
# Runs tests/gpu/run_all.sh on fake bundles whose "binaries" print canned
# logs (tests/gpu/testdata) and exit as the real ones do, and checks the
# report: gtest all skipped, passed and failed; a bench that exits 3; a
# binary that is not built; a loader failure; a GPU that nvidia-smi shows but
# a check skips; a training run on either device, with and without offload,
# and pipeline stages on two GPUs (not run where nvidia-smi lists one);
# an exhausted time budget;
# and the exit code of each case.
set -uo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
run_all="$root/tests/gpu/run_all.sh"
testdata="$root/tests/gpu/testdata"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# fake BUNDLE FILE LOG EXIT: bin/FILE prints LOG and exits with EXIT.
fake() {
  mkdir -p "$1/bin"
  printf '#!/bin/sh\ncat "%s"\nexit %d\n' "$testdata/$3" "$4" >"$1/bin/$2"
  chmod +x "$1/bin/$2"
}

# A train whose flags lack --device (the CUDA executor is not built yet).
fake_train() {
  printf '#!/bin/sh\necho "  Flags from tools/train/train_main.cc:"\necho "    --plan (the plan.json to run); default: \\"\\";"\nexit 1\n' \
    >"$1/bin/train"
  chmod +x "$1/bin/train"
}

# run NAME BUNDLE [ENV...]: runs run_all.sh; sets RC, REPORT (report.md) and
# OUTPUT (stdout and stderr).
run() {
  local name="$1" bundle="$2"
  shift 2
  local out="$tmp/$name.out"
  OUTPUT="$(env "$@" BUNDLE_DIR="$bundle" OUT="$out" bash "$run_all" 2>&1)"
  RC=$?
  REPORT="$(cat "$out/report.md" 2>/dev/null)"
}

# expect_row CHECK STATUS PATTERN: the report's row of CHECK has STATUS and
# its key figure matches PATTERN (grep -E).
expect_row() {
  local row
  row="$(grep -E "^\| $1 \|" <<<"$REPORT")"
  if [[ -z "$row" ]]; then
    fail "$CASE: no row for $1 in the report:"$'\n'"$REPORT"
  elif [[ "$(awk -F' \\| ' '{ print $2 }' <<<"$row")" != "$2" ]] || ! grep -qE "$3" <<<"$row"; then
    fail "$CASE: row of $1 is '$row', want status $2 and /$3/"
  fi
}

expect_rc() {
  [[ "$RC" -eq "$1" ]] || fail "$CASE: exit $RC, want $1; output:"$'\n'"$OUTPUT"
}

no_gpu=(NVIDIA_SMI=/nonexistent/nvidia-smi)

# 1. No GPU: one of each kind of result, and a failure fails the run.
CASE="mixed, no GPU"
b="$tmp/mixed"
fake "$b" cuda_wiring_test gtest_all_skipped.log 0
fake "$b" nccl_backend_test gtest_passed.log 0
fake "$b" gpu_measure_test gtest_failed.log 1
fake "$b" gemm_bench bench_skipped.log 3
fake "$b" comm-bench comm_bench_passed.log 0
fake "$b" calibrate loader_failure.log 127
fake_train "$b"
echo "//runtime/kernels/cuda:cuda_kernels_test: no such target in this tree" >"$b/NOT_BUILT"
run mixed "$b" "${no_gpu[@]}"
expect_rc 1
expect_row cuda_wiring SKIP "all 4 skipped: no usable GPU: CUDA driver version is insufficient"
expect_row nccl_backend PASS "13 of 13 passed"
expect_row gpu_measure FAIL "1 of 3 failed: GpuMeasureTest.Triad"
expect_row cuda_kernels MISSING "cuda_kernels_test is not in mixed/bin \(no such target in this tree\)"
expect_row gemm_bench SKIP "^.*\| no usable GPU: CUDA driver"
expect_row comm_bench_nccl PASS "all_reduce 16 MiB in place: [0-9.]+ us, algbw [0-9.]+ GB/s; 0 wrong"
expect_row calibrate_gpu FAIL "error while loading shared libraries: libcublas.so.13"
expect_row train_gpu MISSING "CUDA executor not built yet"
expect_row train_offload_gpu MISSING "CUDA executor not built yet"
expect_row step_offload MISSING "no .*llama_1b_bf16_offload_h200/plan.json in the bundle"
grep -q "^FAILED: 2 of 15 checks failed (2 passed, 2 skipped, 9 missing)" <<<"$REPORT" ||
  fail "$CASE: verdict line wrong:"$'\n'"$REPORT"
[[ -s "$tmp/mixed.out/logs/gpu_measure.log" ]] || fail "$CASE: no log for gpu_measure"
grep -q "no GPU visible" <<<"$OUTPUT" || fail "$CASE: no 'no GPU visible' line"

# 2. No GPU, nothing fails: exit 0 and the "no GPU" verdict.
CASE="all skipped, no GPU"
b="$tmp/skipped"
for t in cuda_wiring_test nccl_backend_test object_collectives_cuda_test gpu_measure_test \
  cuda_kernels_test cuda_kernel_set_test executor_cuda_test; do
  fake "$b" "$t" gtest_all_skipped.log 0
done
fake "$b" gemm_bench bench_skipped.log 3
fake "$b" calibrate calibrate_skipped.log 3
fake_train "$b"
run skipped "$b" "${no_gpu[@]}"
expect_rc 0
expect_row calibrate_gpu SKIP "no usable GPU"
expect_row comm_bench_nccl MISSING "comm-bench is not in skipped/bin"
grep -q "^no GPU: 9 checks skipped (6 missing, none failed)" <<<"$REPORT" ||
  fail "$CASE: verdict line wrong:"$'\n'"$REPORT"

# 3. nvidia-smi lists a GPU: a check that skips for want of one fails, and a
# passing gemm_bench's tables reach the report, condensed into its key
# figure (the canned figures are made up; the layout is gemm_bench's).
CASE="GPU visible"
b="$tmp/visible"
fake "$b" cuda_wiring_test gtest_all_skipped.log 0
fake "$b" gemm_bench gemm_bench_passed.log 0
smi="$tmp/nvidia-smi"
printf '#!/bin/sh\necho "NVIDIA H200, 580.65.06, 143771 MiB, 0 MiB, 0 %%"\n' >"$smi"
chmod +x "$smi"
run visible "$b" NVIDIA_SMI="$smi"
expect_rc 1
expect_row cuda_wiring FAIL "skipped although nvidia-smi lists a GPU: all 4 skipped"
expect_row gemm_bench PASS \
  "bf16 GEMM ours/cuBLAS 0.87-0.99 over 3 shapes, best 53.0% of peak; attention bf16 fwd\+bwd 139.6 TFLOP/s"
grep -q "^## gemm_bench" <<<"$REPORT" || fail "$CASE: no gemm_bench section"
grep -qF "| grad_w    |   4096 |  2048 |  32000 | bf16 |" <<<"$REPORT" ||
  fail "$CASE: gemm_bench's table rows are missing from the report"
grep -q "nvidia-smi: NVIDIA H200" <<<"$OUTPUT" || fail "$CASE: no nvidia-smi line"
# One GPU: pp 2 over NCCL needs two, so it is not run, and that is no
# failure.
expect_row train_pipeline_gpu SKIP "not run: pp 2 over NCCL needs 2 GPUs; nvidia-smi lists 1"

# 4. A train with --device (the CUDA executor): the CUDA run's losses, beside
# the CPU run's.
CASE="train with --device"
b="$tmp/train"
mkdir -p "$b/bin" "$b/data/llama_single"
echo '{}' >"$b/data/llama_single/plan.json"
cat >"$b/bin/train" <<'EOF'
#!/bin/sh
out="" device=""
for arg in "$@"; do
  case "$arg" in
    --helpfull) echo '    --device (cpu or cuda); default: "cpu";'; exit 1 ;;
    --losses_out=*) out="${arg#--losses_out=}" ;;
    --device=*) device="${arg#--device=}" ;;
  esac
done
if [ -z "$out" ]; then
  # The 1B step: no losses file, the figures train prints.
  echo "median step 214.30 ms (steps after the first), 76458 tokens/s, 76458 tokens/s per rank"
  echo "MFU 51.3%: 1.09e+14 model FLOPs per rank per step, 508.2 TFLOP/s per rank against the plan's h200 bf16 peak of 989.5 TFLOP/s"
  echo "memory per rank (bytes handed out by the caching allocator; planner: 1000)"
  echo "| rank | forward | backward | optimizer | checkpoint | eval | peak | vs plan |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  echo "| 0 | 900 | 1000 | 800 | 0 | 0 | 1000 | +0.0 % |"
  echo "[rank 0] host memory per rank (bytes handed out by the host arena: offloaded states and gradients; planner: 500)"
  echo "| rank | forward | backward | optimizer | checkpoint | eval | peak | vs plan |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  echo "[rank 0] | 0 | 400 | 480 | 505 | 0 | 0 | 505 | +1.0 % |"
elif [ "$device" = cuda ]; then
  echo '{"losses": [2.5, 2.0, 1.5000025]}' >"$out"
else
  echo '{"losses": [2.5, 2.0, 1.5]}' >"$out"
fi
EOF
chmod +x "$b/bin/train"
run train "$b" "${no_gpu[@]}"
expect_rc 0
expect_row train_gpu PASS "3 steps, loss 2.5000 -> 1.5000, max abs\\(cuda - cpu\\) 2.50e-06"
expect_row step_mfu MISSING "no .*llama_1b_bf16_h200/plan.json in the bundle"
mkdir -p "$b/data/llama_1b_bf16_h200"
echo '{}' >"$b/data/llama_1b_bf16_h200/plan.json"
run train_mfu "$b" "${no_gpu[@]}"
expect_rc 0
expect_row step_mfu PASS "MFU 51.3% \\(target 45 %\\), median step 214.30 ms, 508.2 TFLOP/s per rank"
# Offload on the GPU: the tiny plan's losses beside the CPU's, and the 1B
# step against its plan's predicted step and memory.
expect_row train_offload_gpu MISSING "no .*llama_offload_single/plan.json in the bundle"
mkdir -p "$b/data/llama_offload_single" "$b/data/llama_1b_bf16_offload_h200"
echo '{}' >"$b/data/llama_offload_single/plan.json"
echo '{"predicted": {"step_time_s": 0.25}}' >"$b/data/llama_1b_bf16_offload_h200/plan.json"
run train_offload "$b" "${no_gpu[@]}"
expect_rc 0
expect_row train_offload_gpu PASS "3 steps, loss 2.5000 -> 1.5000, max abs\\(cuda - cpu\\) 2.50e-06"
expect_row step_offload PASS \
  "median step 214.30 ms against 250.00 ms planned; device peak \\+0.0 % and host peak \\+1.0 % of the plan"
# Pipeline stages on two ranks: the losses of rank 0 beside the CPU's.
expect_row train_pipeline_gpu MISSING "no .*pipe_pp2/plan.json in the bundle"
mkdir -p "$b/data/pipe_pp2"
echo '{}' >"$b/data/pipe_pp2/plan.json"
run train_pipeline "$b" "${no_gpu[@]}"
expect_rc 0
expect_row train_pipeline_gpu PASS "3 steps, loss 2.5000 -> 1.5000, max abs\\(cuda - cpu\\) 2.50e-06"

# 5. The time budget is spent before a check starts: it is not run.
CASE="budget spent"
run budget "$tmp/mixed" "${no_gpu[@]}" GPU_CHECK_BUDGET_S=5
expect_rc 0
expect_row cuda_wiring SKIP "not run: the 5 s budget is spent"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
