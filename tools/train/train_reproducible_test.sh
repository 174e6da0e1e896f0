#!/usr/bin/env bash
# Run-to-run reproducibility (docs/runtime.md, "Reproducibility"): the same
# plan, data and seed, trained twice on separate processes, give the same
# loss at every step bit for bit and the same final parameters and AdamW
# states (the step-6 checkpoints, byte for byte). Layouts: fsdp 2 and tp 2
# (gloo, --nproc), hsdp 2x2 (gloo, four ranks), and fsdp 2 under mpirun with
# the mpi backend. The model's gradient buckets are 12.6 MiB, beyond a
# socket's send buffer: Gloo's halving-doubling reduce-scatter, which the
# gloo backend once used, made these runs differ.
# Args: train, then the plans: fsdp2, tp2, hsdp2x2.
set -u
train="$1" fsdp2="$2" tp2="$3" hsdp="$4"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/train_test_lib.sh" repro

# same NAME: the two runs of NAME agree on every loss and every saved byte.
same() {
  local name="$1"
  /usr/bin/python3 - "$work/${name}_a.json" "$work/${name}_b.json" <<'EOF' || fail "$name: losses differ"
import json, struct, sys
a, b = (json.load(open(path))["losses"] for path in sys.argv[1:])
assert len(a) == len(b) == 6, (len(a), len(b))
bits = lambda x: struct.pack("<f", x).hex()
for step, (x, y) in enumerate(zip(a, b), 1):
    if bits(x) != bits(y):
        print(f"step {step}: {x!r} ({bits(x)}) != {y!r} ({bits(y)})")
        sys.exit(1)
EOF
  local file
  for file in "$work/${name}_a/step_6/"*; do
    cmp -s "$file" "$work/${name}_b/step_6/$(basename "$file")" \
        || fail "$name: $(basename "$file") of the step-6 checkpoints differs"
  done
  echo "$name: 6 losses and $(ls "$work/${name}_a/step_6" | wc -l) checkpoint files identical"
}

common=(--steps=6 --timeout_s=120 --progress=false)
for layout in fsdp2:2:"$fsdp2" tp2:2:"$tp2" hsdp2x2:4:"$hsdp"; do
  IFS=: read -r name ranks plan <<<"$layout"
  for run in a b; do
    run "${name}_$run" "$train" --plan="$plan" "${common[@]}" --nproc="$ranks" \
        --losses_out="$work/${name}_$run.json" --checkpoint_dir="$work/${name}_$run"
  done
  same "$name"
done

for run in a b; do
  port=$(free_port)
  run "mpi_fsdp2_$run" mpirun "${mpirun_flags[@]}" --timeout 120 -np 2 -x MASTER_PORT="$port" \
      -x OPENBLAS_NUM_THREADS=1 "$train" --plan="$fsdp2" "${common[@]}" --backend=mpi \
      --losses_out="$work/mpi_fsdp2_$run.json" --checkpoint_dir="$work/mpi_fsdp2_$run"
done
same mpi_fsdp2
echo "PASS"
