#!/usr/bin/env bash
# Runs one lit test under `bazel test`: builds a one-file lit suite in the
# test's temp dir (shared lit.cfg.py + the test file) and puts every tool's
# folder on PATH, so RUN lines name tools by their plain names.
#
#   lit_runner.sh LIT_CFG TEST_FILE LIT_AND_TOOL_PATHS...
set -euo pipefail

cfg="$1"; test_file="$2"; shift 2
lit=""
tool_path=""
for tool in "$@"; do
  dir="$(cd "$(dirname "$tool")" && pwd)"
  tool_path="$dir:$tool_path"
  [[ "$(basename "$tool")" == "lit" ]] && lit="$tool"
done
if [[ -z "$lit" ]]; then
  echo "lit_runner: lit was not among the tools: $*" >&2
  exit 1
fi

suite="${TEST_TMPDIR:-$(mktemp -d)}/lit_suite"
mkdir -p "$suite"
cp "$cfg" "$suite/lit.cfg.py"
cp "$test_file" "$suite/$(basename "$test_file")"

export PATH="$tool_path$PATH"
exec /usr/bin/python3 "$lit" -v "$suite/$(basename "$test_file")"
