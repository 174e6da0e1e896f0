// RUN: plan-opt %s --plan-bucketing="bucket-mb=-1" -verify-diagnostics

// Tests that a negative bucket size is refused.
// expected-error @below {{invalid bucket-mb=-1; use 0 (one bucket per unit) or a size in MiB}}
module {
  func.func @empty() {
    return
  }
}
