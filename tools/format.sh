#!/usr/bin/env bash
# Formats the project's C++ and CUDA sources with clang-format 22 and the
# root .clang-format (docs/build.md, "Formatting"); third_party/ is left as
# it is. With --check, changes nothing and exits 1 listing the files that
# are not formatted.
#
#   tools/format.sh            format every tracked .cc, .h, .cu, .cuh
#   tools/format.sh --check    only report
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format-22}"
if ! command -v "$clang_format" >/dev/null; then
  echo "format: $clang_format not found; install it with: apt-get install clang-format-22" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/')
if [[ "${1:-}" == "--check" ]]; then
  unformatted=()
  for f in "${files[@]}"; do
    "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
  done
  if ((${#unformatted[@]} > 0)); then
    printf 'format: not formatted: %s\n' "${unformatted[@]}" >&2
    echo "format: run tools/format.sh to fix" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
  exit 0
fi
"$clang_format" -i "${files[@]}"
echo "format: formatted ${#files[@]} files"
