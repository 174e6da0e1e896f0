#!/usr/bin/env bash
# Runs the nccl backend's GPU tests on a GPU machine that has no Bazel (they
# skip on the build machines). Two steps:
#
#   here:  bazel build //comm/nccl:nccl_backend_test
#          comm/nccl/gpu_check.sh pack BAZEL_BIN DIR
#            copies the test binary and the shared libraries it needs that a
#            CUDA machine may lack (Abseil, GoogleTest, Bazel's own) into DIR
#   there: comm/nccl/gpu_check.sh run DIR
#            runs it against that machine's driver and NCCL (libnccl.so.2 from
#            /usr/local/cuda/lib64 or a Python nvidia-nccl package), and
#            fails if any case fails or skips: a skip there means the GPU
#            was not usable.
#
# BAZEL_BIN is `bazel info bazel-bin` (with the same --output_base). NCCL
# itself (over 200 MB) and the C/C++ runtime are taken from the GPU machine.
set -euo pipefail

tests=(nccl_backend_test)

pack() {
  local bazel_bin="$1" dir="$2"
  mkdir -p "$dir/bin" "$dir/lib"
  for test in "${tests[@]}"; do
    local binary="$bazel_bin/comm/nccl/$test"
    cp "$binary" "$dir/bin/"
    # Every resolved library except the system's C/C++ runtime, the driver
    # and NCCL.
    ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
      grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libnccl)\.so' |
      while read -r library; do cp -L "$library" "$dir/lib/"; done
  done
  echo "packed into $dir ($(du -sh "$dir" | cut -f1)); run: comm/nccl/gpu_check.sh run $dir"
}

find_nccl() {
  local candidate
  for candidate in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' \
      2>/dev/null); do
    if [ -e "$candidate/libnccl.so.2" ]; then
      echo "$candidate"
      return
    fi
  done
  echo "no libnccl.so.2 found in /usr/local/cuda or a Python nvidia-nccl package" >&2
  return 1
}

run() {
  local dir="$1" nccl_dir failures=0
  nccl_dir="$(find_nccl)"
  echo "NCCL from $nccl_dir"
  for test in "${tests[@]}"; do
    local log="$dir/$test.log"
    if LD_LIBRARY_PATH="$dir/lib:$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$dir/bin/$test" 2>&1 | tee "$log"; then
      if grep -q '^\[  SKIPPED \]' "$log"; then
        echo "FAILED: $test skipped cases on a GPU machine (see the reasons above)"
        failures=$((failures + 1))
      fi
    else
      echo "FAILED: $test"
      failures=$((failures + 1))
    fi
  done
  [ "$failures" -eq 0 ] && echo "gpu check passed: ${tests[*]}"
  [ "$failures" -eq 0 ]
}

case "${1:-}" in
  pack) pack "$2" "$3" ;;
  run) run "$2" ;;
  *)
    echo "usage: $0 pack BAZEL_BIN DIR | run DIR" >&2
    exit 2
    ;;
esac
