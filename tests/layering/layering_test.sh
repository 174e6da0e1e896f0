#!/usr/bin/env bash
# Fails, naming each offending target, if the transitive closure of the
# cluster-node targets reaches the planner or LLVM/MLIR, or if mesh/ reaches
# another package of the project (docs/design.md, "Layering").
# Args: the node_deps and mesh_deps query outputs.
set -u
node_deps="$1" mesh_deps="$2"
status=0

[[ -s "$node_deps" && -s "$mesh_deps" ]] || { echo "FAIL: empty query output"; exit 1; }

bad=$(grep -E '^(//planner[/:]|@llvm//)' "$node_deps")
if [[ -n "$bad" ]]; then
  echo "FAIL: the runtime and comm layers must not link the planner or LLVM/MLIR (a cluster"
  echo "node has no LLVM); these are in the closure of tests/layering:node_deps:"
  echo "$bad" | sed 's/^/  /'
  echo "Move what they need into a package without MLIR (mesh/, plan/), or find the"
  echo "path with: bazel query 'somepath(//tools/train:train, <target>)'"
  status=1
fi

# mesh/ may use the standard library, absl and the toolchain, nothing else.
bad=$(grep -E '^//' "$mesh_deps" | grep -vE '^//mesh[:/]')
if [[ -n "$bad" ]]; then
  echo "FAIL: mesh/ depends only on the standard library and absl; it reaches:"
  echo "$bad" | sed 's/^/  /'
  status=1
fi

if [[ $status -eq 0 ]]; then
  echo "PASS: $(grep -c . "$node_deps") targets in the cluster-node closure, none in planner/ or" \
       "LLVM/MLIR; $(grep -cE '^//mesh' "$mesh_deps") mesh targets, none outside mesh/"
fi
exit $status
