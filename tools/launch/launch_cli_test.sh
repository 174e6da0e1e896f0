#!/usr/bin/env bash
# End-to-end checks of the launch command line: exit codes and messages for
# success, a failing rank, a rank killed by a signal, the job timeout and bad
# flags; SIGTERM to the launcher stopping every rank; and ranks dying with a
# launcher that is itself SIGKILLed. Every job ends within a few seconds.
set -uo pipefail
launch="$1"
rank="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() { echo "FAIL $*"; failures=$((failures + 1)); }

expect() {  # expect NAME EXIT_CODE PATTERN -- LAUNCH_ARGS...
  local name="$1" want_code="$2" pattern="$3"; shift 4
  local out code
  out=$("$launch" "$@" 2>&1); code=$?
  if [[ $code -ne $want_code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name: exit $code (want $want_code, output matching '$pattern'), output:"
    echo "$out"
  else
    echo "ok   $name"
  fi
}

# A fresh directory for the ranks' ready files.
sync_dir() { mktemp -d "$tmp/sync.XXXXXX"; }

# Waits up to 10 s for N ranks to be ready in DIR.
wait_ready() {  # wait_ready DIR N
  for _ in $(seq 1000); do
    [[ $(ls "$1" | grep -c '^ready\.') -ge $2 ]] && return 0
    sleep 0.01
  done
  return 1
}

# True if no PID in the list still runs (gone or a zombie).
all_dead() {
  local pid state
  for pid in "$@"; do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || continue
    [[ -z $state || $state == Z ]] || return 1
  done
}

wait_dead() {  # wait_dead PID... : up to 5 s
  for _ in $(seq 500); do
    all_dead "$@" && return 0
    sleep 0.01
  done
  return 1
}

expect success 0 '^\[rank 1\] rank_env source=torchrun rank=1 world_size=2 ' \
  -- --nproc=2 -- "$rank"
expect no-dashdash 0 '^\[rank 0\] env RANK=0 ' -- --nproc=1 "$rank"
expect no-prefix 0 '^env RANK=0 ' -- --nproc=1 --no_prefix -- "$rank"
expect rank-exits-3 3 '^launch: rank 1 \(pid [0-9]+\) exited with status 3; stopped ranks 0,2 with SIGTERM$' \
  -- --nproc=3 --grace_period=10s -- "$rank" "--sync_dir=$(sync_dir)" '1:exit=3' '*:sleep'
expect rank-killed 137 '^launch: rank 0 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL\); stopped rank 1 with SIGTERM$' \
  -- --nproc=2 -- "$rank" "--sync_dir=$(sync_dir)" '0:signal=9' '*:sleep'
expect ignores-sigterm 1 'rank 1 was still running and got SIGKILL after the 200ms grace period$' \
  -- --nproc=2 --grace_period=200ms -- "$rank" "--sync_dir=$(sync_dir)" '0:exit=1' '1:ignore_term'
expect timeout 124 '^launch: job timeout of 300ms expired; stopped ranks 0,1 with SIGTERM$' \
  -- --nproc=2 --timeout=300ms -- "$rank" '*:sleep'
expect nproc-zero 2 '^launch: nproc is 0; it must be at least 1' -- --nproc=0 -- "$rank"
expect no-binary 2 '^launch: no rank binary given' -- --nproc=2
expect missing-binary 2 "^launch: rank binary '/no/such/binary' does not exist" \
  -- --nproc=2 -- /no/such/binary
expect stray-argument 2 "^launch: unexpected argument 'stray' before '--'" \
  -- --nproc=2 stray -- "$rank"

# SIGTERM to the launcher reaches every rank; the launcher exits 128+15.
dir=$(sync_dir)
"$launch" --nproc=2 -- "$rank" "--sync_dir=$dir" '*:sleep' >"$tmp/term.out" 2>"$tmp/term.err" &
launcher=$!
if wait_ready "$dir" 2; then
  kill -TERM "$launcher"
  wait "$launcher"; code=$?
  pids=$(grep -o 'pid=[0-9]*' "$tmp/term.out" | cut -d= -f2)
  if [[ $code -ne 143 ]] ||
     ! grep -qx 'launch: launcher received SIGTERM; stopped ranks 0,1 with SIGTERM' "$tmp/term.err" ||
     ! all_dead $pids; then
    fail "sigterm: exit $code (want 143), ranks $pids, stderr:"; cat "$tmp/term.err"
  else
    echo "ok   sigterm"
  fi
else
  fail "sigterm: ranks never became ready"; kill -KILL "$launcher"
fi

# A launcher killed outright takes its ranks with it (parent-death signal).
dir=$(sync_dir)
"$launch" --nproc=2 -- "$rank" "--sync_dir=$dir" '*:sleep' >"$tmp/kill.out" 2>&1 &
launcher=$!
if wait_ready "$dir" 2; then
  # The launcher forwards the ranks' pid lines a moment after they print.
  for _ in $(seq 500); do
    [[ $(grep -c 'pid=' "$tmp/kill.out") -ge 2 ]] && break
    sleep 0.01
  done
  pids=$(grep -o 'pid=[0-9]*' "$tmp/kill.out" | cut -d= -f2)
  kill -KILL "$launcher"
  wait "$launcher"
  if [[ $(wc -w <<<"$pids") -ne 2 ]] || ! wait_dead $pids; then
    fail "launcher-killed: ranks '$pids' outlived the launcher"
    kill -KILL $pids 2>/dev/null
  else
    echo "ok   launcher-killed"
  fi
else
  fail "launcher-killed: ranks never became ready"; kill -KILL "$launcher"
fi

exit $((failures > 0))
