#!/usr/bin/env bash
# End-to-end check of comm-flight-analyze on the dumps in testdata/: exit 0
# when the ranks agree, 1 naming the lagging rank or the divergent call, 2 on
# bad input.
set -uo pipefail
tool="$1"
data="$2"
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
expect consistent 0 'consistent: ranks 0,1 reached call #3' -- "$data/consistent"
expect consistent-files 0 '2 readable dumps' -- "$data/consistent/default_rank0.json" \
  "$data/consistent/default_rank1.json"
expect lagging 1 'lagging: rank 2 stopped at call #3 while ranks 0,1 went on \(up to #4\)' -- \
  "$data/lagging"
expect lagging-error-shown 1 'last all_reduce #4 failed \(all_reduce #4 in group tp' -- \
  "$data/lagging"
expect divergent 1 \
  'first divergence: at call #2: rank 1 called reduce\(f32, shapes \[\[1024\]\]\), ranks 0,2' -- \
  "$data/divergent"
expect partial 0 'missing: rank 1: .*pp_rank1.json: not valid JSON.*; rank 2: no dump' -- \
  "$data/partial"
mixed="${TEST_TMPDIR:-/tmp}/mixed"
rm -rf "$mixed" && mkdir -p "$mixed" && cp "$data"/lagging/* "$data"/consistent/* "$mixed"/
expect group-filter 1 "group 'tp': 3 ranks, 3 readable dumps" -- --group=tp "$mixed"
expect group-filter-other 0 "group 'default'" -- --group=default "$mixed"
expect missing-file 0 'missing: rank 1: .*default_rank1.json: cannot open' -- \
  "$data/consistent/default_rank0.json" "$mixed/gone/default_rank1.json"
expect one-rank-left 0 'nothing to compare: only rank 0 left a readable dump' -- \
  "$data/consistent/default_rank0.json" "$mixed/gone/default_rank1.json"
expect mixed-groups 2 'dumps of different groups.*pass --group=NAME' -- "$mixed"
expect no-args 2 'no dumps given' --
expect bad-option 2 "unknown option '--frobnicate'" -- --frobnicate "$data/consistent"
expect unreadable-only 2 'none of the 1 flight recorder dumps is readable' -- \
  "$data/partial/pp_rank1.json"
expect no-dumps-of-group 2 "no dumps of group 'zz' in" -- --group=zz "$data/consistent"
expect help 0 'usage: comm-flight-analyze' -- --help
exit $((failures > 0))
