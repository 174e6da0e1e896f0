#!/usr/bin/env bash
# Runs every example under the launcher and compares what its ranks print,
# line by line, with expected/<case>.txt. Ranks print concurrently, so both
# sides are sorted first (each line carries its "[rank R] " prefix).
set -uo pipefail
launch="$1" all_reduce="$2" object_collectives="$3" futures="$4" expected="$5"
failures=0

check() {  # check CASE NPROC BINARY [ARGS...]
  local name="$1" nproc="$2"; shift 2
  local out code
  out=$("$launch" --nproc="$nproc" --timeout=120s -- "$@" 2>&1); code=$?
  if [[ $code -ne 0 ]]; then
    echo "FAIL $name: exit $code, output:"; echo "$out"; failures=$((failures + 1)); return
  fi
  if ! diff <(LC_ALL=C sort "$expected/$name.txt") <(LC_ALL=C sort <<<"$out"); then
    echo "FAIL $name: output differs (< expected, > got)"; failures=$((failures + 1)); return
  fi
  echo "ok   $name ($(wc -l <"$expected/$name.txt") lines)"
}

check all_reduce_sum 2 "$all_reduce" sum
check all_reduce_product 2 "$all_reduce" product
check all_reduce_group_max 3 "$all_reduce" group_max
check all_reduce_average_accuracy 4 "$all_reduce" average_accuracy
check object_collectives 3 "$object_collectives"
check futures 2 "$futures"
exit $((failures > 0))
