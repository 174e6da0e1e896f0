// RUN: plan-opt %s -verify-diagnostics --plan-offload="mode=params"

// Tests that an unknown mode is refused with the modes there are.
// expected-error @+1 {{plan-offload: mode 'params' is not an offload; use none or optimizer (the AdamW states in host memory, stepped there)}}
module {
}
