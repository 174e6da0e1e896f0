// RUN: plan-opt %s --plan-memory-plan="memory-budget-gb=-1" -verify-diagnostics

// Tests that a negative budget is refused.
// expected-error @+1 {{memory-budget-gb must be >= 0, got: -1; set the device memory in GiB (0: no check)}}
module {}
