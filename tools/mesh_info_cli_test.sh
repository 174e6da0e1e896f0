#!/usr/bin/env bash
# End-to-end check of the mesh-info command line: a good run prints the
# table, bad input exits 2 with a message that names the problem.
set -uo pipefail
tool="$1"
failures=0
expect() {  # expect NAME EXIT_CODE PATTERN -- ARGS...
  local name="$1" want_code="$2" pattern="$3"; shift 4
  local out code
  out=$("$tool" "$@" 2>&1); code=$?
  if [[ $code -ne $want_code ]] || ! grep -qE "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $code (want $want_code), output:"; echo "$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
expect good-run 0 'tp +8 +2 +no +nvlink' -- --mesh=dp=2,tp=8 --topology=dgx-h100
expect default-run 0 'mesh<dp=2, tp=4>' --
expect bad-mesh 2 "mesh-info: .*'tp=abc'|mesh-info: .*abc" -- --mesh=dp=2,tp=abc
expect bad-topology 2 'unknown topology .tpu.' -- --mesh=2x4 --topology=tpu
expect not-multiple-of-8 2 'multiple of 8' -- --mesh=dp=3 --topology=hgx-h200
expect help-lists-flags 1 'topology \(cluster the mesh' -- --help
exit $((failures > 0))
