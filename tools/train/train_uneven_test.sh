#!/usr/bin/env bash
# Uneven inputs (docs/runtime_data.md, "Uneven inputs"): --data=epoch: over
# token files that end at different steps on different ranks.
#  - 3 ranks (fsdp 3, gloo), three files lasting 6, 3 and 2 steps:
#    --uneven_inputs=join trains 6 steps, the joined ranks shadowing the
#    rest, bit for bit the 1-rank run on the same files (--deterministic);
#    the default (even) refuses on every rank, naming the short ranks, and
#    throw stops every rank at step 3; a checkpoint of the last step is
#    written when the data ends before --steps;
#  - 4 ranks (fsdp 4, mpirun, mpi backend), one file that does not fill
#    its last step: ranks 0 and 1 take 4 steps, 2 and 3 take 3;
#  - 4 ranks (hsdp 2x2, two micro-steps, gloo), four files: each rank's
#    rows span two files, steps 5, 4, 1 and 1.
# Each against the 1-rank run on the same files.
# Args: train, then the plans: single (batch 6), fsdp3 (batch 6), single
# (batch 4), fsdp4 (batch 4), single (batch 8), hsdp 2x2 of two micro-steps.
set -u
train="$1" single6="$2" fsdp3="$3" single4="$4" fsdp4="$5" single8="$6" hsdp_m2="$7"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" uneven

# tokens NAME WINDOWS: a token file of WINDOWS windows of seq 16 (and 3
# tokens to spare), ids below 256 that differ from file to file.
tokens() {
  /usr/bin/python3 - "$work/$1.tok" "$2" "$1" <<'PY'
import random, struct, sys
random.seed(sys.argv[3])
n = int(sys.argv[2]) * 16 + 3
ids = [random.randrange(256) for _ in range(n)]
with open(sys.argv[1], "wb") as f:
    f.write(b"LOOMTOKS" + struct.pack("<IIQ", 1, 2, n) + struct.pack("<%di" % n, *ids))
PY
}

# compare A B TOLERANCE: B's losses equal A's, step for step and as many.
compare() {
  /usr/bin/python3 - "$@" <<'PY' || fail "losses differ: $*"
import json, sys
a = json.load(open(sys.argv[1]))["losses"]
b = json.load(open(sys.argv[2]))["losses"]
assert len(a) == len(b) and a, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{sys.argv[2]}: {len(b)} steps, worst relative difference {worst:.2e}")
sys.exit(0 if worst <= float(sys.argv[3]) else 1)
PY
}

steps_of() { /usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["losses"]))' "$1"; }

common=(--steps=20 --timeout_s=60 --progress=false)

# 3 ranks, 6 rows a step, 2 rows per file: 11, 6 and 4 windows.
tokens a 11; tokens b 6; tokens c 4
three="epoch:$work/a.tok,$work/b.tok,$work/c.tok"
run single6 "$train" --plan="$single6" "${common[@]}" --data="$three" --deterministic \
    --losses_out="$work/single6.json"
[[ "$(steps_of "$work/single6.json")" == 6 ]] || fail "the 1-rank run took $(steps_of "$work/single6.json") steps"
grep -q "data ends after step 6 of --steps=20" "$work/single6.log" || fail "$(cat "$work/single6.log")"
run join3 "$train" --plan="$fsdp3" "${common[@]}" --nproc=3 --data="$three" --deterministic \
    --uneven_inputs=join --losses_out="$work/join3.json" --metrics_out="$work/join3.jsonl" \
    --checkpoint_dir="$work/ckpt3"
compare "$work/single6.json" "$work/join3.json" 0
grep -q "step 3/20 .* (2 of 3 ranks had data)" "$work/join3.log" || fail "$(cat "$work/join3.log")"
grep -q "step 6/20 .* (1 of 3 ranks had data)" "$work/join3.log" || fail "$(cat "$work/join3.log")"
grep -q "saved step 6 to" "$work/join3.log" || fail "no final checkpoint: $(cat "$work/join3.log")"
/usr/bin/python3 - "$work/join3.jsonl" <<'PY' || fail "ranks_with_data in the metrics log"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l.get("ranks_with_data", 3) for l in lines] == [3, 3, 2, 1, 1, 1], lines
PY
refused even3 "rank(s) 2 have data up to step 2, the longest up to step 6 (per rank: 6, 3, 2)" \
    "$train" --plan="$fsdp3" "${common[@]}" --nproc=3 --data="$three"
refused throw3 "step 3: .*throw_on_early_termination" \
    "$train" --plan="$fsdp3" "${common[@]}" --nproc=3 --data="$three" --uneven_inputs=throw
# --steps short of the data: no rank runs out, nothing to join.
run short3 "$train" --plan="$fsdp3" --steps=2 --timeout_s=60 --progress=false --nproc=3 \
    --data="$three" --losses_out="$work/short3.json"
[[ "$(steps_of "$work/short3.json")" == 2 ]] || fail "--steps=2 took $(steps_of "$work/short3.json")"

# 4 ranks under mpirun, 4 rows a step from one file of 14 windows: step 4
# has rows 12 and 13 only (ranks 0 and 1).
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
trap cleanup EXIT
tokens one 14
run single4 "$train" --plan="$single4" "${common[@]}" --data="epoch:$work/one.tok" \
    --losses_out="$work/single4.json"
port=$(free_port)
run mpi4 mpirun "${mpirun_flags[@]}" --timeout 120 -np 4 -x MASTER_PORT="$port" \
    -x OPENBLAS_NUM_THREADS=1 "$train" --plan="$fsdp4" "${common[@]}" --backend=mpi \
    --data="epoch:$work/one.tok" --uneven_inputs=join --losses_out="$work/mpi4.json"
compare "$work/single4.json" "$work/mpi4.json" 1e-5
grep -q "step 4/20 .* (2 of 4 ranks had data)" "$work/mpi4.log" || fail "$(cat "$work/mpi4.log")"

# 4 ranks of hsdp 2x2 in two micro-steps, 8 rows a step over four files of
# 9, 2, 5 and 2 windows (2 rows each); a rank reads row r and row 4 + r.
tokens f0 9; tokens f1 2; tokens f2 5; tokens f3 2
four="epoch:$work/f0.tok,$work/f1.tok,$work/f2.tok,$work/f3.tok"
run single8 "$train" --plan="$single8" "${common[@]}" --data="$four" \
    --losses_out="$work/single8.json"
run hsdp4 "$train" --plan="$hsdp_m2" "${common[@]}" --nproc=4 --data="$four" \
    --uneven_inputs=join --losses_out="$work/hsdp4.json"
compare "$work/single8.json" "$work/hsdp4.json" 1e-5
[[ "$(steps_of "$work/hsdp4.json")" == 5 ]] || fail "hsdp took $(steps_of "$work/hsdp4.json") steps"
grep -q "step 2/20 .* (2 of 4 ranks had data)" "$work/hsdp4.log" || fail "$(cat "$work/hsdp4.log")"
grep -q "step 5/20 .* (1 of 4 ranks had data)" "$work/hsdp4.log" || fail "$(cat "$work/hsdp4.log")"
echo PASS
