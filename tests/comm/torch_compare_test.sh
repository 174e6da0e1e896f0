#!/usr/bin/env bash
# Runs the same collective calls through torch.distributed (gloo, Debian's
# torch on /usr/bin/python3) and through loom's ProcessGroup on 3 and 4
# ranks, and requires bit-identical outputs.
set -euo pipefail
reference="$1" compare="$2"
out="${TEST_TMPDIR:-$(mktemp -d)}"
for ranks in 3 4; do
  /usr/bin/python3 "$reference" "$ranks" "$out/reference_$ranks.json" 2>&1 | grep -v -i warn
  "$compare" "$out/reference_$ranks.json"
done
