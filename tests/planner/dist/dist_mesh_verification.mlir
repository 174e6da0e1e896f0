// RUN: plan-opt %s -split-input-file -verify-diagnostics

// Tests that a mesh needs one name per axis size.
// expected-error @+1 {{'dist.mesh' op has 2 axis sizes but 3 axis names; give one name per axis}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp", "pp"]

// -----

// Tests that axis names must be identifiers, as DeviceMesh requires.
// expected-error @+1 {{axis name "1x" is not an identifier; use letters, digits and '_', not starting with a digit}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "1x"]

// -----

// Tests that axis names must be unique.
// expected-error @+1 {{axis name "dp" is repeated; give each axis a unique name}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "dp"]

// -----

// Tests that every axis holds at least one rank.
// expected-error @+1 {{axis "tp" has size 0; every axis needs at least 1 rank}}
dist.mesh @mesh shape = [2, 0] axes = ["dp", "tp"]
