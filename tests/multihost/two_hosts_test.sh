#!/usr/bin/env bash
# Training across two "hosts": two network namespaces joined by a veth pair
# (10.77.0.1 and 10.77.0.2), each running its own ranks, as two machines on
# one link would (docs/launch.md, "Across hosts, tested"):
#  1. //tools:launch --nnodes=2 --node_rank=0|1 in each namespace, 2 ranks
#     each, gloo bound to the veth through GLOO_SOCKET_IFNAME, the store on
#     the veth address; loopback has no route, so nothing can use it;
#  2. the same hosts under one mpirun (--backend=mpi), Open MPI's rsh
#     launcher reaching the second host through `ip netns exec`, its TCP
#     transport and daemons on the veth subnet.
# Each trains tiny Llama 20 steps (hsdp 2x2 with dp across the hosts, then
# fsdp 4) with the 1-rank run's losses (1e-5 relative, as
# tools/train/train_e2e_test.sh), and `ss` inside the namespaces, sampled
# while the jobs run, shows every TCP connection on the namespaces' own
# addresses. Where namespaces cannot be made (not root, no iproute2, no
# veth) it says why and reports itself skipped, as the fuzz tests do. Names
# are random per run, so concurrent runs do not meet; everything made is
# removed on exit, and everything that blocks has a timeout.
# Args: train, launch, then the plans: single, hsdp2x2, fsdp4.
set -uo pipefail
train="$(realpath "$1")" launch="$(realpath "$2")"
single="$(realpath "$3")" hsdp="$(realpath "$4")" fsdp4="$(realpath "$5")"
fail() { echo "FAIL: $*" >&2; exit 1; }

skip() {
  echo "SKIPPED: $*"
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    cat >"$XML_OUTPUT_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="two_hosts" tests="1" skipped="1">
<testcase name="two_hosts" result="skipped"><skipped message="$*"/></testcase>
</testsuite></testsuites>
EOF
  fi
  exit 0
}

[[ $(id -u) -eq 0 ]] || skip "network namespaces need root (running as uid $(id -u))"
command -v ip >/dev/null && command -v ss >/dev/null ||
  skip "ip and ss are missing; install iproute2 (tools/setup.sh does)"

id="$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
ns_a="loom-mh-$id-a" ns_b="loom-mh-$id-b"
host_a="hosta-$id" host_b="hostb-$id"
addr_a=10.77.0.1 addr_b=10.77.0.2
work="$(mktemp -d /tmp/loom-mh.XXXXXXXX)"
made=()

cleanup() {
  local ns
  for ns in "${made[@]}"; do
    # The jobs' processes first (ours, started in the namespace), so that
    # none outlives the test; then the namespace and its /etc/netns files.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------
# The two hosts.

make_ns() {
  local out
  out="$(timeout 10 ip netns add "$1" 2>&1)" ||
    skip "cannot make a network namespace (ip netns add: ${out:-exit $?})"
  made+=("$1")
}
make_ns "$ns_a"
make_ns "$ns_b"
out="$(timeout 10 ip -n "$ns_a" link add v0 type veth peer name v1 netns "$ns_b" 2>&1)" ||
  skip "cannot make a veth pair (${out:-exit $?}); the kernel needs veth support"
# `loopback` keeps its routes for now: the mpirun part needs them (below).
setup=(
  "ip -n $ns_a addr add $addr_a/24 dev v0" "ip -n $ns_b addr add $addr_b/24 dev v1"
  "ip -n $ns_a link set v0 up" "ip -n $ns_b link set v1 up"
  "ip -n $ns_a link set lo up" "ip -n $ns_b link set lo up"
)
for step in "${setup[@]}"; do
  # shellcheck disable=SC2086
  timeout 10 $step || fail "network set-up step '$step' failed"
done
# Host names for mpirun: `ip netns exec` shows /etc/netns/NS/hosts as
# /etc/hosts inside NS, and nothing outside it.
for ns in "$ns_a" "$ns_b"; do
  mkdir -p "/etc/netns/$ns"
  printf '%s %s\n%s %s\n' "$addr_a" "$host_a" "$addr_b" "$host_b" >"/etc/netns/$ns/hosts"
done

export OPENBLAS_NUM_THREADS=1
common=(--steps=20 --timeout_s=60 --progress=false)

# compare A B: B's losses equal A's within 1e-5 relative.
compare() {
  /usr/bin/python3 - "$@" <<'EOF' || fail "losses differ: $*"
import json, sys
a = json.load(open(sys.argv[1]))["losses"]
b = json.load(open(sys.argv[2]))["losses"]
assert len(a) == len(b) == 20, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{sys.argv[2]}: 20 steps, worst relative difference {worst:.2e} against the 1-rank run")
sys.exit(0 if worst <= 1e-5 else 1)
EOF
}

# sample_ss NAME: while the jobs started before it run (at most 150 s),
# records each namespace's established TCP connections (with their
# processes) and listening sockets into $work/NAME.<ns>.{est,listen}.
sample_ss() {
  local name="$1" i ns
  for i in $(seq 750); do
    for ns in "$ns_a" "$ns_b"; do
      timeout 5 ip netns exec "$ns" ss -tnpH state established >>"$work/$name.$ns.est" 2>&1
      timeout 5 ip netns exec "$ns" ss -tlnpH >>"$work/$name.$ns.listen" 2>&1
    done
    [[ -n "$(jobs -rp)" ]] || break
    sleep 0.2
  done
}

# check_ss NAME [PMIX]: every sampled connection is between addresses of
# the veth subnet, some train process holds one to the other host, and the
# ranks on host b reach the store at addr_a:29500. With PMIX, a connection
# on 127.0.0.1 is allowed where one end is a port that mpirun or orted
# listens on: PMIx's node-local link between a rank and its daemon.
check_ss() {
  /usr/bin/python3 - "$work" "$1" "$ns_a" "$ns_b" "$addr_a" "${2:-}" <<'EOF' ||
import re, sys
work, name, ns_a, ns_b, addr_a, pmix = sys.argv[1:7]
def lines(ns, kind):
    try:
        return [l.split() for l in open(f"{work}/{name}.{ns}.{kind}") if l.strip()]
    except FileNotFoundError:
        return []
def split(endpoint):
    host, _, port = endpoint.rpartition(":")
    host = host.strip("[]")
    return host.removeprefix("::ffff:"), int(port)
bad, crossing, store = set(), 0, 0
for ns in (ns_a, ns_b):
    daemons = {split(f[3])[1] for f in lines(ns, "listen")
               if len(f) >= 6 and re.search(r'"(mpirun|orted)"', f[5])}
    for f in lines(ns, "est"):
        if len(f) < 4:
            continue
        (lh, lp), (ph, pp) = split(f[2]), split(f[3])
        who = re.findall(r'"([^"]+)"', f[4]) if len(f) > 4 else []
        local = lh.startswith("10.77.0.") and ph.startswith("10.77.0.")
        via_pmix = pmix and lh == ph == "127.0.0.1" and (lp in daemons or pp in daemons)
        if not (local or via_pmix):
            bad.add(f"{ns}: {f[2]} -> {f[3]} {who}")
        if local and lh != ph and "train" in who:
            crossing += 1
        if ns == ns_b and ph == addr_a and pp == 29500 and "train" in who:
            store += 1
print(f"{name}: {crossing} sampled train connections across the hosts, "
      f"{store} from host b's ranks to the store at {addr_a}:29500")
for line in sorted(bad):
    print("off the veth subnet:", line)
sys.exit(0 if not bad and crossing > 0 and store > 0 else 1)
EOF
    fail "$1: traffic left the namespaces' addresses or did not cross them (ss samples in $work)"
}

run() {  # run NAME ARGS...: a command whose log is kept for failures
  local name="$1" rc
  shift
  "$@" >"$work/$name.log" 2>&1
  rc=$?
  ((rc == 0)) || { cat "$work/$name.log" >&2; fail "$name exited $rc"; }
}

# await PID LOG WHAT: waits for a background job; on failure shows its log.
await() {
  local rc
  wait "$1"
  rc=$?
  ((rc == 0)) || { cat "$2" >&2; fail "$3 exited $rc (124: its timeout)"; }
}

run single timeout 120 "$train" --plan="$single" "${common[@]}" --losses_out="$work/single.json"

# ---------------------------------------------------------------------------
# 1. //tools:launch on each host over gloo. Loopback loses its routes, so
# that a rank, store or Gloo pair that fell back to 127.0.0.1 would fail.
for ns in "$ns_a" "$ns_b"; do
  timeout 10 ip -n "$ns" route del local 127.0.0.0/8 dev lo table local &&
    timeout 10 ip -n "$ns" route del local 127.0.0.1 dev lo table local ||
    fail "could not take loopback's routes away in $ns"
done
LOOM_STORE_TOKEN="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export LOOM_STORE_TOKEN
node() {  # node NS IFACE RANK [ARGS...]: one host's launcher
  local ns="$1" iface="$2" rank="$3"
  shift 3
  timeout 150 ip netns exec "$ns" env GLOO_SOCKET_IFNAME="$iface" "$launch" --nnodes=2 \
    --node_rank="$rank" --nproc=2 --master_addr="$addr_a" --master_port=29500 --timeout=140s \
    -- "$train" --plan="$hsdp" "${common[@]}" "$@"
}
node "$ns_a" v0 0 --losses_out="$work/launch.json" >"$work/launch_a.log" 2>&1 &
pid_a=$!
node "$ns_b" v1 1 >"$work/launch_b.log" 2>&1 &
pid_b=$!
sample_ss launch
await "$pid_a" "$work/launch_a.log" "host a's launcher"
await "$pid_b" "$work/launch_b.log" "host b's launcher"
grep -q "4 ranks via torchrun" "$work/launch_a.log" ||
  fail "host a's ranks did not see a 4-rank job: $(head -3 "$work/launch_a.log")"
compare "$work/single.json" "$work/launch.json"
check_ss launch

# ---------------------------------------------------------------------------
# 2. One mpirun over both hosts. Loopback gets its routes back first:
# PMIx 4.2, the daemons' link to their ranks, binds a TCP listener to
# 127.0.0.1 and, when that fails (EADDRNOTAVAIL), passes fd -1 to FD_SET, so
# mpirun aborted with "bit out of range 0 - FD_SETSIZE on fd_set". Rank
# traffic stays on the veth all the same (btl_tcp_if_include), which the
# ss check tells apart from PMIx's loopback links.
for ns in "$ns_a" "$ns_b"; do
  timeout 10 ip -n "$ns" link set lo down && timeout 10 ip -n "$ns" link set lo up ||
    fail "could not give loopback its routes back in $ns"
done
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/testing/mpi_test_env.sh"
# mpi_test_env.sh set its own EXIT trap; clean up both.
trap 'cleanup; rm -rf "$job_dir"' EXIT
# Open MPI's rsh launcher starts a host's daemon as `AGENT HOST COMMAND`;
# this agent runs the command inside that host's namespace.
agent="$work/netns_agent.sh"
cat >"$agent" <<EOF
#!/bin/sh
host="\$1"; shift
case "\$host" in
  $host_a) ns=$ns_a ;;
  $host_b) ns=$ns_b ;;
  *) echo "netns_agent: unknown host '\$host'" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
chmod +x "$agent"
# --leave-session-attached keeps the daemons' own errors in the job's log.
mpi_flags=(--host "$host_a:2,$host_b:2" -np 4 --mca plm_rsh_agent "$agent"
  --mca plm_rsh_no_tree_spawn 1 --leave-session-attached --timeout 140
  --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24
  -x MASTER_ADDR="$addr_a" -x MASTER_PORT=29500 -x LOOM_STORE_TOKEN -x OPENBLAS_NUM_THREADS)
timeout 150 ip netns exec "$ns_a" mpirun "${mpi_flags[@]}" "$train" --plan="$fsdp4" \
  "${common[@]}" --backend=mpi --losses_out="$work/mpi.json" >"$work/mpi.log" 2>&1 &
pid_mpi=$!
sample_ss mpi
await "$pid_mpi" "$work/mpi.log" "mpirun across the hosts"
compare "$work/single.json" "$work/mpi.json"
check_ss mpi pmix
echo "PASS"
