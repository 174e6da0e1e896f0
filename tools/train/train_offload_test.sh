#!/usr/bin/env bash
# Offload across processes (docs/planner_offload.md): tiny Llama under fsdp 2
# and 4 (gloo, --nproc) with the AdamW states in each rank's host arena gives
# the losses of the same layout without offload bit for bit; the memory
# table shows the host arena apart, both peaks within 10 % of the plan's;
# the trace has the copies on their own track; and a checkpoint saved
# without offload resumes under offload (an f32 parameter's host master
# copy loads from the parameter) with the uninterrupted run's losses.
# Args: train, then the plans: fsdp2, offload_fsdp2, fsdp4, offload_fsdp4.
set -u
train="$1" fsdp2="$2" offload2="$3" fsdp4="$4" offload4="$5"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" offload

# bits A B: B's losses (from its first_step on) equal A's bit for bit.
bits() {
  /usr/bin/python3 - "$1" "$2" <<'PY' || fail "losses differ: $1 $2"
import json, struct, sys
a = json.load(open(sys.argv[1]))["losses"]
b_all = json.load(open(sys.argv[2]))
b, first = b_all["losses"], b_all.get("first_step", 1)
a = a[first - 1:first - 1 + len(b)]
assert len(a) == len(b) > 0, (len(a), len(b))
f = lambda x: struct.pack("<f", x).hex()
bad = [(s, x, y) for s, (x, y) in enumerate(zip(a, b), first) if f(x) != f(y)]
assert not bad, bad
print(f"{sys.argv[2]}: {len(b)} losses from step {first} bit for bit")
PY
}

common=(--steps=6 --timeout_s=120 --progress=false)
for layout in 2:"$fsdp2":"$offload2" 4:"$fsdp4":"$offload4"; do
  IFS=: read -r ranks plain offloaded <<<"$layout"
  run "plain$ranks" "$train" --plan="$plain" "${common[@]}" --nproc="$ranks" \
      --losses_out="$work/plain$ranks.json"
  run "offload$ranks" "$train" --plan="$offloaded" "${common[@]}" --nproc="$ranks" \
      --losses_out="$work/offload$ranks.json" --memory_out="$work/memory$ranks.json" \
      --trace="$work/trace$ranks.json"
  bits "$work/plain$ranks.json" "$work/offload$ranks.json"
  grep -q "host memory per rank (bytes handed out by the host arena" "$work/offload$ranks.log" ||
      fail "no host memory table: $(cat "$work/offload$ranks.log")"
  /usr/bin/python3 - "$work/memory$ranks.json" "$work/trace$ranks.json" <<'PY' || fail "memory or trace of fsdp $ranks"
import json, sys
m = json.load(open(sys.argv[1]))
for key, predicted in (("ranks", m["predicted_peak_bytes"]), ("host_ranks", m["predicted_host_peak_bytes"])):
    for rank in m[key]:
        diff = abs(rank["peak"] - predicted) / rank["peak"]
        assert diff <= 0.10, (key, rank, predicted)
    print(f"{key}: measured {[r['peak'] for r in m[key]]} against {predicted}")
t = json.load(open(sys.argv[2]))
copies = [e for e in t["traceEvents"] if e["ph"] == "X" and e["name"].startswith("dist.copy_")]
assert copies, "no copy spans"
tracks = {e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "thread_name"}
assert "copy" in tracks, tracks
PY
  # Step 3 of the plan without offload, saved, resumes under offload.
  run "first3_$ranks" "$train" --plan="$plain" --steps=3 --timeout_s=120 --progress=false \
      --nproc="$ranks" --checkpoint_dir="$work/ck$ranks"
  run "resumed$ranks" "$train" --plan="$offloaded" "${common[@]}" --nproc="$ranks" \
      --checkpoint_dir="$work/ck$ranks" --resume --save_every=0 \
      --losses_out="$work/resumed$ranks.json"
  grep -q "resumed from .*step 3" "$work/resumed$ranks.log" ||
      fail "no resume line: $(cat "$work/resumed$ranks.log")"
  bits "$work/plain$ranks.json" "$work/resumed$ranks.json"
done
echo "PASS"
