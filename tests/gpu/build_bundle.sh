#!/usr/bin/env bash
# Builds the GPU-facing binaries with `bazel build -c opt` and packs them into
# gpu_bundle/ at the repository root, for tests/gpu/run_all.sh on the GPU
# machine (no Bazel, no Debian dev libraries there). docs/gpu_checks.md
# describes the whole round trip.
#
#   tests/gpu/build_bundle.sh            # from the repository root, here
#
# gpu_bundle/ then holds:
#   bin/        the binaries, stripped
#   lib.tar.gz  lib/: every shared library they need that the GPU machine
#               lacks (Abseil, Gloo, Open MPI, OpenBLAS, Bazel's _solib_k8
#               ones), stripped and gzipped (OpenBLAS alone is 35 MiB); never
#               glibc, libstdc++, libgcc_s, libm, the driver or any CUDA
#               library (cuBLAS/cuBLASLt, NCCL, cuDNN): those come from there
#   data/       the single-rank plans (f32, f32 with full recompute, two
#               micro-steps, bf16, f32 and bf16 with offloaded optimizer
#               states, the 1B step with and without offload) that
#               executor_cuda_test and the GPU training slots run, and a
#               pp 2 plan for two GPUs
#   MANIFEST    file, size, sha256 and the commit it was built from, the
#               CUDA libraries the machine must have, and the newest glibc
#               and libstdc++ symbol versions the files ask for
#   NOT_BUILT   targets that do not exist yet or failed to build, with why
#
# Environment: BAZEL (default bazel), BAZEL_STARTUP (startup flags, e.g.
# --output_base=...), BUNDLE_DIR (default gpu_bundle), BUNDLE_LIMIT_MIB
# (default 56: a device run carries 64 MiB with the working tree).
set -euo pipefail

cd "$(dirname "$0")/../.."
bazel_cmd=("${BAZEL:-bazel}")
if [[ -n "${BAZEL_STARTUP:-}" ]]; then
  read -r -a startup <<<"$BAZEL_STARTUP"
  bazel_cmd+=("${startup[@]}")
fi
bundle="${BUNDLE_DIR:-gpu_bundle}"
limit_mib="${BUNDLE_LIMIT_MIB:-56}"
build_flags=(-c opt --experimental_convenience_symlinks=ignore)

# Binary targets; each lands in bin/ under its target name. Order does not
# matter here; run_all.sh decides what runs when.
binaries=(
  //tests/deps:cuda_wiring_test
  //comm/nccl:nccl_backend_test
  //comm:object_collectives_cuda_test
  //tools/calibrate:gpu_measure_test
  //runtime/kernels/cuda:cuda_kernels_test
  //runtime/kernels/cuda:gemm_bench
  //runtime/executor:cuda_kernel_set_test
  //runtime/executor:executor_cuda_test
  //tools/comm_bench:comm-bench
  //tools/calibrate:calibrate
  //tools/launch:launch
  //tools/train:train
)
# Data: the plans executor_cuda_test and train read. Plan NAME is built by
# //runtime/executor/testdata:NAME_plan into
# runtime/executor/testdata/NAME/plan.json and goes to data/NAME/plan.json.
plans=(llama_single llama_bf16_single llama_full_single accum_llama_single_m2 llama_1b_bf16_h200
  llama_offload_single llama_bf16_offload_single llama_1b_bf16_offload_h200 pipe_pp2)
plan_labels=()
for plan in "${plans[@]}"; do plan_labels+=("//runtime/executor/testdata:${plan}_plan"); done

die() { echo "build_bundle: error: $*" >&2; exit 1; }

# "//a/b:c" -> "a/b/c" (the output path under bazel-bin).
label_path() { local l="${1#//}"; echo "${l%%:*}/${l##*:}"; }

# Which of the wanted targets exist at all (another change may not have
# added a package yet).
existing=()
not_built=()
for target in "${binaries[@]}" "${plan_labels[@]}"; do
  if "${bazel_cmd[@]}" query "$target" >/dev/null 2>&1; then
    existing+=("$target")
  else
    not_built+=("$target: no such target in this tree (bazel query found nothing)")
  fi
done
[[ ${#existing[@]} -gt 0 ]] || die "none of the targets exist; is this the Loom repository root?"

echo "build_bundle: bazel build -c opt ${existing[*]}"
built=()
if "${bazel_cmd[@]}" build "${build_flags[@]}" --keep_going "${existing[@]}"; then
  built=("${existing[@]}")
else
  # Some failed: find which, one at a time (the rest is cached).
  for target in "${existing[@]}"; do
    if "${bazel_cmd[@]}" build "${build_flags[@]}" "$target" >/dev/null 2>&1; then
      built+=("$target")
    else
      not_built+=("$target: does not build (see: bazel build -c opt $target)")
    fi
  done
fi
bazel_bin="$("${bazel_cmd[@]}" info "${build_flags[@]}" bazel-bin)"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/data"

# Libraries that stay behind. The C and C++ runtimes are the machine's (the
# MANIFEST says which versions the files need); CUDA, the driver and NCCL are
# too big to carry and must match the machine's driver.
system_re='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so'
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvidia|libnvrtc|libnvJitLink|libcufft|libcurand|libcusparse|libcusolver|libnvToolsExt)[.-]'
heavy_re='^lib(LLVM|MLIR|clang|clang-cpp|mlir)'

declare -A lib_src=()     # soname -> resolved path
declare -A lib_users=()   # soname -> binaries that need it
declare -A cuda_libs=()   # sonames the GPU machine must provide
heavy=()
for target in "${built[@]}"; do
  [[ "$target" == //runtime/executor/testdata:* ]] && continue
  src="$bazel_bin/$(label_path "$target")"
  [[ -f "$src" ]] || die "$target built but $src is missing"
  name="${target##*:}"
  cp "$src" "$bundle/bin/$name"
  chmod u+w "$bundle/bin/$name"
  while read -r soname arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    [[ "$path" == "not" ]] && die "$target needs $soname, which is not found here: install it (tools/setup.sh)"
    [[ "$soname" =~ $system_re ]] && continue
    if [[ "$soname" =~ $cuda_re || "$path" == /usr/local/cuda* ]]; then
      cuda_libs["$soname"]=1
      continue
    fi
    if [[ "$soname" =~ $heavy_re ]]; then
      heavy+=("$target -> $soname")
      continue
    fi
    lib_src["$soname"]="$path"
    lib_users["$soname"]+="$name "
  done < <(ldd "$src")
done

if [[ ${#heavy[@]} -gt 0 ]]; then
  {
    echo "build_bundle: error: these binaries link LLVM/MLIR (hundreds of MB; the GPU machine has none):"
    printf '  %s\n' "${heavy[@]}" | sort -u
    for target in $(printf '%s\n' "${heavy[@]}" | cut -d' ' -f1 | sort -u); do
      echo "  how $target reaches it:"
      "${bazel_cmd[@]}" query "somepath($target, @llvm//...)" 2>/dev/null | sed 's/^/    /'
    done
    echo "  fix: keep the runtime side free of planner/ (the runtime reads plan.json, README 'Layout')"
  } >&2
  exit 1
fi

for soname in "${!lib_src[@]}"; do
  cp -L "${lib_src[$soname]}" "$bundle/lib/$soname"
  chmod u+w "$bundle/lib/$soname"
done
find "$bundle/bin" "$bundle/lib" -type f -exec strip --strip-unneeded {} +

for plan in "${plans[@]}"; do
  if [[ " ${built[*]} " == *" //runtime/executor/testdata:${plan}_plan "* ]]; then
    mkdir -p "$bundle/data/$plan"
    cp "$bazel_bin/runtime/executor/testdata/$plan/plan.json" "$bundle/data/$plan/plan.json"
  fi
done

# The newest symbol version of PREFIX (GLIBC, GLIBCXX) any file asks of the
# machine's C or C++ runtime, and the first file that asks it, as
# "GLIBC_2.36 (lib/libx.so)"; run_all.sh compares it with the machine's.
max_version() {
  local file v best="" who=""
  while read -r file; do
    v="$(objdump -T "$bundle/$file" 2>/dev/null | grep -o "$1_[0-9][0-9.]*" | sort -uV | tail -1)"
    [[ -z "$v" ]] && continue
    if [[ -z "$best" || "$(printf '%s\n%s\n' "$best" "$v" | sort -V | tail -1)" != "$best" ]]; then
      best="$v" who="$file"
    fi
  done < <(cd "$bundle" && find bin lib -type f | sort)
  echo "$best ($who)"
}
glibc_needed="$(max_version GLIBC)"
glibcxx_needed="$(max_version GLIBCXX)"

commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit+=" (plus uncommitted changes)"
fi
{
  echo "# gpu_bundle: built by tests/gpu/build_bundle.sh; run there with: bash tests/gpu/run_all.sh"
  echo "commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) with bazel build ${build_flags[*]}"
  echo "needs: $glibc_needed $glibcxx_needed"
  echo "cuda: $(printf '%s\n' "${!cuda_libs[@]}" | sort | paste -sd' ' -)"
  echo "# size_bytes  sha256  file  (libraries: needed by)"
  (cd "$bundle" && find bin lib data -type f | sort) | while read -r f; do
    users=""
    [[ "$f" == lib/*.so* ]] && users="  (${lib_users[${f#lib/}]% })"
    printf '%10d  %s  %s%s\n' "$(stat -c %s "$bundle/$f")" \
      "$(sha256sum "$bundle/$f" | cut -d' ' -f1)" "$f" "$users"
  done
} >"$bundle/MANIFEST"
unpacked=$(du -sb "$bundle/lib" | cut -f1)
tar -C "$bundle" -cf - lib | gzip -9 >"$bundle/lib.tar.gz"
rm -rf "${bundle:?}/lib"
printf '%10d  %s  %s\n' "$(stat -c %s "$bundle/lib.tar.gz")" \
  "$(sha256sum "$bundle/lib.tar.gz" | cut -d' ' -f1)" "lib.tar.gz (holds lib/ above)" >>"$bundle/MANIFEST"
: >"$bundle/NOT_BUILT"
for line in "${not_built[@]}"; do echo "$line" >>"$bundle/NOT_BUILT"; done

total=$(du -sb "$bundle" | cut -f1)
total_mib=$(awk -v b="$total" 'BEGIN { printf "%.1f", b / 1048576 }')
if (( total > limit_mib * 1048576 )); then
  {
    echo "build_bundle: error: $bundle is $total_mib MiB, over the $limit_mib MiB a device run may carry."
    echo "  biggest files:"
    (cd "$bundle" && find . -type f -printf '%s %P\n' | sort -rn | head -10 |
      awk '{ printf "    %8.1f MiB  %s\n", $1 / 1048576, $2 }')
    echo "  fix: drop a binary from the list in $0, or link the big library dynamically from the machine"
  } >&2
  exit 1
fi

echo "build_bundle: $bundle: $total_mib MiB to carry (limit $limit_mib), ${#built[@]} targets built," \
  "${#lib_src[@]} libraries ($(awk -v b="$unpacked" 'BEGIN { printf "%.1f", b / 1048576 }') MiB" \
  "unpacked, in lib.tar.gz), needs $glibc_needed $glibcxx_needed"
echo "build_bundle: commit $commit"
if [[ ${#not_built[@]} -gt 0 ]]; then
  echo "build_bundle: not built (run_all.sh reports these MISSING):"
  printf '  %s\n' "${not_built[@]}"
fi
echo "build_bundle: next, on the GPU machine: bash tests/gpu/run_all.sh (carry $bundle)"
