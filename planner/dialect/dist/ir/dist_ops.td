// Operations of the `dist` dialect. Tensor types are per-rank (local) types:
// a plan is one SPMD program that every rank of the mesh runs.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_TD_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_TD_

include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "planner/dialect/dist/ir/dist_attrs.td"
include "planner/dialect/dist/ir/dist_base.td"
include "planner/dialect/dist/ir/dist_interfaces.td"
include "planner/dialect/dist/ir/dist_types.td"

// Element types a collective can put on the wire or accumulate in.
def Dist_ElementTypeAttr
    : TypeAttrOf<AnyTypeOf<[AnyFloat, AnySignlessInteger]>>;
def Dist_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;

//===----------------------------------------------------------------------===//
// Mesh and placement.
//===----------------------------------------------------------------------===//

def Dist_MeshOp : Dist_Op<"mesh", [Symbol]> {
  let summary = "an n-d grid of ranks with named axes";
  let description = [{
    Declares the device mesh a plan runs on, as `loom::mesh::DeviceMesh`
    does: one size (at least 1) and one unique identifier-like name per axis,
    ranks laid out row-major. Collectives and placements refer to it by
    symbol and to its axes by name.

    ```mlir
    dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    DenseI64ArrayAttr:$shape,
    StrArrayAttr:$axes
  );
  let assemblyFormat = [{
    $sym_name `shape` `=` $shape `axes` `=` $axes attr-dict
  }];
  let extraClassDeclaration = [{
    // The size of axis `name`, or nullopt when the mesh has no such axis.
    std::optional<int64_t> axisSize(::llvm::StringRef name);
    // "dp=2, tp=4", for diagnostics.
    std::string describe();
  }];
  let hasVerifier = 1;
}

def Dist_AnnotateOp : Dist_Op<"annotate", [
    Pure,
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>
  ]> {
  let summary = "states which global tensor a local value is a piece of";
  let description = [{
    Returns its operand unchanged and records that it is this rank's piece
    of a tensor of type `global` laid out by `placement`. The verifier checks
    that the local shape is exactly what the placement gives on the mesh
    (see `dist.placement` for the padding rule).

    ```mlir
    dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]
    // An [11, 64] weight: dim 0 padded to 12 and split over dp, dim 1 over tp.
    %w = dist.annotate %arg0 <@mesh, [shard<0, padded>, shard<1>]>
        global tensor<11x64xf32> : tensor<6x16xf32>
    ```
  }];
  let arguments = (ins
    AnyStaticShapeTensor:$input,
    Dist_PlacementAttr:$placement,
    TypeAttrOf<AnyStaticShapeTensor>:$global_type
  );
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input $placement `global` $global_type attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives. Each exists in a blocking form and as `*_start`, which returns
// a `!dist.future` for `dist.wait`. They have no `Pure` trait on purpose: the
// order of communication in a block is the schedule the runtime executes, so
// CSE, DCE or hoisting must not rewrite it.
//===----------------------------------------------------------------------===//

class Dist_CollectiveOp<string mnemonic, Type resultType>
    : Dist_Op<mnemonic, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<Dist_PlacementTransferOpInterface,
                                  ["getResultPlacement"]>
      ]> {
  dag meshArgs = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes);
  let results = (outs resultType:$result);
  let hasVerifier = 1;
  // The tensor the collective produces, whether returned directly or
  // carried by a future.
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getResultTensorType() {
      ::mlir::Type type = getResult().getType();
      if (auto future = ::llvm::dyn_cast<FutureType>(type))
        return future.getValueType();
      return ::llvm::cast<::mlir::RankedTensorType>(type);
    }
  }];
}

class Dist_AllGatherBase<string mnemonic, Type resultType>
    : Dist_CollectiveOp<mnemonic, resultType> {
  let arguments = !con(meshArgs, (ins
    AnyStaticShapeTensor:$input,
    I64Attr:$gather_dim,
    UnitAttr:$padded,
    Dist_ElementTypeAttr:$wire_type
  ));
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `gather_dim` `=` $gather_dim
    (`padded` $padded^)? `wire` `=` $wire_type
    attr-dict `:` type($input) `->` qualified(type($result))
  }];
}

def Dist_AllGatherOp : Dist_AllGatherBase<"all_gather", AnyStaticShapeTensor> {
  let summary = "concatenates the shards of a group along one dim";
  let description = [{
    Each group of ranks that differ only along `axes` concatenates its
    operands along `gather_dim`, in the group's row-major rank order over
    the listed axes, and every rank of the group gets the whole. The operand
    is converted to `wire` before sending; the result has the wire element
    type. With `padded`, the concatenation is zero-padded at its end (see
    `dist.placement`) and the result keeps only its first rows: the result
    dim must then satisfy `ceil(result / group) == operand`.

    ```mlir
    %full = dist.all_gather %shard on @mesh axes = ["dp"] gather_dim = 0
        wire = bf16 : tensor<2x16xf32> -> tensor<4x16xbf16>
    %trim = dist.all_gather %s on @mesh axes = ["dp"] gather_dim = 0 padded
        wire = f32 : tensor<3x16xf32> -> tensor<5x16xf32>
    ```
  }];
}

def Dist_AllGatherStartOp
    : Dist_AllGatherBase<"all_gather_start", Dist_FutureType> {
  let summary = "starts a `dist.all_gather` without waiting for it";
  let description = [{
    The asynchronous form of `dist.all_gather`, with the same operands,
    attributes and rules; its future must be consumed by exactly one
    `dist.wait` in the same block.

    ```mlir
    %f = dist.all_gather_start %shard on @mesh axes = ["dp"] gather_dim = 0
        wire = bf16 : tensor<2x16xf32> -> !dist.future<tensor<4x16xbf16>>
    %full = dist.wait %f : !dist.future<tensor<4x16xbf16>>
    ```
  }];
}

class Dist_ReduceScatterBase<string mnemonic, Type resultType>
    : Dist_CollectiveOp<mnemonic, resultType> {
  let arguments = !con(meshArgs, (ins
    AnyStaticShapeTensor:$input,
    I64Attr:$scatter_dim,
    UnitAttr:$padded,
    Dist_ReductionKind:$reduction,
    Dist_ElementTypeAttr:$wire_type,
    Dist_ElementTypeAttr:$accum_type
  ));
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `scatter_dim` `=` $scatter_dim
    (`padded` $padded^)? `reduction` `=` $reduction `wire` `=` $wire_type
    `accum` `=` $accum_type attr-dict `:` type($input) `->`
    qualified(type($result))
  }];
}

def Dist_ReduceScatterOp
    : Dist_ReduceScatterBase<"reduce_scatter", AnyStaticShapeTensor> {
  let summary = "reduces across a group and splits the result along one dim";
  let description = [{
    Each group of ranks that differ only along `axes` reduces its operands
    element-wise with `reduction`, then rank `i` of the group keeps chunk `i`
    of the result along `scatter_dim`. Values travel as `wire` and are
    accumulated as `accum`; the result element type is one of the two.
    With `padded`, the operand is zero-padded at the end of `scatter_dim` to
    a multiple of the group size first, so the result dim is
    `ceil(operand / group)`.

    ```mlir
    %g = dist.reduce_scatter %grad on @mesh axes = ["dp"] scatter_dim = 0
        reduction = sum wire = bf16 accum = f32
        : tensor<8x16xbf16> -> tensor<4x16xf32>
    ```
  }];
}

def Dist_ReduceScatterStartOp
    : Dist_ReduceScatterBase<"reduce_scatter_start", Dist_FutureType> {
  let summary = "starts a `dist.reduce_scatter` without waiting for it";
  let description = [{
    The asynchronous form of `dist.reduce_scatter`; its future must be
    consumed by exactly one `dist.wait` in the same block.

    ```mlir
    %f = dist.reduce_scatter_start %grad on @mesh axes = ["dp"]
        scatter_dim = 0 reduction = sum wire = bf16 accum = f32
        : tensor<8x16xbf16> -> !dist.future<tensor<4x16xf32>>
    ```
  }];
}

class Dist_AllReduceBase<string mnemonic, Type resultType>
    : Dist_CollectiveOp<mnemonic, resultType> {
  let arguments = !con(meshArgs, (ins
    AnyStaticShapeTensor:$input,
    Dist_ReductionKind:$reduction,
    Dist_ElementTypeAttr:$wire_type,
    Dist_ElementTypeAttr:$accum_type
  ));
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `reduction` `=` $reduction
    `wire` `=` $wire_type `accum` `=` $accum_type attr-dict `:` type($input)
    `->` qualified(type($result))
  }];
}

def Dist_AllReduceOp
    : Dist_AllReduceBase<"all_reduce", AnyStaticShapeTensor> {
  let summary = "reduces across a group; every rank gets the whole result";
  let description = [{
    Each group of ranks that differ only along `axes` reduces its operands
    element-wise with `reduction`. Shapes are unchanged; values travel as
    `wire`, accumulate as `accum`, and the result element type is one of
    the two.

    ```mlir
    %y = dist.all_reduce %partial on @mesh axes = ["tp"] reduction = sum
        wire = bf16 accum = f32 : tensor<4x16xbf16> -> tensor<4x16xf32>
    ```
  }];
}

def Dist_AllReduceStartOp
    : Dist_AllReduceBase<"all_reduce_start", Dist_FutureType> {
  let summary = "starts a `dist.all_reduce` without waiting for it";
  let description = [{
    The asynchronous form of `dist.all_reduce`; its future must be consumed
    by exactly one `dist.wait` in the same block.

    ```mlir
    %f = dist.all_reduce_start %partial on @mesh axes = ["tp"]
        reduction = sum wire = f32 accum = f32
        : tensor<4x16xf32> -> !dist.future<tensor<4x16xf32>>
    ```
  }];
}

class Dist_AllToAllBase<string mnemonic, Type resultType>
    : Dist_CollectiveOp<mnemonic, resultType> {
  let arguments = !con(meshArgs, (ins
    AnyStaticShapeTensor:$input,
    I64Attr:$split_dim,
    I64Attr:$concat_dim,
    Dist_ElementTypeAttr:$wire_type
  ));
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `split_dim` `=` $split_dim
    `concat_dim` `=` $concat_dim `wire` `=` $wire_type attr-dict `:`
    type($input) `->` qualified(type($result))
  }];
}

def Dist_AllToAllOp : Dist_AllToAllBase<"all_to_all", AnyStaticShapeTensor> {
  let summary = "splits along one dim, exchanges, concatenates along another";
  let description = [{
    Within each group of ranks that differ only along `axes`, rank `i` splits
    its operand into `group` equal chunks along `split_dim` and sends chunk
    `j` to rank `j`; each rank concatenates what it receives along
    `concat_dim` in rank order. The result has the wire element type.

    ```mlir
    %y = dist.all_to_all %x on @mesh axes = ["tp"] split_dim = 1
        concat_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x4xf32>
    ```
  }];
}

def Dist_AllToAllStartOp
    : Dist_AllToAllBase<"all_to_all_start", Dist_FutureType> {
  let summary = "starts a `dist.all_to_all` without waiting for it";
  let description = [{
    The asynchronous form of `dist.all_to_all`; its future must be consumed
    by exactly one `dist.wait` in the same block.

    ```mlir
    %f = dist.all_to_all_start %x on @mesh axes = ["tp"] split_dim = 1
        concat_dim = 0 wire = f32
        : tensor<4x16xf32> -> !dist.future<tensor<16x4xf32>>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Point-to-point along one mesh axis: what pipeline stages exchange (a
// stage's activations forward, their gradients back). The peer is the rank
// whose coordinate along `axis` is `peer` and whose other coordinates are
// the rank's own; `tag` pairs a send with its receive. Like the collectives
// they are not Pure: their order is the schedule. A send's wait yields the
// sent tensor, so its buffer lives until the transfer is done. A received
// tensor's placement on the other axes is stated by a `dist.annotate`.
//===----------------------------------------------------------------------===//

class Dist_PointToPointOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits,
                                    [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  dag peerArgs = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$peer, I64Attr:$tag);
  let hasVerifier = 1;
}

def Dist_SendOp : Dist_PointToPointOp<"send"> {
  let summary = "sends a tensor to one rank along a mesh axis";
  let description = [{
    Blocks until the peer has the tensor (or the transport holds a copy).

    ```mlir
    dist.send %act to 1 on @mesh axis = "pp" tag = 0 : tensor<4x16xf32>
    ```
  }];
  let arguments = !con((ins AnyStaticShapeTensor:$input), peerArgs);
  let assemblyFormat = [{
    $input `to` $peer `on` $mesh `axis` `=` $axis `tag` `=` $tag attr-dict `:` type($input)
  }];
}

def Dist_SendStartOp : Dist_PointToPointOp<"send_start"> {
  let summary = "starts a `dist.send` without waiting for it";
  let description = [{
    Its future carries the sent tensor's type and must be consumed by exactly
    one `dist.wait` in the same block, which yields the tensor back.

    ```mlir
    %f = dist.send_start %act to 1 on @mesh axis = "pp" tag = 0
        : tensor<4x16xf32> -> !dist.future<tensor<4x16xf32>>
    ```
  }];
  let arguments = !con((ins AnyStaticShapeTensor:$input), peerArgs);
  let results = (outs Dist_FutureType:$result);
  let assemblyFormat = [{
    $input `to` $peer `on` $mesh `axis` `=` $axis `tag` `=` $tag attr-dict `:` type($input)
    `->` qualified(type($result))
  }];
}

def Dist_RecvOp : Dist_PointToPointOp<"recv"> {
  let summary = "receives a tensor from one rank along a mesh axis";
  let description = [{
    The result's type is what the peer's matching send sends.

    ```mlir
    %act = dist.recv from 0 on @mesh axis = "pp" tag = 0 : tensor<4x16xf32>
    ```
  }];
  let arguments = peerArgs;
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    `from` $peer `on` $mesh `axis` `=` $axis `tag` `=` $tag attr-dict `:` type($result)
  }];
}

def Dist_RecvStartOp : Dist_PointToPointOp<"recv_start"> {
  let summary = "starts a `dist.recv` without waiting for it";
  let description = [{
    Its future must be consumed by exactly one `dist.wait` in the same block,
    which yields the received tensor.

    ```mlir
    %f = dist.recv_start from 0 on @mesh axis = "pp" tag = 0
        : !dist.future<tensor<4x16xf32>>
    %act = dist.wait %f : !dist.future<tensor<4x16xf32>>
    ```
  }];
  let arguments = peerArgs;
  let results = (outs Dist_FutureType:$result);
  let assemblyFormat = [{
    `from` $peer `on` $mesh `axis` `=` $axis `tag` `=` $tag attr-dict `:`
    qualified(type($result))
  }];
}

def Dist_WaitOp : Dist_Op<"wait", [
    Dist_PlacementTransferOpInterface,
    TypesMatchWith<"result type is the tensor type the future carries",
                   "future", "result",
                   "::llvm::cast<FutureType>($_self).getValueType()">
  ]> {
  let summary = "blocks until a started collective is done; yields its result";
  let description = [{
    Consumes the future of a `dist.*_start` op in the same block. Each
    future is waited on exactly once. For a `dist.send_start` the result is
    the sent tensor; for a `dist.recv_start`, the received one; for a copy,
    the copied tensor where the copy put it.

    ```mlir
    %full = dist.wait %f : !dist.future<tensor<4x16xbf16>>
    ```
  }];
  let arguments = (ins Dist_FutureType:$future);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Copies between device and host memory (offload, docs/planner_offload.md).
// A value is in device memory unless dist::onHost says it is in the host's:
// a function argument with `dist.memory = "host"`, what a
// `dist.copy_to_host_start` yields, and an optimizer step's in-place results
// of host tensors. The copies run on their own stream, beside compute and
// communication; each is a start whose one `dist.wait`, in the same block,
// yields the copied tensor. Not Pure: their place in the block is the
// schedule.
//===----------------------------------------------------------------------===//

def Dist_CopyToHostStartOp : Dist_Op<"copy_to_host_start"> {
  let summary = "starts copying a device tensor into new host memory";
  let description = [{
    The copy starts after the work issued before it (the tensor is ready)
    and runs on the copy stream; its `dist.wait` yields the host tensor, of
    the operand's type. The operand is held until the wait. Offload copies
    each gradient shard to the host this way, where AdamW updates the
    offloaded states.

    ```mlir
    %f = dist.copy_to_host_start %grad : tensor<4x16xbf16>
        -> !dist.future<tensor<4x16xbf16>>
    %host = dist.wait %f : !dist.future<tensor<4x16xbf16>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs Dist_FutureType:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Dist_CopyIntoDeviceStartOp : Dist_Op<"copy_into_device_start"> {
  let summary = "starts copying a host tensor into a device tensor, in place";
  let description = [{
    Overwrites the device tensor `dest` with `source` (a host tensor of the
    same shape) converted to `dest`'s element type, rounding to nearest
    even: an f32 master copy becomes a bf16 parameter. The conversion
    happens on the host, so the link carries `dest`'s bytes. The wait
    yields `dest`'s new value; the runtime writes `dest`'s own buffer, so
    the result is the same buffer, as an optimizer step's are. Offload
    writes each parameter updated on the host back this way.

    ```mlir
    %f = dist.copy_into_device_start %master into %param
        : tensor<4x16xf32> into tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
    %param1 = dist.wait %f : !dist.future<tensor<4x16xbf16>>
    ```
  }];
  let arguments = (ins Dist_FloatTensor:$source, Dist_FloatTensor:$dest);
  let results = (outs Dist_FutureType:$result);
  let assemblyFormat = [{
    $source `into` $dest attr-dict `:` type($source) `into` type($dest) `->`
    qualified(type($result))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Local slice: a layout change that needs no communication.
//===----------------------------------------------------------------------===//

// `Pure` although the result depends on the rank: every rank runs the same
// SSA program, so the rank is a constant of the program each rank runs, and
// the op reads only its operand. CSE of two equal slices, DCE of an unused
// one or hoisting one therefore leave each rank's values unchanged, and no
// other rank waits for it.
def Dist_SliceOp : Dist_Op<"slice", [
    Pure,
    DeclareOpInterfaceMethods<Dist_PlacementTransferOpInterface,
                              ["getResultPlacement"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>
  ]> {
  let summary = "keeps this rank's shard of one dim; no communication";
  let description = [{
    Each rank keeps chunk `i` of its operand along `slice_dim`, where `i` is
    its index in the group of ranks that differ only along `axes`, in the
    group's row-major rank order over the listed axes: the order in which
    `dist.all_gather` concatenates, so gathering the slices over the same
    axes gives back the operand. With `padded`, the dim is zero-padded at its
    end to a multiple of the group size first (see `dist.placement`), so the
    result dim is `ceil(operand / group)` and the last ranks hold zeros.
    This turns a value replicated over `axes` into its shard. The element
    type is kept.

    ```mlir
    %s = dist.slice %x on @mesh axes = ["tp"] slice_dim = 1
        : tensor<8x32xf32> -> tensor<8x8xf32>
    %p = dist.slice %y on @mesh axes = ["tp"] slice_dim = 0 padded
        : tensor<10x16xf32> -> tensor<3x16xf32>
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$mesh_axes,
    AnyStaticShapeTensor:$input,
    I64Attr:$slice_dim,
    UnitAttr:$padded
  );
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `slice_dim` `=` $slice_dim
    (`padded` $padded^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffers and the optimizer.
//===----------------------------------------------------------------------===//

def Dist_FreeOp : Dist_Op<"free"> {
  let summary = "ends the lifetime of a buffer";
  let description = [{
    The runtime may reuse the memory of `buffer` after this point (e.g. a
    gathered FSDP parameter after its last use). The value must not be used
    after the free, nor freed twice.

    ```mlir
    dist.free %full : tensor<4x16xbf16>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Dist_AccumulateOp : Dist_Op<"accumulate", [
    Dist_PlacementTransferOpInterface,
    SameOperandsAndResultType
  ]> {
  let summary = "sums a value over the micro-steps of an optimizer step";
  let description = [{
    The result is the sum of `value` over the micro-steps that have run so
    far in this optimizer step: the first micro-step defines it, each later
    one adds its `value` in place. It is held from one micro-step to the
    next, in the layout of `value`. `plan-accumulate` places one after each
    gradient the optimizer (or a deferred reduction) reads.

    ```mlir
    %sum = dist.accumulate %grad : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$value);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Dist_BucketOp : Dist_Op<"bucket", [
    Pure,
    DeclareOpInterfaceMethods<Dist_PlacementTransferOpInterface,
                              ["getResultPlacement"]>
  ]> {
  let summary = "packs several tensors into one flat buffer";
  let description = [{
    The result is a 1-d buffer made of `chunks` equal consecutive segments
    (default 1). Input `i` is split into `chunks` equal parts along dim
    `split_dims[i]` (all 0 when `split_dims` is omitted): part `r` is the
    slice `[r * n / chunks, (r + 1) * n / chunks)` of that dim (size `n`),
    all other dims whole. Part `r` is copied, flattened row-major, to
    `offsets[i]` within segment `r`; for a split dim other than 0 this is a
    strided copy (a `[rows, cols]` input split along dim 1 gives part `r` =
    the `[rows, cols / chunks]` block of columns `r`). Inputs may not
    overlap; gaps (for alignment) are left undefined. With `chunks` equal to
    a group size, a `dist.reduce_scatter` of the bucket along dim 0 leaves
    rank `r` segment `r`: its shard of every input, the shard that a
    reduce-scatter of the input alone along `split_dims[i]` gives.

    `padded` (required when, and only when, some input's split dim `n` does
    not divide by `chunks`) applies the padding rule of `#dist.placement`
    to such an input: each part holds `s = ceil(n / chunks)` rows, part `r`
    is rows `[min(r * s, n), min((r + 1) * s, n))` followed by zero rows up
    to `s`, so the last parts may be all zeros. A reduce-scatter of the
    bucket then gives rank `r` the padded shard that a `padded`
    reduce-scatter of the input alone gives.

    ```mlir
    %b = dist.bucket %w, %bias offsets = [0, 128]
        : tensor<8x16xf32>, tensor<64xf32> -> tensor<192xf32>
    %g = dist.bucket %gw, %gb offsets = [0, 32] chunks = 4
        : tensor<8x16xf32>, tensor<64xf32> -> tensor<192xf32>
    %r = dist.bucket %gw, %go offsets = [0, 32] chunks = 4 split_dims = [0, 1]
        : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<256xf32>
    // 10 rows over 4 chunks: 3, 3, 3 and 1 real rows, 3 rows per part.
    %p = dist.bucket %gu, %gb offsets = [0, 48] chunks = 4 padded
        : tensor<10x16xf32>, tensor<64xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins
    Variadic<AnyStaticShapeTensor>:$inputs,
    DenseI64ArrayAttr:$offsets,
    DefaultValuedAttr<I64Attr, "1">:$chunks,
    OptionalAttr<DenseI64ArrayAttr>:$split_dims,
    UnitAttr:$padded
  );
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $inputs `offsets` `=` $offsets (`chunks` `=` $chunks^)?
    (`split_dims` `=` $split_dims^)? (`padded` $padded^)? attr-dict `:`
    type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_UnbucketOp : Dist_Op<"unbucket", [
    Pure,
    Dist_PlacementTransferOpInterface
  ]> {
  let summary = "reads tensors back out of a flat buffer";
  let description = [{
    The inverse of `dist.bucket`, with the same layout rule: result `i` is
    assembled along dim `split_dims[i]` (all 0 when omitted) from `chunks`
    parts, part `r` read, row-major, at `offsets[i]` of segment `r` and
    written to the slice `[r * n / chunks, (r + 1) * n / chunks)` of that
    dim (a strided copy when the dim is not 0). After a `dist.all_gather` of
    a bucket along dim 0, `chunks` equal to the group size gives back every
    whole tensor: result `i` is what a gather of its shard alone along
    `split_dims[i]` gives (fsdp x tp gathers row-parallel weights along
    dim 1).

    With `padded` (required when, and only when, some result's split dim
    `n` does not divide by `chunks`), such a result is read with the
    padding rule of `dist.bucket`: part `r` is the first
    `min((r + 1) * s, n) - min(r * s, n)` of the `s = ceil(n / chunks)`
    rows at its offset, and the padding rows are dropped. After a gather of
    padded shards this is what a `padded` `dist.all_gather` of the shard
    alone gives.

    ```mlir
    %full = dist.all_gather %b on @mesh axes = ["dp"] gather_dim = 0
        wire = f32 : tensor<48xf32> -> tensor<192xf32>
    %w, %bias = dist.unbucket %full offsets = [0, 32] chunks = 4
        : tensor<192xf32> -> tensor<8x16xf32>, tensor<64xf32>
    %wi, %wo = dist.unbucket %full2 offsets = [0, 32] chunks = 4
        split_dims = [0, 1]
        : tensor<256xf32> -> tensor<8x16xf32>, tensor<16x8xf32>
    %u, %ub = dist.unbucket %full3 offsets = [0, 48] chunks = 4 padded
        : tensor<256xf32> -> tensor<10x16xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins
    AnyStaticShapeTensor:$input,
    DenseI64ArrayAttr:$offsets,
    DefaultValuedAttr<I64Attr, "1">:$chunks,
    OptionalAttr<DenseI64ArrayAttr>:$split_dims,
    UnitAttr:$padded
  );
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let assemblyFormat = [{
    $input `offsets` `=` $offsets (`chunks` `=` $chunks^)?
    (`split_dims` `=` $split_dims^)? (`padded` $padded^)? attr-dict `:`
    type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Dist_OptimizerStepOp : Dist_Op<"optimizer_step", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>
  ]> {
  let summary = "one AdamW update of a (local shard of a) parameter";
  let description = [{
    Decoupled weight decay Adam (Loshchilov & Hutter), as PyTorch's
    `torch.optim.AdamW` with `amsgrad=False`: with `t` the number of the
    update (1 on the first),

        m = beta1 * exp_avg + (1 - beta1) * grad
        v = beta2 * exp_avg_sq + (1 - beta2) * grad^2
        p = param * (1 - lr * weight_decay)
            - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

    `t` is no operand: the runtime counts the updates it has run, so one
    plan serves every step. All tensors must have the same shape; the grad
    may have another float element type (it is converted). A parameter
    that is not f32 is updated through `master`, its f32 copy (required
    then, refused for an f32 parameter): the update above runs on the
    master and the parameter becomes its rounded value. The moments and
    the master are f32.

    Returns the new param, exp_avg, exp_avg_sq (and master), of the
    operands' types. The runtime updates in place: result `i` is the
    buffer of operand `getInPlaceOperand(i)` (param, exp_avg, exp_avg_sq,
    master), which plan.json lists as the instruction's results. The step
    runs where its tensors live: all in device memory, or all in host
    memory (offloaded states; see `dist.copy_to_host_start`).

    ```mlir
    %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v
        lr = 1.0e-03 betas = (0.9, 0.999) eps = 1.0e-08 weight_decay = 0.01
        : tensor<4x16xf32>, tensor<4x16xbf16>, tensor<4x16xf32>,
          tensor<4x16xf32>
    %q1, %n1, %u1, %w1 = dist.optimizer_step %q, %h, %n, %u master %w
        lr = 1.0e-03 betas = (0.9, 0.999) eps = 1.0e-08 weight_decay = 0.01
        : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xf32>,
          tensor<4x16xf32>, tensor<4x16xf32>
    ```
  }];
  let arguments = (ins
    Dist_FloatTensor:$param,
    Dist_FloatTensor:$grad,
    Dist_FloatTensor:$exp_avg,
    Dist_FloatTensor:$exp_avg_sq,
    Optional<Dist_FloatTensor>:$master,
    F64Attr:$lr,
    F64Attr:$beta1,
    F64Attr:$beta2,
    F64Attr:$eps,
    F64Attr:$weight_decay
  );
  let results = (outs
    Dist_FloatTensor:$new_param,
    Dist_FloatTensor:$new_exp_avg,
    Dist_FloatTensor:$new_exp_avg_sq,
    Optional<Dist_FloatTensor>:$new_master
  );
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq (`master` $master^)?
    `lr` `=` $lr `betas` `=` `(` $beta1 `,` $beta2 `)` `eps` `=` $eps
    `weight_decay` `=` $weight_decay attr-dict `:` type($param) `,`
    type($grad) `,` type($exp_avg) `,` type($exp_avg_sq)
    (`,` type($master)^)?
  }];
  let extraClassDeclaration = [{
    // The operand whose buffer result `result` updates in place.
    ::mlir::Value getInPlaceOperand(unsigned result);
  }];
  let hasVerifier = 1;
}

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_TD_
