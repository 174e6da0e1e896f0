"""Imports a PyTorch nn.Module into Loom's nn dialect (MLIR text).

The module is traced with torch.fx, its example inputs are run through the
trace to learn every tensor's shape, and each node becomes one nn op. The
parameters become function arguments {nn.param, nn.name = "<PyTorch name>",
nn.init = {...}} (the init GPT-2 and Llama use, see init_of);
ops are located at their module path and Python source line. An operation
without an nn counterpart stops the import with a message that names it.

    /usr/bin/python3 planner/importers/torch_import.py \\
        planner/importers/sample_blocks.py:llama_block -o block.mlir \\
        --reference block.json

MODEL is FILE.py:FACTORY or package.module:FACTORY; FACTORY() returns
(module, example_inputs). docs/torch_import.md lists the supported
operations, the weight layouts and the reference file's format.
"""

import argparse
import copy
import dis
import importlib
import importlib.util
import inspect
import json
import math
import operator
import os
import re
import sys

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loom_torch  # noqa: E402  (found through the path entry above)

_TYPES = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.int64: "i64",
    torch.int32: "i32",
}
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_THIS_FILE = os.path.abspath(__file__)


class ImportFailure(Exception):
    """An input the importer cannot express in nn; the message says why."""


class _Tracer(torch.fx.Tracer):
    """Keeps loom_torch calls as single nodes and records module paths."""

    def __init__(self):
        super().__init__(autowrap_modules=(math, loom_torch))
        self.record_stack_traces = True
        self._paths = []

    def trace(self, root, concrete_args=None):
        # torch 1.13 finds the UNPACK_SEQUENCE of `q, k, v = x.split(...)`
        # by instruction index, which Python 3.11's inline caches break;
        # look it up by byte offset instead while tracing.
        original = torch.fx.proxy.Proxy.__iter__
        torch.fx.proxy.Proxy.__iter__ = _proxy_iter
        try:
            return super().trace(root, concrete_args)
        finally:
            torch.fx.proxy.Proxy.__iter__ = original

    def call_module(self, module, forward, args, kwargs):
        self._paths.append(self.path_of_module(module))
        try:
            return super().call_module(module, forward, args, kwargs)
        finally:
            self._paths.pop()

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["loom_path"] = self._paths[-1] if self._paths else ""
        return node


def _proxy_iter(proxy):
    frame = inspect.currentframe().f_back
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset == frame.f_lasti:
            if instruction.opname == "UNPACK_SEQUENCE":
                return (proxy[i] for i in range(instruction.argval))
            break
    return proxy.tracer.iter(proxy)


class _Value:
    """An SSA value of the emitted function: its name, shape and dtype."""

    def __init__(self, name, shape, dtype, line=None, source=None):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.type = tensor_type(self.shape, dtype)
        # Where the op that made it is in the body, and the value it
        # reshapes, if it is a reshape.
        self.line, self.source = line, source


class _IntView:
    """An integer tensor seen through view/reshape: nn.reshape takes floats
    only, so the original value is kept and consumers adapt to it."""

    def __init__(self, value):
        self.value = value


class _FusedLinear:
    """An nn.Linear whose output is only split: emitted per chunk."""

    def __init__(self, node, module):
        self.node, self.module = node, module


class _Chunks:
    """The result of splitting a _FusedLinear: [start, stop) per chunk."""

    def __init__(self, fused, bounds):
        self.fused, self.bounds = fused, bounds


def tensor_type(shape, dtype):
    if dtype not in _TYPES:
        raise ImportFailure(f"dtype {dtype} has no nn type; nn takes "
                            "f32, bf16, f16 tensors and i32/i64 ids")
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{_TYPES[dtype]}>"


def mlir_float(value):
    """A float literal MLIR parses: it needs a '.' before any exponent."""
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def mlir_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def op_name(node, module=None):
    """How an operation is named in messages: its Python spelling."""
    if node.op == "call_module":
        cls = type(module)
        prefix = "nn." if cls.__module__.startswith("torch.nn") else (
            cls.__module__ + ".")
        return prefix + cls.__name__
    if node.op == "call_method":
        return "Tensor." + node.target
    target = node.target
    if getattr(target, "__module__", None) == "_operator":
        return "operator." + target.__name__
    name = getattr(target, "__name__", str(target))
    # Name builtins (torch._C._nn.gelu) by where users call them from.
    for public, namespace in (("torch.nn.functional", F), ("torch", torch)):
        if getattr(namespace, name, None) is target:
            return f"{public}.{name}"
    return f"{getattr(target, '__module__', None) or 'torch'}.{name}"


SUPPORTED = sorted([
    "nn.Linear", "nn.Embedding", "nn.LayerNorm", "nn.GELU(approximate='tanh')",
    "nn.SiLU", "nn.Softmax(dim=-1)", "nn.Dropout (dropped)", "nn.Identity",
    "torch.nn.functional.linear (no bias)", "torch.nn.functional.embedding",
    "torch.nn.functional.layer_norm", "torch.nn.functional.silu",
    "torch.nn.functional.gelu(approximate='tanh')",
    "torch.nn.functional.softmax(dim=-1)",
    "torch.nn.functional.cross_entropy", "operator.add / torch.add",
    "operator.mul / torch.mul", "operator.matmul / torch.matmul",
    "torch.reshape", "torch.transpose", "torch.permute", "torch.flatten",
    "Tensor.view", "Tensor.reshape", "Tensor.flatten", "Tensor.transpose",
    "Tensor.permute", "Tensor.contiguous", "Tensor.softmax(dim=-1)",
    "Tensor.add", "Tensor.mul", "Tensor.split / Tensor.chunk (of an "
    "nn.Linear output, last dim)", "loom_torch.rms_norm", "loom_torch.rope",
    "loom_torch.causal_attention", "shape arithmetic (Tensor.size, ints)",
])


class _Importer:
    """Walks the traced graph once and writes one nn op per node."""

    def __init__(self, module, graph, function_name):
        self.module = module
        self.graph = graph
        self.function_name = function_name
        self.env = {}
        self.args = []  # (value, nn.name or None for an input, tensor)
        self.body = []
        self.param_args = {}  # (id(param), layout, rows) -> _Value
        self.param_names = {}
        for name, param in module.named_parameters():
            self.param_names.setdefault(id(param), name)
        self.param_inits = {}  # id(param) -> nn.init text
        for _, owner in module.named_modules():
            for leaf, param in owner.named_parameters(recurse=False):
                self.param_inits.setdefault(id(param), init_of(owner, leaf))
        self.arg_inits = {}  # argument SSA name -> nn.init text
        self.used_names = set()
        self.counter = 0

    # ----- helpers ---------------------------------------------------------

    def fail(self, node, what, fix):
        """Stops the import: what is wrong, where, and how to fix it."""
        raise ImportFailure(f"{what} ({_where(node)}); {fix}")

    def unsupported(self, node, module=None, detail=""):
        raise ImportFailure(
            f"unsupported operation '{op_name(node, module)}' "
            f"({_where(node)})" + (f": {detail}" if detail else "")
            + f"; supported: {', '.join(SUPPORTED)}")

    def ssa(self, hint):
        """A fresh SSA name that reads like `hint` ("attn.c_attn.weight[0:64,
        :]" -> "attn.c_attn.weight_0_64")."""
        base = re.sub(r"[^A-Za-z0-9_$.-]+", "_", hint).strip("_") or "v"
        if not re.match(r"[A-Za-z_]", base):
            base = "v" + base
        name = base
        while name in self.used_names:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.used_names.add(name)
        return name

    def meta(self, node):
        meta = node.meta.get("tensor_meta")
        if meta is None or not hasattr(meta, "shape"):
            self.fail(node, "the node has no single tensor result",
                      "give the op one tensor output")
        return meta

    def loc(self, node):
        """The op's module path (the fx node's name at the root) wrapping
        the Python line it comes from."""
        name = node.meta.get("loom_path") or node.name
        frame = _user_frame(node.stack_trace)
        if frame:
            return (f"loc({mlir_string(name)}({mlir_string(frame[0])}:"
                    f"{frame[1]}:1))")
        return f"loc({mlir_string(name)})"

    def emit(self, node, op, operands, shape, dtype, attrs="", loc=None,
             name=None):
        result = _Value(self.ssa(name or node.name), shape, dtype,
                        line=len(self.body))
        types = ", ".join(v.type for v in operands)
        names = ", ".join("%" + v.name for v in operands)
        self.body.append(f"  %{result.name} = {op} {names}{attrs} : "
                         f"({types}) -> {result.type} "
                         f"{loc or self.loc(node)}")
        return result

    def tensor(self, node, arg):
        """The _Value of an operand that must be a tensor."""
        if not isinstance(arg, torch.fx.Node):
            self.fail(node, f"operand {arg!r} is not a tensor",
                      "nn ops take tensors of one shape (no scalars, no "
                      "broadcasting); make it a parameter or an input")
        value = self.env.get(arg)
        if isinstance(value, _IntView):
            self.fail(node, f"operand '{arg.name}' is a reshaped integer "
                      "tensor", "nn.reshape takes float tensors; pass the ids "
                      "in the shape this op needs")
        if not isinstance(value, _Value):
            self.fail(node, f"operand '{arg.name}' is not a tensor value",
                      "pass a tensor computed by a supported operation")
        return value

    def param(self, param, layout="plain", rows=None):
        """The argument holding `param`, in nn's layout for its use.

        layout "plain" keeps PyTorch's layout; "linear" is an nn.Linear
        weight, stored transposed ([in, out]); rows=(a, b) takes rows a:b of
        the PyTorch tensor (a chunk of a fused projection) first.
        """
        key = (id(param), layout, rows)
        if key in self.param_args:
            return self.param_args[key]
        name = self.param_names[id(param)]
        data = param.detach()
        if rows is not None:
            data = data[rows[0]:rows[1]]
            name += (f"[{rows[0]}:{rows[1]}, :]" if param.dim() == 2
                     else f"[{rows[0]}:{rows[1]}]")
        if layout == "linear" and data.dim() == 2:
            data = data.t()
        value = _Value(self.ssa(name), data.shape, data.dtype)
        self.args.append((value, name, data))
        self.arg_inits[value.name] = self.param_inits[id(param)]
        self.param_args[key] = value
        return value

    # ----- the walk ----------------------------------------------------------

    def run(self, example_inputs):
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        for node, example in zip(placeholders, example_inputs):
            value = _Value(self.ssa(node.target), example.shape,
                           example.dtype)
            self.args.append((value, None, example))
            self.env[node] = value
        results = []
        for node in self.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                results = self.outputs(node)
                continue
            self.env[node] = self.visit(node)
        return results

    def outputs(self, node):
        flat = node.args[0]
        flat = list(flat) if isinstance(flat, (tuple, list)) else [flat]
        return [self.tensor(node, arg) for arg in flat]

    def visit(self, node):
        if node.op == "get_attr":
            return self.get_attr(node)
        if node.op == "call_module":
            return self.call_module(node)
        # Shape arithmetic (x.size(1), ints): no tensor, nothing to emit;
        # ops that need shapes read them from the traced metadata.
        if node.meta.get("tensor_meta") is None:
            return None
        if node.op == "call_method":
            return self.call_method(node)
        return self.call_function(node)

    def get_attr(self, node):
        target = self.module
        for part in node.target.split("."):
            target = getattr(target, part)
        if isinstance(target, nn.Parameter):
            return self.param(target)
        self.fail(node, f"'{node.target}' is a buffer or constant tensor, not "
                  "a parameter", "nn graphs read only inputs and parameters; "
                  "compute it inside a supported op or pass it as an input")
        return None

    def call_module(self, node):
        module = self.module.get_submodule(node.target)
        meta = self.meta(node)
        x = node.args[0] if node.args else None
        if isinstance(module, nn.Linear):
            if node.users and all(
                    u.op == "call_method" and u.target in ("split", "chunk")
                    for u in node.users):
                return _FusedLinear(node, module)
            operands = [self.tensor(node, x)]
            if self.shared(module.weight):
                if module.bias is not None:
                    self.fail(node, "an nn.Linear with a bias shares its "
                              "weight with another op", "a tied weight "
                              "imports as nn.matmul, which has no bias; drop "
                              "the bias or untie the weight")
                operands.append(self.param(module.weight))
                return self.emit(node, "nn.matmul", operands, meta.shape,
                                 meta.dtype, attrs=" transpose_rhs")
            operands.append(self.param(module.weight, "linear"))
            if module.bias is not None:
                operands.append(self.param(module.bias))
            return self.emit(node, "nn.linear", operands, meta.shape,
                             meta.dtype)
        if isinstance(module, nn.Embedding):
            if module.max_norm is not None:
                self.unsupported(node, module, "max_norm renormalises rows")
            return self.emit(node, "nn.embedding",
                             [self.ids(node, x), self.param(module.weight)],
                             meta.shape, meta.dtype)
        if isinstance(module, nn.LayerNorm):
            if not module.elementwise_affine or len(
                    module.normalized_shape) != 1:
                self.unsupported(node, module, "nn.layer_norm normalises the "
                                 "last dim with a scale and a shift")
            return self.layer_norm(node, x, module.weight, module.bias,
                                   module.eps)
        if isinstance(module, nn.GELU):
            if module.approximate != "tanh":
                self.unsupported(node, module, "nn.gelu is the tanh "
                                 "approximation; use "
                                 "nn.GELU(approximate='tanh')")
            return self.unary(node, "nn.gelu", x)
        if isinstance(module, nn.SiLU):
            return self.unary(node, "nn.silu", x)
        if isinstance(module, nn.Softmax):
            return self.softmax(node, x, module.dim)
        if isinstance(module, (nn.Dropout, nn.Identity)):
            # nn graphs describe the eval-mode model: dropout is dropped.
            return self.tensor(node, x)
        self.unsupported(node, module)
        return None

    def shared(self, param):
        """Whether a weight is also read outside nn.Linear modules (a tied
        table), so it must keep one layout."""
        owners = 0
        for node in self.graph.nodes:
            if node.op == "get_attr" and self.resolves_to(node, param):
                return True
            if node.op == "call_module":
                sub = self.module.get_submodule(node.target)
                if any(p is param for p in sub.parameters(recurse=False)):
                    owners += 1
                    if not isinstance(sub, nn.Linear):
                        return True
        return owners > 1

    def resolves_to(self, node, param):
        target = self.module
        for part in node.target.split("."):
            target = getattr(target, part, None)
        return target is param

    def ids(self, node, arg):
        value = self.env.get(arg)
        if isinstance(value, _Value) and value.dtype in (torch.int32,
                                                        torch.int64):
            return value
        self.fail(node, f"ids '{getattr(arg, 'name', arg)}' are not an "
                  "integer input tensor", "pass token ids as an int32 or "
                  "int64 input of the module")
        return None

    def chunk(self, node, chunks, index):
        fused = chunks.fused
        start, stop = chunks.bounds[index]
        module = fused.module
        operands = [self.tensor(fused.node, fused.node.args[0]),
                    self.param(module.weight, "linear", (start, stop))]
        if module.bias is not None:
            operands.append(self.param(module.bias, "plain", (start, stop)))
        meta = self.meta(node)
        return self.emit(node, "nn.linear", operands, meta.shape, meta.dtype,
                         loc=self.loc(fused.node),
                         name=f"{fused.node.name}_{index}")

    def unary(self, node, op, arg):
        x = self.tensor(node, arg)
        return self.emit(node, op, [x], x.shape, x.dtype)

    def softmax(self, node, arg, dim):
        x = self.tensor(node, arg)
        if dim not in (-1, len(x.shape) - 1):
            self.unsupported(node, detail=f"softmax over dim {dim}; nn.softmax"
                             " normalises the last dim")
        return self.emit(node, "nn.softmax", [x], x.shape, x.dtype)

    def layer_norm(self, node, arg, weight, bias, eps):
        x = self.tensor(node, arg)
        gamma = self.operand_param(node, weight)
        beta = self.operand_param(node, bias)
        return self.emit(node, "nn.layer_norm", [x, gamma, beta], x.shape,
                         x.dtype, attrs=f" epsilon {mlir_float(eps)}")

    def operand_param(self, node, arg):
        if isinstance(arg, nn.Parameter):
            return self.param(arg)
        return self.tensor(node, arg)

    def binary(self, node, op, lhs, rhs):
        a, b = self.tensor(node, lhs), self.tensor(node, rhs)
        if a.shape != b.shape or a.dtype != b.dtype:
            self.fail(node, f"{op} operands differ: {a.type} vs {b.type}",
                      "nn has no broadcasting; give both operands one shape "
                      "and type")
        return self.emit(node, op, [a, b], a.shape, a.dtype)

    def reshape(self, node, arg):
        meta = self.meta(node)
        value = self.env.get(arg)
        if isinstance(value, _IntView):
            value = value.value
        if isinstance(value, _Value) and value.dtype in (torch.int32,
                                                        torch.int64):
            return _IntView(value)
        x = self.tensor(node, arg)
        if tuple(meta.shape) == x.shape:
            return x
        result = self.emit(node, "nn.reshape", [x], meta.shape, x.dtype)
        result.source = x
        return result

    def permute(self, node, arg, permutation):
        x = self.tensor(node, arg)
        rank = len(x.shape)
        permutation = [d % rank for d in permutation]
        if permutation == list(range(rank)):
            return x
        shape = [x.shape[d] for d in permutation]
        return self.emit(node, "nn.transpose", [x], shape, x.dtype,
                         attrs=f" permutation {permutation}")

    def transpose(self, node, arg, dim0, dim1):
        rank = len(self.tensor(node, arg).shape)
        permutation = list(range(rank))
        dim0, dim1 = dim0 % rank, dim1 % rank
        permutation[dim0], permutation[dim1] = dim1, dim0
        return self.permute(node, arg, permutation)

    def split(self, node):
        fused = self.env.get(node.args[0])
        if not isinstance(fused, _FusedLinear):
            self.unsupported(node, detail="nn has no slice op; only the "
                             "output of an nn.Linear can be split (along its "
                             "last dim), which imports as one nn.linear per "
                             "chunk")
        dim = node.kwargs.get("dim", node.args[2] if len(node.args) > 2
                              else 0)
        rank = len(self.meta(fused.node).shape)
        if dim % rank != rank - 1:
            self.unsupported(node, detail=f"split along dim {dim}; only the "
                             "last dim of an nn.Linear output can be split")
        bounds, start = [], 0
        for meta in node.meta["tensor_meta"]:
            bounds.append((start, start + meta.shape[-1]))
            start += meta.shape[-1]
        return _Chunks(fused, bounds)

    def cross_entropy(self, node):
        logits_node, labels_node = node.args[0], node.args[1]
        reduction = node.kwargs.get("reduction", "mean")
        if reduction != "mean" or node.kwargs.get("label_smoothing", 0.0):
            self.unsupported(node, detail="nn.cross_entropy is the mean loss "
                             "without label smoothing")
        logits = self.tensor(node, logits_node)
        labels = self.env.get(labels_node)
        if isinstance(labels, _IntView):
            labels = labels.value
            shape = labels.shape + (logits.shape[-1],)
            if math.prod(shape) != math.prod(logits.shape):
                self.fail(node, f"labels {list(labels.shape)} and logits "
                          f"{list(logits.shape)} have different token counts",
                          "give one label per row of logits")
            if shape != logits.shape and logits.source is not None and (
                    logits.source.shape == shape
                    and len(logits_node.users) == 1):
                # `logits.view(-1, vocab)` only fed the loss: drop it.
                self.body[logits.line] = None
                logits = logits.source
            elif shape != logits.shape:
                logits = self.emit(node, "nn.reshape", [logits], shape,
                                   logits.dtype, name=node.name + "_logits")
        else:
            labels = self.ids(node, labels_node)
        return self.emit(node, "nn.cross_entropy", [logits, labels], (),
                         torch.float32)

    def call_method(self, node):
        method, args = node.target, node.args
        if method in ("view", "reshape", "flatten"):
            return self.reshape(node, args[0])
        if method == "contiguous":
            return self.tensor(node, args[0])
        if method == "transpose":
            return self.transpose(node, args[0], args[1], args[2])
        if method == "permute":
            dims = args[1] if isinstance(args[1], (tuple, list)) else args[1:]
            return self.permute(node, args[0], list(dims))
        if method in ("split", "chunk"):
            return self.split(node)
        if method == "softmax":
            return self.softmax(node, args[0],
                                node.kwargs.get("dim", args[1] if len(args) > 1
                                                else None))
        if method == "add":
            return self.binary(node, "nn.add", args[0], args[1])
        if method == "mul":
            return self.binary(node, "nn.mul", args[0], args[1])
        self.unsupported(node)
        return None

    def call_function(self, node):
        target, args, kwargs = node.target, node.args, node.kwargs
        meta = self.meta(node)
        if target is operator.getitem:
            source = self.env.get(args[0])
            if isinstance(source, _Chunks):
                return self.chunk(node, source, args[1])
            self.unsupported(node, detail="nn has no slice op")
        if target in (operator.add, torch.add):
            return self.binary(node, "nn.add", args[0], args[1])
        if target in (operator.mul, torch.mul):
            return self.binary(node, "nn.mul", args[0], args[1])
        if target in (operator.matmul, torch.matmul):
            a, b = self.tensor(node, args[0]), self.tensor(node, args[1])
            if len(b.shape) != 2 or len(a.shape) < 2:
                self.unsupported(node, detail="nn.matmul multiplies [T..., k] "
                                 "by a [k, n] matrix")
            return self.emit(node, "nn.matmul", [a, b], meta.shape,
                             meta.dtype)
        if target is F.linear:
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if bias is not None:
                self.unsupported(node, detail="F.linear with a bias; use "
                                 "nn.Linear, which imports as nn.linear")
            return self.emit(node, "nn.matmul", [self.tensor(node, args[0]),
                                                 self.tensor(node, args[1])],
                             meta.shape, meta.dtype, attrs=" transpose_rhs")
        if target is F.embedding:
            return self.emit(node, "nn.embedding",
                             [self.ids(node, args[0]),
                              self.tensor(node, args[1])],
                             meta.shape, meta.dtype)
        if target is F.layer_norm:
            weight = args[2] if len(args) > 2 else kwargs.get("weight")
            bias = args[3] if len(args) > 3 else kwargs.get("bias")
            eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
            if weight is None or bias is None:
                self.unsupported(node, detail="nn.layer_norm needs a weight "
                                 "and a bias")
            return self.layer_norm(node, args[0], weight, bias, eps)
        if target is F.silu:
            return self.unary(node, "nn.silu", args[0])
        if target is F.gelu:
            if kwargs.get("approximate", "none") != "tanh":
                self.unsupported(node, detail="nn.gelu is the tanh "
                                 "approximation; call F.gelu(x, "
                                 "approximate='tanh')")
            return self.unary(node, "nn.gelu", args[0])
        if target is F.softmax:
            return self.softmax(node, args[0],
                                kwargs.get("dim", args[1] if len(args) > 1
                                           else None))
        if target is F.cross_entropy:
            return self.cross_entropy(node)
        if target in (torch.reshape, torch.flatten):
            return self.reshape(node, args[0])
        if target is torch.transpose:
            return self.transpose(node, args[0], args[1], args[2])
        if target is torch.permute:
            return self.permute(node, args[0], list(args[1]))
        if target is loom_torch.rms_norm:
            x = self.tensor(node, args[0])
            gamma = self.tensor(node, args[1])
            return self.emit(node, "nn.rms_norm", [x, gamma], x.shape,
                             x.dtype, attrs=f" epsilon {mlir_float(args[2])}")
        if target is loom_torch.rope:
            x = self.tensor(node, args[0])
            return self.emit(node, "nn.rope", [x], x.shape, x.dtype,
                             attrs=f" theta {mlir_float(args[1])}")
        if target is loom_torch.causal_attention:
            q, k, v = (self.tensor(node, a) for a in args[:3])
            return self.emit(node, "nn.attention", [q, k, v], q.shape,
                             q.dtype)
        self.unsupported(node)
        return None

    def text(self, results, header):
        signature = ",\n    ".join(
            f"%{v.name}: {v.type}"
            + (f" {{nn.param, nn.name = {mlir_string(name)}, "
               f"nn.init = {self.arg_inits[v.name]}}}" if name else "")
            for v, name, _ in self.args)
        types = ", ".join(v.type for v in results)
        names = ", ".join("%" + v.name for v in results)
        return "\n".join(
            [header,
             f"func.func @{self.function_name}(\n    {signature})"
             f" -> ({types}) {{"]
            + [line for line in self.body if line is not None]
            + [f"  return {names} : {types}", "}", ""])


def init_of(owner, leaf):
    """The nn.init of parameter `leaf` of module `owner`.

    A PyTorch module holds values, not the rule that made them, so the
    importer gives every parameter the init GPT-2 and Llama use: a norm
    module's (LayerNorm, RMSNorm, any class named *Norm) weight starts at
    one and its bias at zero, any other bias at zero, every other parameter
    from normal(0, 0.02). Plans start from it; imported checkpoints replace
    it.
    """
    norm = isinstance(owner, (nn.LayerNorm, nn.GroupNorm)) or \
        type(owner).__name__.lower().endswith("norm")
    if norm and leaf == "weight":
        kind, std = "ones", 0.0
    elif leaf == "bias":
        kind, std = "zeros", 0.0
    else:
        kind, std = "normal", 0.02
    return f'{{kind = "{kind}", mean = 0.0, std = {std}}}'


def _where(node):
    return (f"node '{node.name}', called from "
            f"{node.meta.get('loom_path') or '<root>'}")


def _user_frame(stack_trace):
    """(file, line) of the innermost frame outside torch, for locations."""
    for match in re.finditer(r'File "([^"]+)", line (\d+)', stack_trace or ""):
        path = os.path.abspath(match.group(1))
        if (not path.startswith(_TORCH_DIR) and path != _THIS_FILE
                and os.path.exists(path)):
            return match.group(1), int(match.group(2))
    return None


def load_factory(spec):
    """FILE.py:FACTORY or package.module:FACTORY -> the factory."""
    source, sep, name = spec.rpartition(":")
    if not sep or not source or not name:
        raise ImportFailure(f"model '{spec}' is not FILE.py:FACTORY or "
                            "package.module:FACTORY")
    if source.endswith(".py"):
        if not os.path.exists(source):
            raise ImportFailure(f"model file '{source}' does not exist")
        sys.path.insert(0, os.path.dirname(os.path.abspath(source)))
        loaded = importlib.util.spec_from_file_location(
            os.path.splitext(os.path.basename(source))[0], source)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(source)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ImportFailure(f"'{source}' has no factory function '{name}'")
    return factory


def import_module(module, example_inputs, function_name, header=""):
    """Returns (mlir text, reference dict) for `module` on the inputs."""
    module = module.eval()
    graph = _Tracer().trace(module)
    traced = torch.fx.GraphModule(module, graph)
    ShapeProp(traced).propagate(*example_inputs)
    importer = _Importer(module, graph, function_name)
    results = importer.run(example_inputs)
    text = importer.text(results, header)

    # The reference: the module evaluated in float64 on the same values, so
    # the float64 nn evaluator can be held to a tight tolerance.
    reference_module = copy.deepcopy(module).double()
    doubled = [x.double() if x.is_floating_point() else x
               for x in example_inputs]
    with torch.no_grad():
        outputs = reference_module(*doubled)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [
        outputs]

    def entry(tensor, **fields):
        return dict(fields, shape=list(tensor.shape),
                    values=tensor.detach().double().flatten().tolist())

    reference = {
        "function": function_name,
        "arguments": [entry(data, name=name or value.name,
                            param=name is not None)
                      for value, name, data in importer.args],
        "results": [entry(out) for out in outputs],
    }
    return text, reference


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Imports a PyTorch nn.Module into the nn dialect.")
    parser.add_argument("model", help="FILE.py:FACTORY or "
                        "package.module:FACTORY; FACTORY() returns "
                        "(module, example_inputs)")
    parser.add_argument("-o", "--output", help="the .mlir file to write "
                        "(default: stdout)")
    parser.add_argument("--function", help="the func.func's name (default: "
                        "the factory's)")
    parser.add_argument("--reference", help="also write a JSON file with the "
                        "arguments (nn layout) and PyTorch's float64 results")
    args = parser.parse_args(argv)
    try:
        factory = load_factory(args.model)
        made = factory()
        if not (isinstance(made, tuple) and len(made) == 2
                and isinstance(made[0], nn.Module)):
            raise ImportFailure(f"{args.model}() must return (module, "
                                "example_inputs)")
        module, inputs = made
        inputs = tuple(inputs)
        name = args.function or re.sub(r"\W", "_", args.model.split(":")[-1])
        header = f"// Imported by torch_import.py from {args.model}."
        text, reference = import_module(module, inputs, name, header)
    except ImportFailure as failure:
        print(f"torch_import: {failure}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    if args.reference:
        with open(args.reference, "w", encoding="utf-8") as out:
            json.dump(reference, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
