// RUN: plan-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// Tests that a freed buffer is not used afterwards.
func.func @use_after_free(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.free' op frees a buffer that 'func.return' uses later; move the free after the last use}}
  dist.free %x : tensor<4xf32>
  // expected-note @+1 {{used here}}
  return %x : tensor<4xf32>
}

// -----

// Tests that a use nested in a later op's region also counts.
func.func @nested_use_after_free(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.free' op frees a buffer that 'test.use' uses later}}
  dist.free %x : tensor<4xf32>
  "test.region"() ({
    // expected-note @+1 {{used here}}
    "test.use"(%x) : (tensor<4xf32>) -> ()
  }) : () -> ()
  return
}

// -----

// Tests that a buffer is freed once.
func.func @double_free(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.free' op frees a buffer that is freed again later; keep only the last dist.free}}
  dist.free %x : tensor<4xf32>
  // expected-note @+1 {{freed again here}}
  dist.free %x : tensor<4xf32>
  return
}

// -----

// Tests that a buffer is freed in the block that defines it.
func.func @free_in_nested_block(%x: tensor<4xf32>) {
  "test.region"() ({
    // expected-error @+1 {{'dist.free' op frees a buffer defined in another block; free it in the block that defines it, so it is freed exactly once}}
    dist.free %x : tensor<4xf32>
  }) : () -> ()
  return
}

// -----

// Tests that a bucket packs at least one tensor.
func.func @empty_bucket() -> tensor<4xf32> {
  // expected-error @+1 {{'dist.bucket' op has no entries; give at least one tensor}}
  %b = "dist.bucket"() <{offsets = array<i64>, chunks = 1 : i64}> : () -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests that every entry has one offset.
func.func @offset_count(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.bucket' op got 1 offsets for 2 entries; give one offset per entry}}
  %b = dist.bucket %x, %y offsets = [0] : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

// Tests that a bucket has at least one chunk.
func.func @zero_chunks(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.bucket' op chunks must be at least 1, got: 0; use 1 for a bucket of whole tensors}}
  %b = dist.bucket %x offsets = [0] chunks = 0 : tensor<4xf32> -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests that a bucket is flat.
func.func @not_flat(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'dist.bucket' op buffer must be a 1-d tensor, got: 'tensor<2x2xf32>'; flatten it}}
  %b = dist.bucket %x offsets = [0] : tensor<4xf32> -> tensor<2x2xf32>
  return %b : tensor<2x2xf32>
}

// -----

// Tests that the bucket splits into equal chunks.
func.func @uneven_chunks(%x: tensor<4xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{'dist.bucket' op buffer of 10 elements does not split into 4 chunks, got: 10 % 4 = 2; make its size a multiple of 4}}
  %b = dist.bucket %x offsets = [0] chunks = 4 : tensor<4xf32> -> tensor<10xf32>
  return %b : tensor<10xf32>
}

// -----

// Tests that every entry has the bucket's element type.
func.func @element_type(%x: tensor<4xf32>, %y: tensor<4xbf16>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 1 has element type 'bf16' but the buffer holds 'f32'; convert it or put it in another bucket}}
  %b = dist.bucket %x, %y offsets = [0, 4] : tensor<4xf32>, tensor<4xbf16> -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

// Tests that a scalar cannot be split into chunks.
func.func @scalar_in_chunks(%x: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 0 is 0-d and cannot split into 2 chunks; reshape it to 1-d or use chunks = 1}}
  %b = dist.bucket %x offsets = [0] chunks = 2 : tensor<f32> -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests that an entry whose dim 0 does not split into the chunks needs
// `padded`.
func.func @entry_uneven(%x: tensor<6x2xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 0 has dim 0 of size 6, which does not split into 4 chunks, got: 6 % 4 = 2; mark the op `padded` (parts of ceil(6 / 4) = 2 rows, zero-filled) or pad it to a multiple of 4}}
  %b = dist.bucket %x offsets = [0] chunks = 4 : tensor<6x2xf32> -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

// Tests that `padded` is refused when every entry divides, so each layout
// has one spelling.
func.func @padded_even(%x: tensor<8x2xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'dist.bucket' op is marked `padded`, but every entry's split dim divides into 4 chunks; drop `padded`}}
  %b = dist.bucket %x offsets = [0] chunks = 4 padded : tensor<8x2xf32> -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

// Tests that `padded` is refused on a bucket of whole tensors (one chunk).
func.func @padded_one_chunk(%x: tensor<3x2xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'dist.bucket' op is marked `padded`, but every entry's split dim divides into 1 chunks; drop `padded`}}
  %b = dist.bucket %x offsets = [0] padded : tensor<3x2xf32> -> tensor<6xf32>
  return %b : tensor<6xf32>
}

// -----

// Tests that a padded entry takes ceil(n / chunks) rows per part: 10 rows
// of 16 over 4 chunks need 3 * 16 = 48 elements per segment.
func.func @padded_part_size(%x: tensor<10x16xf32>) -> tensor<160xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 0 ends at 48 but each of the 4 chunks holds 40 elements; grow the buffer to at least 192 elements}}
  %b = dist.bucket %x offsets = [0] chunks = 4 padded : tensor<10x16xf32> -> tensor<160xf32>
  return %b : tensor<160xf32>
}

// -----

// Tests that split_dims gives one dim per entry.
func.func @split_dims_count(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{'dist.bucket' op got 1 split_dims for 2 entries; give one split dim per entry or omit split_dims}}
  %b = dist.bucket %x, %y offsets = [0, 8] chunks = 2 split_dims = [1] : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<32xf32>
  return %b : tensor<32xf32>
}

// -----

// Tests that a split dim is a dim of its entry.
func.func @split_dim_range(%full: tensor<32xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'dist.unbucket' op entry 0 has split dim 2 out of range for its rank 2; use a dim in [0, 2)}}
  %w = dist.unbucket %full offsets = [0] chunks = 2 split_dims = [2] : tensor<32xf32> -> tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

// Tests that an entry's split dim (here dim 1 of a row-parallel weight)
// splits into the chunks.
func.func @split_dim_uneven(%full: tensor<36xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'dist.unbucket' op entry 0 has dim 1 of size 6, which does not split into 4 chunks, got: 6 % 4 = 2; mark the op `padded` (parts of ceil(6 / 4) = 2 rows, zero-filled) or pad it to a multiple of 4}}
  %w = dist.unbucket %full offsets = [0] chunks = 4 split_dims = [1] : tensor<36xf32> -> tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}

// -----

// Tests that entries do not overlap (and are listed in offset order).
func.func @overlap(%x: tensor<4x4xf32>, %y: tensor<8xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 1 at offset 8 overlaps the entries before it, which end at 16; list entries in offset order and use an offset of at least 16}}
  %b = dist.bucket %x, %y offsets = [0, 8] : tensor<4x4xf32>, tensor<8xf32> -> tensor<32xf32>
  return %b : tensor<32xf32>
}

// -----

// Tests that offsets are not negative.
func.func @negative_offset(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 0 has negative offset -4; offsets count from 0}}
  %b = dist.bucket %x offsets = [-4] : tensor<4xf32> -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

// Tests that entries fit in their chunk, with the buffer size that would do.
func.func @too_small(%x: tensor<8x4xf32>, %y: tensor<8xf32>) -> tensor<40xf32> {
  // expected-error @+1 {{'dist.bucket' op entry 1 ends at 12 but each of the 4 chunks holds 10 elements; grow the buffer to at least 48 elements}}
  %b = dist.bucket %x, %y offsets = [0, 10] chunks = 4 : tensor<8x4xf32>, tensor<8xf32> -> tensor<40xf32>
  return %b : tensor<40xf32>
}

// -----

// Tests that dist.unbucket reads at least one tensor.
func.func @empty_unbucket(%b: tensor<4xf32>) {
  // expected-error @+1 {{'dist.unbucket' op has no entries; give at least one tensor}}
  "dist.unbucket"(%b) <{offsets = array<i64>, chunks = 1 : i64}> : (tensor<4xf32>) -> ()
  return
}

// -----

// Tests that dist.unbucket follows the same layout rules.
func.func @unbucket_overlap(%b: tensor<32xf32>) -> (tensor<16xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'dist.unbucket' op entry 1 at offset 12 overlaps the entries before it, which end at 16}}
  %x, %y = dist.unbucket %b offsets = [0, 12] : tensor<32xf32> -> tensor<16xf32>, tensor<8xf32>
  return %x, %y : tensor<16xf32>, tensor<8xf32>
}

// -----

// Tests that dist.unbucket's chunks cover the gathered buffer.
func.func @unbucket_too_small(%b: tensor<48xf32>) -> tensor<64xf32> {
  // expected-error @+1 {{'dist.unbucket' op entry 0 ends at 16 but each of the 4 chunks holds 12 elements; grow the buffer to at least 64 elements}}
  %x = dist.unbucket %b offsets = [0] chunks = 4 : tensor<48xf32> -> tensor<64xf32>
  return %x : tensor<64xf32>
}

// -----

// Tests that the grad has the param's shape.
func.func @grad_shape(%p: tensor<4x16xf32>, %g: tensor<4x8xf32>, %m: tensor<4x16xf32>, %v: tensor<4x16xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op grad shape [4, 8] != param shape [4, 16]; every operand must have the param's shape}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>
  return
}

// -----

// Tests that exp_avg has the param's shape.
func.func @exp_avg_shape(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<2xf32>, %v: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op exp_avg shape [2] != param shape [4]}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<4xf32>
  return
}

// -----

// Tests that exp_avg_sq has the param's shape.
func.func @exp_avg_sq_shape(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4x1xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op exp_avg_sq shape [4, 1] != param shape [4]}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x1xf32>
  return
}

// -----

// Tests that the learning rate is positive.
func.func @zero_lr(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op lr must be positive, got: 0; use a learning rate such as 0.001}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %p, %p, %p lr = 0.0 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that beta1 is below 1.
func.func @beta1_one(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op beta1 must be in [0, 1), got: 1}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %p, %p, %p lr = 1.0e-3 betas = (1.0, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that beta2 is not negative.
func.func @beta2_negative(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op beta2 must be in [0, 1), got: -0.5}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %p, %p, %p lr = 1.0e-3 betas = (0.9, -0.5) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that eps is positive.
func.func @zero_eps(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op eps must be positive, got: 0; use a small value such as 1e-08}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %p, %p, %p lr = 1.0e-3 betas = (0.9, 0.999) eps = 0.0 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that weight decay is not negative.
func.func @negative_weight_decay(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op weight_decay must be non-negative, got: -0.25; use 0 to turn weight decay off}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %p, %p, %p lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = -0.25 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that AdamW runs on float tensors only.
func.func @integer_param(%p: tensor<4xi32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op operand #0 must be statically shaped tensor of floating-point values, but got 'tensor<4xi32>'}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %g, %g lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that a bf16 param needs an f32 master copy.
func.func @bf16_without_master(%p: tensor<4xbf16>, %m: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op updates a 'bf16' param without a master copy; add `master %m` with an f32 tensor of the param's shape}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %p, %m, %m lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that an f32 param has no master copy.
func.func @f32_with_master(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op has a master copy of an f32 param; drop `master`, the param is its own master}}
  %p1, %m1, %v1, %w1 = dist.optimizer_step %p, %p, %p, %p master %p lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that the master copy has the param's shape.
func.func @master_shape(%p: tensor<4xbf16>, %m: tensor<4xf32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op master shape [2] != param shape [4]; every operand must have the param's shape}}
  %p1, %m1, %v1, %w1 = dist.optimizer_step %p, %p, %m, %m master %w lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
  return
}
