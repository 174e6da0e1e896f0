#!/usr/bin/env bash
# An empty OPENBLAS_CORETYPE names no core, so OpenBLAS takes its Prescott
# fallback, as on a CPU model it does not know; the probe must then run on
# the kernels this CPU's instructions allow (by /proc/cpuinfo's flags), and a
# core the user names must stay.
set -eu
probe="$1"
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
if has avx512f avx512cd avx512bw avx512dq avx512vl; then want=SkylakeX
elif has avx avx2 fma; then want=Haswell
else want=Prescott; fi
got="$(OPENBLAS_CORETYPE= "$probe" 2>/dev/null)"
# An OpenBLAS that knows this CPU picks its own core (Cooperlake on an AMD
# Zen 4 with avx512_bf16): no fallback to replace, and never Prescott.
if [[ "$got" != "$want" ]]; then
  [[ "$want" != Prescott && "$got" != Prescott ]] ||
    { echo "fallback replaced by $got, want $want"; exit 1; }
  echo "ok: OpenBLAS chose $got itself (the probe would set $want)"
fi
got="$(OPENBLAS_CORETYPE=Prescott "$probe")"
[[ "$got" == Prescott ]] || { echo "the user's Prescott became $got"; exit 1; }
echo "ok: a user-named core stays"
