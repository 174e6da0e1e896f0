#!/usr/bin/env bash
# Runs comm-bench on 2 ranks with a tiny checked sweep: every op under the
# launcher (gloo, checks at each level), gloo --direct, the nccl backend
# (its skip without a GPU, or 1 rank on one), and the mpi backend under
# mpirun. Each table must have its rows and no wrong element.
set -uo pipefail
launch="$1"
bench="$2"
sweep=(-b 1K -e 8K -n 2 -w 1 -c 1)
failures=0

fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# check NAME OUTPUT EXIT_CODE OPS...: exit 0, each op's table with 4 rows
# (1K..8K) whose #wrong cells are 0 or n/a, and the OK footer.
check() {
  local name="$1" out="$2" code="$3"; shift 3
  if [[ $code -ne 0 ]]; then
    fail "$name: exit $code, output:"; echo "$out"; return
  fi
  local op rows
  for op in "$@"; do
    # The rows of this op's table: from its "# op" line to its footer.
    rows=$(awk -v op="$op" '$0 ~ "# " op "$" {on=1; next} on && /Out of bounds/ {print; exit}
                            on && $0 !~ /#/ {print}' <<<"$out")
    if [[ $(grep -c . <<<"$rows") -ne 5 ]] || ! grep -q "Out of bounds values : 0 OK" <<<"$rows"; then
      fail "$name: table of $op lacks its 4 rows or OK footer, output:"; echo "$out"; return
    fi
    # Columns 9 and 13 are #wrong out of place and in place.
    if awk '!/Out of bounds/ && (($9 != "0" && $9 != "n/a") || ($13 != "0" && $13 != "n/a")) {bad=1}
            END {exit !bad}' < <(sed 's/^\[rank 0\] //' <<<"$rows"); then
      fail "$name: $op has wrong elements:"; echo "$rows"; return
    fi
  done
  echo "ok   $name"
}

all_ops=(all_reduce all_gather reduce_scatter broadcast all_to_all reduce gather scatter)

out=$("$launch" --nproc=2 --timeout=60s -- "$bench" "${sweep[@]}" --op=all 2>&1)
check "gloo, every op" "$out" $? "${all_ops[@]}"
grep -q "checks cheap (group default)" <<<"$out" || fail "header lacks the default checks level"

for level in off detail; do
  out=$("$launch" --nproc=2 --timeout=60s -- "$bench" "${sweep[@]}" --op=all_reduce \
        --checks=$level 2>&1)
  check "gloo, checks $level" "$out" $? all_reduce
  grep -q "checks $level (--checks)" <<<"$out" || fail "header lacks checks $level"
done

out=$("$launch" --nproc=2 --timeout=60s -- "$bench" "${sweep[@]}" --op=all_gather --direct 2>&1)
check "gloo --direct" "$out" $? all_gather

out=$("$launch" --nproc=2 --timeout=60s -- "$bench" "${sweep[@]}" --op=gather --direct 2>&1)
[[ $? -ne 0 ]] && grep -q "direct covers all_reduce, all_gather and broadcast" <<<"$out" ||
  fail "--direct on gather: want a refusal, got: $out"

# Flags the checker cannot honour are refused before anything runs.
out=$("$launch" --nproc=2 --timeout=60s -- "$bench" "${sweep[@]}" -d i32 -o avg 2>&1)
[[ $? -ne 0 ]] && grep -q "avg needs a floating-point" <<<"$out" || fail "-o avg -d i32: $out"

# --backend=nccl: CUDA buffers. Where no GPU is usable (every build machine)
# it must skip with exit 3 and the reason, before it looks for a launcher;
# where one is, a world-size-1 sweep must check out (NCCL cannot put two
# ranks on one GPU).
if out=$(timeout 60 "$bench" "${sweep[@]}" --op=all --backend=nccl 2>&1); then code=0; else code=$?; fi
if [[ $code -eq 3 ]]; then
  grep -q "^comm-bench: skipped: no usable GPU: " <<<"$out" ||
    fail "--backend=nccl without a GPU: exit 3 but no 'comm-bench: skipped: no usable GPU: ' line: $out"
  echo "ok   nccl skipped without a GPU: ${out#comm-bench: skipped: }"
else
  out=$("$launch" --nproc=1 --timeout=60s -- "$bench" "${sweep[@]}" --op=all --backend=nccl 2>&1)
  check "nccl, 1 rank, every op" "$out" $? "${all_ops[@]}"
fi
if out=$("$bench" --backend=nccl --direct 2>&1) ||
  ! grep -q "direct calls Gloo; use it with --backend=gloo" <<<"$out"; then
  fail "--direct with nccl: want a refusal, got: $out"
fi

source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(mpirun "${mpirun_flags[@]}" --timeout 60 -np 2 -x MASTER_PORT="$port" \
      "$bench" "${sweep[@]}" --op=all --backend=mpi 2>&1)
check "mpi under mpirun, every op" "$out" $? "${all_ops[@]}"

# --help lists the tool's own flags (absl looks for a file named after the
# binary, and comm-bench has a hyphen).
help=$("$bench" --help 2>&1)
grep -q -- '--op (' <<<"$help" || fail "--help does not list --op: $help"

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
