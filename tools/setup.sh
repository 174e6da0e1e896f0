#!/usr/bin/env bash
# Installs every system package the build and the tests need, from Debian's
# archive only, and checks the CUDA toolkit that Debian does not ship.
# Idempotent: a second run installs nothing and only re-checks.
#
#   tools/setup.sh            install what is missing, then check
#   tools/setup.sh --check    only check; exit 1 listing what is missing
set -euo pipefail

# One line per need; the package names are Debian 12 (bookworm) names.
readonly PACKAGES=(
  bazel-bootstrap          # Bazel 4.2.3, WORKSPACE mode
  libmlir-22-dev           # MLIR 22 headers and libMLIR.so
  mlir-22-tools            # mlir-tblgen, mlir-opt
  llvm-22-dev              # LLVM 22 headers and libLLVM-22.so
  llvm-22-tools            # FileCheck, lit, not, split-file
  libabsl-dev              # Abseil (Status, flags, strings, synchronization)
  libgtest-dev libgmock-dev
  libbenchmark-dev         # Google Benchmark
  libopenmpi-dev openmpi-bin
  iproute2                 # ip and ss: the two-host test's network namespaces
  libgloo-dev              # Gloo collectives (PyTorch's CPU engine)
  libopenblas-dev          # CPU GEMM
  nlohmann-json3-dev       # plan.json reader/writer
  python3-torch            # reference peer for tests (CPU, gloo)
  chromium                 # headless browser: train_report_browser_test draws the report
)
readonly CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

missing_packages() {
  local pkg
  for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      echo "$pkg"
    fi
  done
}

mapfile -t missing < <(missing_packages)
if ((${#missing[@]} > 0)); then
  if ((check_only)); then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run tools/setup.sh (as root) to install them" >&2
    exit 1
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to install: ${missing[*]} (rerun with sudo)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit is not a Debian package here; GPU code must still compile
# everywhere, so its absence is an error, not a warning.
cuda_problems=()
[[ -x "$CUDA_HOME/bin/nvcc" ]] || cuda_problems+=("$CUDA_HOME/bin/nvcc")
[[ -f "$CUDA_HOME/include/nccl.h" ]] || cuda_problems+=("$CUDA_HOME/include/nccl.h")
[[ -e "$CUDA_HOME/lib64/libnccl.so" ]] || cuda_problems+=("$CUDA_HOME/lib64/libnccl.so")
[[ -e "$CUDA_HOME/lib64/libcublas.so" ]] || cuda_problems+=("$CUDA_HOME/lib64/libcublas.so")
[[ -e "$CUDA_HOME/lib64/libcudart.so" ]] || cuda_problems+=("$CUDA_HOME/lib64/libcudart.so")
if ((${#cuda_problems[@]} > 0)); then
  cat >&2 <<MSG
setup: the CUDA toolkit is incomplete; missing: ${cuda_problems[*]}
setup: install the CUDA 13 toolkit (nvcc, cudart, cuBLAS) and NCCL 2.x into
setup: $CUDA_HOME (NVIDIA's runfile or network repo), or point CUDA_HOME at an
setup: existing install and make /usr/local/cuda a symlink to it.
MSG
  exit 1
fi

# Tools the build calls by absolute path.
for tool in /usr/bin/bazel /usr/lib/llvm-22/bin/mlir-tblgen /usr/lib/llvm-22/bin/FileCheck \
            /usr/lib/llvm-22/bin/lit /usr/bin/mpirun; do
  if [[ ! -x "$tool" ]]; then
    echo "setup: $tool is missing after install; check the packages above" >&2
    exit 1
  fi
done
echo "setup: ok (bazel-bootstrap $(dpkg-query -W -f='${Version}' bazel-bootstrap)," \
  "mlir $(dpkg-query -W -f='${Version}' libmlir-22-dev), CUDA $("$CUDA_HOME/bin/nvcc" --version | grep -o 'release [0-9.]*'))"
