#!/usr/bin/env bash
# Runs every GPU check from gpu_bundle/ (tests/gpu/build_bundle.sh) on the GPU
# machine, which has the driver, CUDA and NCCL but no Bazel, and ends with one
# report table. docs/gpu_checks.md describes the checks and the report.
#
#   bash tests/gpu/run_all.sh            # from the repository root
#
# Each check runs under its own `timeout`, within a total budget, and its log
# goes to $OUT/logs/<check>.log; the table goes to stdout and $OUT/report.md.
# A status is PASS, FAIL, SKIP (the binary says no GPU is usable, or the
# budget ran out) or MISSING (not in the bundle yet). Where nvidia-smi shows a
# GPU, a check that skips for want of one FAILs instead: the GPU was there
# and the check did not use it. Exits 1 if any check FAILs, else 0.
#
# Environment: OUT (default /tmp/loom_gpu_check), BUNDLE_DIR (default
# gpu_bundle), GPU_CHECK_BUDGET_S (default 330), NVIDIA_SMI (default
# nvidia-smi). tests/gpu/run_all_report_test.sh runs this script on a fake
# bundle of canned logs.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
bundle="$(realpath -m "${BUNDLE_DIR:-gpu_bundle}")"
out="$(realpath -m "${OUT:-/tmp/loom_gpu_check}")"
budget_s="${GPU_CHECK_BUDGET_S:-330}"
nvidia_smi="${NVIDIA_SMI:-nvidia-smi}"
mkdir -p "$out/logs"
rm -f "$out"/logs/*.log
report="$out/report.md"

now() { date +%s.%N; }
started="$(now)"
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------------------
# Parsing: each turns a check's exit code and log into STATUS and KEY (one
# line). run_all_report_test.sh feeds them canned logs.

# Why a binary could not start or run, from the tail of its log.
crash_reason() {
  local log="$1" rc="$2" line
  line="$(grep -m1 -E 'error while loading shared libraries|version .* not found|symbol lookup error|undefined symbol|cannot execute' "$log")"
  if [[ -n "$line" ]]; then echo "${line:0:160}"; return; fi
  case "$rc" in
    124 | 137) echo "timed out (killed by timeout)" ;;
    *) echo "exit $rc: $(grep -vE '^# run_all:|^\s*$' "$log" | tail -1 | cut -c1-140)" ;;
  esac
}

# A GoogleTest binary run with --gtest_brief=1.
parse_gtest() {
  local log="$1" rc="$2" ran passed skipped failed reason names
  ran="$(sed -nE 's/^\[==========\] ([0-9]+) tests? from .* ran\..*/\1/p' "$log" | tail -1)"
  passed="$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\..*/\1/p' "$log" | tail -1)"
  skipped="$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?[,.].*/\1/p' "$log" | tail -1)"
  failed="$(sed -nE 's/^\[  FAILED  \] ([0-9]+) tests?, listed below.*/\1/p' "$log" | tail -1)"
  skipped="${skipped:-0}" failed="${failed:-0}"
  if [[ -z "$ran" ]]; then
    STATUS=FAIL KEY="no GoogleTest summary: $(crash_reason "$log" "$rc")"
  elif [[ "$rc" -ne 0 || "$failed" -gt 0 ]]; then
    names="$(sed -nE 's/^\[  FAILED  \] ([A-Za-z_0-9]+\.[A-Za-z_0-9/]+)$/\1/p' "$log" | head -3 |
      paste -sd, -)"
    STATUS=FAIL KEY="$failed of $ran failed${names:+: $names}"
    [[ "$failed" -eq 0 ]] && KEY="exit $rc after $ran tests: $(crash_reason "$log" "$rc")"
  elif [[ "$ran" -eq 0 ]]; then
    STATUS=FAIL KEY="no test ran"
  elif [[ "$skipped" -gt 0 ]]; then
    # Any skipped case is a SKIP, not a PASS: the GPU part did not run
    # (and where a GPU is present, a SKIP becomes a FAIL below).
    reason="$(grep -m1 -A1 -E ': Skipped$' "$log" | tail -1)"
    if [[ "$skipped" -eq "$ran" ]]; then
      STATUS=SKIP KEY="all $ran skipped: ${reason:-no reason printed}"
    else
      STATUS=SKIP KEY="$skipped of $ran skipped (${passed:-?} passed): ${reason:-no reason printed}"
    fi
  else
    STATUS=PASS KEY="${passed:-?} of $ran passed"
  fi
}

# A tool that exits 3 with "<tool>: skipped: <reason>" where no GPU is usable.
# Sets STATUS (and KEY for a skip or a failure); the caller fills a pass's KEY.
parse_tool() {
  local log="$1" rc="$2" reason
  if [[ "$rc" -eq 3 ]] && reason="$(grep -m1 -E 'skipped: ' "$log")"; then
    STATUS=SKIP KEY="${reason#*skipped: }"
    KEY="${KEY:0:160}"
  elif [[ "$rc" -ne 0 ]]; then
    STATUS=FAIL KEY="$(crash_reason "$log" "$rc")"
  else
    STATUS=PASS KEY=""
  fi
}

# gemm_bench: its tables (our cuBLASLt GEMMs against plain cuBLAS, then
# attention) go to the report as they are; the key figure condenses the bf16
# rows: the range of ours/cuBLAS, the best % of peak, and the best attention
# fwd+bwd TFLOP/s. Columns are found by their header names.
parse_gemm_bench() {
  local log="$1" rc="$2"
  parse_tool "$log" "$rc"
  [[ "$STATUS" == PASS ]] || return 0
  GEMM_SUMMARY="$(grep -v '^# run_all:' "$log" | sed -n '/^# gemm_bench on/,$p')"
  [[ -n "$GEMM_SUMMARY" ]] || GEMM_SUMMARY="$(grep -v '^# run_all:' "$log" | tail -30)"
  KEY="$(awk -F'|' '
    function trim(s) { gsub(/%/, "", s); gsub(/^ +| +$/, "", s); return s }
    /^\|/ && /ratio/ { table = "gemm"; for (i = 2; i < NF; ++i) col[table, trim($i)] = i; next }
    /^\|/ && /fwd\+bwd/ { table = "attn"; for (i = 2; i < NF; ++i) col[table, trim($i)] = i; next }
    /^\| *---/ || !/^\|/ { next }
    table == "gemm" && trim($col["gemm", "type"]) == "bf16" {
      r = trim($col["gemm", "ratio"]) + 0; p = trim($col["gemm", "peak"]) + 0
      if (!n++ || r < lo) lo = r
      if (r > hi) hi = r
      if (p > peak) peak = p
    }
    table == "attn" && trim($col["attn", "type"]) == "bf16" {
      t = trim($col["attn", "fwd+bwd TF/s"]) + 0
      if (t > attn) attn = t
    }
    END {
      if (!n) exit
      printf "bf16 GEMM ours/cuBLAS %.2f-%.2f over %d shapes, best %.1f%% of peak", lo, hi, n, peak
      if (attn) printf "; attention bf16 fwd+bwd %.1f TFLOP/s", attn
    }' "$log")"
  [[ -n "$KEY" ]] || KEY="no bf16 row in gemm_bench's table (see the log)"
}

# comm-bench: the all_reduce row at the largest size, and the checks' verdict.
parse_comm_bench() {
  local log="$1" rc="$2" wrong row
  parse_tool "$log" "$rc"
  [[ "$STATUS" == PASS || "$rc" -eq 2 ]] || return 0
  wrong="$(awk '/Out of bounds values/ { n += $7 } END { print n + 0 }' "$log")"
  row="$(awk '$0 ~ /^# all_reduce$/ { on = 1; next } on && /^#/ && /Out of bounds/ { exit }
              on && $0 !~ /^#/ { last = $0 } END { print last }' "$log")"
  if [[ "$rc" -eq 2 || "$wrong" -ne 0 ]]; then
    STATUS=FAIL KEY="$wrong wrong elements (see the log)"
    return 0
  fi
  # Row: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong;
  # all_reduce is in place only, so its figures are columns 10-12.
  KEY="$(awk '{ printf "all_reduce %.0f MiB in place: %s us, algbw %s GB/s", $1 / 1048576, $10, $11 }' \
    <<<"$row"); 0 wrong"
}

# calibrate --device=gpu: the bf16 GEMM peak and the triad bandwidth.
parse_calibrate() {
  local log="$1" rc="$2" profile="$3" gemm triad
  parse_tool "$log" "$rc"
  [[ "$STATUS" == PASS ]] || return 0
  if [[ ! -s "$profile" ]]; then
    STATUS=FAIL KEY="exit 0 but no profile at $profile"
    return 0
  fi
  gemm="$(awk '$1 == "bf16" && $NF ~ /^[0-9.]+$/ && $NF > best { best = $NF; shape = $3 }
               END { if (best) printf "bf16 %s %.1f TFLOP/s", shape, best / 1000 }' "$log")"
  triad="$(sed -nE 's/^memory bandwidth \(triad.*: ([0-9.]+) GB\/s/\1/p' "$log" | tail -1)"
  KEY="${gemm:-no bf16 GEMM row}, triad ${triad:-?} GB/s; profile $(basename "$profile")"
}

# train: the losses of the CUDA run, beside the CPU run's.
parse_train() {
  local log="$1" rc="$2" gpu_losses="$3" cpu_losses="$4"
  parse_tool "$log" "$rc"
  [[ "$STATUS" == PASS ]] || return 0
  KEY="$(python3 - "$gpu_losses" "$cpu_losses" 2>&1 <<'EOF'
import json, math, sys
def losses(path):
    try:
        return json.load(open(path))["losses"]
    except Exception as e:
        return None
gpu, cpu = losses(sys.argv[1]), losses(sys.argv[2])
if not gpu:
    print("FAIL: no losses written by the CUDA run"); sys.exit()
if not all(math.isfinite(x) for x in gpu):
    print("FAIL: non-finite loss in the CUDA run: %s" % gpu); sys.exit()
text = "%d steps, loss %.4f -> %.4f" % (len(gpu), gpu[0], gpu[-1])
if cpu and len(cpu) == len(gpu):
    text += ", max abs(cuda - cpu) %.2e" % max(abs(a - b) for a, b in zip(gpu, cpu))
print(text)
EOF
)"
  if [[ "$KEY" == FAIL:* ]]; then STATUS=FAIL KEY="${KEY#FAIL: }"; fi
}

# train on the 1B plan: the median step and the MFU line train prints (the
# plan's nn FLOPs per rank over the median step, against the planned
# device's bf16 peak); the issue's target is 45 %.
parse_mfu() {
  local log="$1" rc="$2" step mfu
  parse_tool "$log" "$rc"
  [[ "$STATUS" == PASS ]] || return 0
  step="$(grep -m1 -oE 'median step [0-9.]+ ms' "$log")"
  mfu="$(grep -m1 -oE 'MFU [0-9.]+%: .* TFLOP/s per rank' "$log")"
  if [[ -z "$mfu" ]]; then
    STATUS=FAIL KEY="no MFU line in train's output (see the log)"
    return 0
  fi
  KEY="${mfu%%:*} (target 45 %), ${step}, $(grep -oE '[0-9.]+ TFLOP/s per rank' <<<"$mfu")"
}

# train on the 1B plan with offload: the median step against the plan's
# predicted step, and the measured device and host peaks against the
# plan's (the "vs plan" column of rank 0's row in train's two memory
# tables; docs/planner_offload.md).
parse_offload_step() {
  local log="$1" rc="$2" plan="$3" step planned device host
  parse_tool "$log" "$rc"
  [[ "$STATUS" == PASS ]] || return 0
  step="$(grep -m1 -oE 'median step [0-9.]+ ms' "$log")"
  planned="$(python3 -c 'import json, sys; print("%.2f" % (1e3 * json.load(open(sys.argv[1]))["predicted"]["step_time_s"]))' \
    "$plan" 2>/dev/null)"
  # The "vs plan" cell of rank 0's row under the table whose title holds
  # the given words (lines may carry a "[rank 0] " prefix).
  vs_plan() {
    awk -v title="$1" 'index($0, title) > 0 { on = 1; next }
      on && /^(\[rank [0-9]+\] )?\| 0 \|/ {
        n = split($0, cells, "|"); gsub(/^ +| +$/, "", cells[n - 1]); print cells[n - 1]; exit }' "$log"
  }
  device="$(vs_plan "memory per rank (bytes handed out by the caching allocator")"
  host="$(vs_plan "host memory per rank (bytes handed out by the host arena")"
  if [[ -z "$step" || -z "$host" ]]; then
    STATUS=FAIL KEY="no median step or no host memory table in train's output (see the log)"
    return 0
  fi
  KEY="${step} against ${planned:-?} ms planned; device peak ${device:-?} and host peak ${host} of the plan"
}

# ---------------------------------------------------------------------------
# Running.

checks=() statuses=() seconds=() keys=()
GEMM_SUMMARY=""
gpu_visible=0

record() {
  local name="$1" status="$2" secs="$3" key="$4"
  # A skip for want of a GPU where nvidia-smi shows one is a failure.
  if [[ "$status" == SKIP && "$gpu_visible" -eq 1 && "$key" != "not run:"* ]]; then
    status=FAIL key="skipped although nvidia-smi lists a GPU: $key"
  fi
  checks+=("$name") statuses+=("$status") seconds+=("$secs") keys+=("${key//|/\/}")
  printf '%-15s %-7s %6ss  %s\n' "$name" "$status" "$secs" "$key"
}

# Seconds the next check may take: its own bound, cut to what is left.
time_for() {
  awk -v want="$1" -v budget="$budget_s" -v start="$started" -v now="$(now)" \
    'BEGIN { left = budget - (now - start); t = (left < want ? left : want); printf "%d", t }'
}

# run_check NAME TIMEOUT PARSER [PARSER_ARGS...] -- COMMAND...
run_check() {
  local name="$1" want="$2" parser="$3" limit t0 rc
  shift 3
  local parser_args=()
  while [[ "$1" != -- ]]; do parser_args+=("$1"); shift; done
  shift
  local log="$out/logs/$name.log"
  limit="$(time_for "$want")"
  if [[ "$limit" -lt 10 ]]; then
    record "$name" SKIP 0 "not run: the ${budget_s} s budget is spent"
    return
  fi
  t0="$(now)"
  {
    echo "# run_all: $name: $*"
    echo "# run_all: timeout ${limit}s"
  } >"$log"
  timeout --kill-after=5 "$limit" env LD_LIBRARY_PATH="$libpath" "$@" >>"$log" 2>&1 </dev/null
  rc=$?
  echo "# run_all: exit $rc" >>"$log"
  STATUS="" KEY=""
  "$parser" "$log" "$rc" "${parser_args[@]}"
  if [[ "$rc" -eq 124 || "$rc" -eq 137 ]]; then
    STATUS=FAIL KEY="timed out after ${limit}s; last line: $(grep -v '^# run_all:' "$log" | tail -1 | cut -c1-100)"
  fi
  record "$name" "$STATUS" "$(elapsed "$t0")" "$KEY"
}

# Sets BINARY to the bundle's binary FILE for check NAME, or records the
# check MISSING (with build_bundle.sh's reason) and returns 1.
find_binary() {
  local name="$1" file="$2" why
  BINARY="$bundle/bin/$file"
  [[ -x "$BINARY" ]] && return 0
  why="$(grep -m1 -F ":$file:" "$bundle/NOT_BUILT" 2>/dev/null | sed 's/^[^:]*:[^:]*: //')"
  record "$name" MISSING 0 "$file is not in $(basename "$bundle")/bin${why:+ ($why)}"
  return 1
}

# ---------------------------------------------------------------------------
# Environment: the GPU, the CUDA libraries, the bundle's needs.

echo "== GPU check: bundle $bundle, logs in $out/logs, budget ${budget_s}s"
if [[ ! -d "$bundle" ]]; then
  echo "run_all: no bundle at $bundle: build it with tests/gpu/build_bundle.sh and carry it" \
    "(run tool: carry=[\"gpu_bundle\"]); every check is reported MISSING"
fi
manifest="$bundle/MANIFEST"
[[ -f "$manifest" ]] && grep -E '^(commit|built|needs|cuda):' "$manifest" | sed 's/^/   bundle /'

if command -v "$nvidia_smi" >/dev/null; then
  smi="$("$nvidia_smi" --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu \
    --format=csv,noheader 2>&1)"
  smi_rc=$?
else
  smi="not found" smi_rc=127
fi
if [[ $smi_rc -eq 0 && -n "$smi" ]]; then
  gpu_visible=1
  echo "   nvidia-smi: $(head -1 <<<"$smi") ($(wc -l <<<"$smi") GPU(s))"
else
  smi="no GPU visible ($nvidia_smi: $(head -1 <<<"${smi:-not found}" | cut -c1-100))"
  echo "   nvidia-smi: $smi"
fi

# Folders that may hold the CUDA libraries: the toolkit, the system, and
# PyTorch's wheels (nvidia/<lib>/lib in site-packages).
cuda_dirs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
  /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [[ -d "$d" ]] && cuda_dirs+=("$d")
done
while read -r d; do
  [[ -n "$d" && -d "$d" ]] && cuda_dirs+=("$d")
done < <(python3 - 2>/dev/null <<'EOF'
import glob, site, sys
roots = set(getattr(site, "getsitepackages", lambda: [])() + [site.getusersitepackages()])
roots |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
for root in sorted(roots):
    for lib in sorted(glob.glob(root + "/nvidia/*/lib")):
        print(lib)
EOF
)
needed_cuda="$(sed -nE 's/^cuda: //p' "$manifest" 2>/dev/null)"
[[ -n "$needed_cuda" ]] || needed_cuda="libcublas.so.13 libcublasLt.so.13 libnccl.so.2"
lib_dirs=()
for soname in $needed_cuda; do
  found=""
  for d in "${cuda_dirs[@]}"; do
    if [[ -e "$d/$soname" ]]; then found="$d"; break; fi
  done
  if [[ -n "$found" ]]; then
    version=""
    if [[ "$soname" == libnccl.so.* ]]; then
      # comm/nccl needs NCCL 2.28 or newer (ncclGather, ncclScatter, ncclAlltoAll).
      version="$(python3 - "$found/$soname" 2>/dev/null <<'EOF'
import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
n = v.value
print("NCCL %d.%d.%d%s" % (n // 10000, n // 100 % 100, n % 100,
                           "" if n >= 22800 else "; WARNING: older than the 2.28 comm/nccl needs"))
EOF
)"
    fi
    echo "   $soname: $found${version:+ ($version)}"
    [[ " ${lib_dirs[*]} " == *" $found "* ]] || lib_dirs+=("$found")
  else
    echo "   $soname: NOT FOUND in ${cuda_dirs[*]:-(no candidate folder)}; binaries that need it will FAIL to load"
  fi
done

# The bundle's libraries travel gzipped; they are unpacked outside $OUT, so
# that they do not travel back.
libdir="$bundle/lib"
if [[ -f "$bundle/lib.tar.gz" ]]; then
  unpacked="$(mktemp -d "${TMPDIR:-/tmp}/loom_gpu_lib.XXXXXX")"
  trap 'rm -rf "$unpacked"' EXIT
  if tar -xzf "$bundle/lib.tar.gz" -C "$unpacked" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$bundle/lib.tar.gz" "$unpacked"; then
    libdir="$unpacked/lib"
    libs=("$libdir"/*.so*)
    echo "   libraries: ${#libs[@]} unpacked from lib.tar.gz into $unpacked"
  else
    echo "   ERROR: cannot unpack $bundle/lib.tar.gz (tar and python3 both failed); binaries will not load"
  fi
fi

# The C and C++ runtimes are the machine's: say so up front when they are
# older than what the bundle was built against (MANIFEST "needs:").
needs="$(sed -nE 's/^needs: //p' "$manifest" 2>/dev/null)"
glibc_needed="$(grep -oE 'GLIBC_[0-9.]+ \([^)]*\)' <<<"$needs")"
glibc_here="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')"
if [[ -n "$glibc_needed" && -n "$glibc_here" ]]; then
  v="$(cut -d' ' -f1 <<<"$glibc_needed" | cut -d_ -f2)"
  if [[ "$(printf '%s\n%s\n' "$v" "$glibc_here" | sort -V | head -1)" != "$v" ]]; then
    echo "   WARNING: glibc $glibc_here here, but $glibc_needed needs $v: what loads it will FAIL" \
      "(the bundle was built on Debian 12; see MANIFEST for which binaries use each library)"
  fi
fi
glibcxx_needed="$(grep -oE 'GLIBCXX_[0-9.]+' <<<"$needs")"
system_cxx="$(ldconfig -p 2>/dev/null | awk '$1 == "libstdc++.so.6" && /x86-64/ && !p { p = $NF } END { print p }')"
if [[ -n "$glibcxx_needed" && -n "$system_cxx" ]] && ! grep -aq "$glibcxx_needed" "$system_cxx"; then
  echo "   WARNING: $system_cxx lacks $glibcxx_needed: the binaries will FAIL to load"
fi
libpath="$libdir"
for d in "${lib_dirs[@]}"; do libpath+=":$d"; done
libpath+="${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo

# ---------------------------------------------------------------------------
# The checks, in order.

for check in cuda_wiring:cuda_wiring_test nccl_backend:nccl_backend_test \
  object_collectives_cuda:object_collectives_cuda_test gpu_measure:gpu_measure_test cuda_kernels:cuda_kernels_test \
  cuda_kernel_set:cuda_kernel_set_test; do
  name="${check%%:*}"
  find_binary "$name" "${check#*:}" && run_check "$name" 90 parse_gtest -- "$BINARY" --gtest_brief=1
done

find_binary gemm_bench gemm_bench && run_check gemm_bench 120 parse_gemm_bench -- "$BINARY"

# The executor on CUDA against the CPU on the tiny Llama plans (f32, full
# recompute, two micro-steps and bf16); the test finds them under
# $TEST_SRCDIR/loom/... as under Bazel.
if find_binary executor_cuda executor_cuda_test; then
  srcdir="$(mktemp -d "${TMPDIR:-/tmp}/loom_gpu_srcdir.XXXXXX")"
  mkdir -p "$srcdir/loom/runtime/executor/testdata"
  for plan in llama_single llama_bf16_single llama_full_single accum_llama_single_m2 \
    llama_offload_single llama_bf16_offload_single; do
    ln -s "$bundle/data/$plan" "$srcdir/loom/runtime/executor/testdata/$plan"
  done
  run_check executor_cuda 120 parse_gtest -- env TEST_SRCDIR="$srcdir" "$BINARY" --gtest_brief=1
fi

if find_binary comm_bench_nccl comm-bench; then
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $((29500 + RANDOM % 2000)))"
  run_check comm_bench_nccl 90 parse_comm_bench -- \
    env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    "$BINARY" --backend=nccl --op=all -b 4K -e 128M -f 8 -n 20 -w 5 -c 1 --checks=off --timeout_s=60
fi

if find_binary calibrate_gpu calibrate; then
  profile="$out/h200_profile.json"
  rm -f "$profile"
  # Collectives are left out (--group_sizes=): they run over gloo between
  # CPU processes, which the CPU profile covers.
  run_check calibrate_gpu 90 parse_calibrate "$profile" -- "$BINARY" --device=gpu \
    --out="$profile" --group_sizes= --gemm_shapes=128,1024,4096 --repeats=3
fi

# train_on_gpu NAME PLAN_NAME [NPROC]: 10 steps of the bundle's plan on the
# GPU (NPROC ranks, one GPU each; default 1), beside the same run on the CPU
# (within the budget; without it the key figure just lacks the comparison).
train_on_gpu() {
  local name="$1" plan="$bundle/data/$2/plan.json" nproc="${3:-1}" flags limit
  find_binary "$name" train || return 0
  # absl's --helpfull exits 1; read its text, not its status.
  flags="$(env LD_LIBRARY_PATH="$libpath" timeout 20 "$BINARY" --helpfull 2>&1 </dev/null)"
  if ! grep -qE '^ +--device[ =]' <<<"$flags"; then
    record "$name" MISSING 0 "CUDA executor not built yet (train has no --device flag)"
    return 0
  fi
  if [[ ! -f "$plan" ]]; then
    record "$name" MISSING 0 "no $plan in the bundle (build_bundle.sh builds ${2}_plan)"
    return 0
  fi
  local common=(--plan="$plan" --steps=10 --nproc="$nproc" --progress=false --timeout_s=60)
  limit="$(time_for 60)"
  if [[ "$limit" -ge 10 ]]; then
    env LD_LIBRARY_PATH="$libpath" timeout "$limit" "$BINARY" "${common[@]}" --device=cpu \
      --losses_out="$out/${name}_cpu_losses.json" >"$out/logs/${name}_cpu.log" 2>&1 </dev/null
  fi
  run_check "$name" 120 parse_train "$out/${name}_losses.json" "$out/${name}_cpu_losses.json" -- \
    "$BINARY" "${common[@]}" --device=cuda --losses_out="$out/${name}_losses.json"
}

train_on_gpu train_gpu llama_single
# Offload: gradients to pinned host memory on the copy stream, AdamW on the
# host, parameters back.
train_on_gpu train_offload_gpu llama_offload_single
# Pipeline stages over NCCL: tiny Llama cut into pp 2 (1F1B over four
# micro-batches), one stage per GPU, each micro-batch's activations and
# their gradients sent point to point; its losses beside the same plan on
# two CPU processes over gloo. NCCL refuses two ranks on one device, so one
# GPU is not enough.
gpus=0
[[ "$gpu_visible" -eq 1 ]] && gpus="$(grep -c . <<<"$smi")"
if [[ "$gpu_visible" -eq 1 && "$gpus" -lt 2 ]]; then
  record train_pipeline_gpu SKIP 0 "not run: pp 2 over NCCL needs 2 GPUs; nvidia-smi lists $gpus"
else
  train_on_gpu train_pipeline_gpu pipe_pp2 2
fi

# The MFU target: a 1.07B-parameter Llama in bf16 (f32 master copies) on one
# GPU, batch 8 x 2048 tokens, 8 steps; checks off so they cost nothing.
if find_binary step_mfu train; then
  plan="$bundle/data/llama_1b_bf16_h200/plan.json"
  if [[ ! -f "$plan" ]]; then
    record step_mfu MISSING 0 "no $plan in the bundle (build_bundle.sh builds llama_1b_bf16_h200_plan)"
  else
    run_check step_mfu 150 parse_mfu -- "$BINARY" --plan="$plan" --steps=8 --nproc=1 --device=cuda \
      --progress=false --timeout_s=120 --comm_checks=off
  fi
fi

# Offload's price measured: the 1B step with its AdamW states in pinned
# host memory, against the plan's predicted step and memory.
if find_binary step_offload train; then
  plan="$bundle/data/llama_1b_bf16_offload_h200/plan.json"
  if [[ ! -f "$plan" ]]; then
    record step_offload MISSING 0 "no $plan in the bundle (build_bundle.sh builds llama_1b_bf16_offload_h200_plan)"
  else
    run_check step_offload 150 parse_offload_step "$plan" -- "$BINARY" --plan="$plan" --steps=6 \
      --nproc=1 --device=cuda --progress=false --timeout_s=120 --comm_checks=off
  fi
fi

# ---------------------------------------------------------------------------
# The report.

count() { local n=0 s; for s in "${statuses[@]}"; do [[ "$s" == "$1" ]] && n=$((n + 1)); done; echo $n; }
n_pass=$(count PASS) n_fail=$(count FAIL) n_skip=$(count SKIP) n_missing=$(count MISSING)
if [[ $n_fail -gt 0 ]]; then
  verdict="FAILED: $n_fail of ${#checks[@]} checks failed ($n_pass passed, $n_skip skipped, $n_missing missing)"
elif [[ $n_pass -eq 0 && $n_skip -gt 0 ]]; then
  verdict="no GPU: $n_skip checks skipped ($n_missing missing, none failed)"
else
  verdict="passed: $n_pass passed, $n_skip skipped, $n_missing missing, none failed"
fi
{
  echo "# GPU check report"
  echo
  echo "- when: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(elapsed "$started") s in all (budget ${budget_s} s)"
  echo "- host: $(uname -n); GPU: $(head -1 <<<"$smi")"
  [[ -f "$manifest" ]] && echo "- bundle: $(sed -nE 's/^commit: //p' "$manifest")"
  echo
  echo "| check | status | seconds | key figure |"
  echo "| --- | --- | ---: | --- |"
  for i in "${!checks[@]}"; do
    echo "| ${checks[$i]} | ${statuses[$i]} | ${seconds[$i]} | ${keys[$i]} |"
  done
  echo
  if [[ -n "$GEMM_SUMMARY" ]]; then
    echo "## gemm_bench"
    echo
    echo "$GEMM_SUMMARY"
    echo
  fi
  echo "$verdict"
} >"$report"
echo
cat "$report"
[[ $n_fail -eq 0 ]]
