#!/usr/bin/env bash
# Runs every example under the launcher and compares what its ranks print,
# line by line, with expected/<case>.txt. Ranks print concurrently, so both
# sides are sorted first (each line carries its "[rank R] " prefix).
set -uo pipefail
launch="$1" bin="$2" expected="$3"
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

check all_reduce_sum 2 "$bin/all_reduce" sum
check all_reduce_product 2 "$bin/all_reduce" product
check all_reduce_group_max 3 "$bin/all_reduce" group_max
check all_reduce_average_accuracy 4 "$bin/all_reduce" average_accuracy
check object_collectives 3 "$bin/object_collectives"
check futures 2 "$bin/futures"
check tensors 2 "$bin/tensors"
check recv_any_source 3 "$bin/recv_any_source"
check uneven_all_gather 3 "$bin/uneven_all_gather"
check subgroups 4 "$bin/subgroups"
check join 3 "$bin/join"
check device_mesh 4 "$bin/device_mesh"
exit $((failures > 0))
