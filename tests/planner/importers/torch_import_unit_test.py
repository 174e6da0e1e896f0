#!/usr/bin/python3
"""Unit tests of torch_import.py: layouts, names, tracing, refusal messages.

Run by Bazel as an sh_test with the importer's path as the first argument
(Debian's /usr/bin/python3 has torch; no Python toolchain is configured).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv.pop(1))))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import loom_torch  # noqa: E402
import torch_import  # noqa: E402


def imported(module, *inputs):
    return torch_import.import_module(module, inputs, "f")


class Lambda(nn.Module):
    """A module whose forward is the given function of itself and x."""

    def __init__(self, fn, **children):
        super().__init__()
        self.fn = fn
        for name, child in children.items():
            setattr(self, name, child)

    def forward(self, x):
        return self.fn(self, x)


class ImportTest(unittest.TestCase):

    def test_linear_weight_is_stored_in_then_out(self):
        torch.manual_seed(0)
        module = Lambda(lambda m, x: m.fc(x), fc=nn.Linear(4, 3))
        text, reference = imported(module, torch.randn(2, 5, 4))
        self.assertIn('%fc.weight: tensor<4x3xf32> {nn.param, nn.name = '
                      '"fc.weight", nn.init = {kind = "normal", mean = 0.0, '
                      'std = 0.02}}', text)
        self.assertIn('{nn.param, nn.name = "fc.bias", nn.init = {kind = '
                      '"zeros", mean = 0.0, std = 0.0}}', text)
        self.assertIn("nn.linear %x, %fc.weight, %fc.bias", text)
        weight = reference["arguments"][1]
        self.assertEqual(weight["shape"], [4, 3])
        self.assertEqual(weight["values"],
                         module.fc.weight.detach().t().double().flatten()
                         .tolist())

    def test_tuple_unpacking_traces(self):
        def forward(m, x):
            batch, seq, hidden = x.shape
            q, k = m.fc(x).split(hidden, dim=2)
            return (q + k).view(batch, seq, 2, hidden // 2)

        module = Lambda(forward, fc=nn.Linear(4, 8))
        text, _ = imported(module, torch.randn(2, 3, 4))
        self.assertIn('nn.name = "fc.weight[4:8, :]"', text)
        self.assertIn("-> tensor<2x3x2x2xf32>", text)

    def test_float_formatting_parses_in_mlir(self):
        self.assertEqual(torch_import.mlir_float(1e-5), "1.0e-05")
        self.assertEqual(torch_import.mlir_float(500000.0), "500000.0")
        self.assertEqual(torch_import.mlir_float(2.5e-10), "2.5e-10")

    def test_tied_linear_keeps_one_argument(self):
        embed = nn.Embedding(10, 4)
        head = nn.Linear(4, 10, bias=False)
        head.weight = embed.weight
        module = Lambda(lambda m, x: m.head(m.embed(x)), embed=embed,
                        head=head)
        text, _ = imported(module, torch.randint(0, 10, (2, 3)))
        self.assertEqual(text.count("nn.param"), 1)
        self.assertIn("nn.matmul %embed, %embed.weight transpose_rhs", text)

    def refusal(self, module, *inputs):
        with self.assertRaises(torch_import.ImportFailure) as caught:
            imported(module, *inputs)
        return str(caught.exception)

    def test_erf_gelu_is_refused_with_the_fix(self):
        message = self.refusal(Lambda(lambda m, x: m.act(x), act=nn.GELU()),
                               torch.randn(2, 4))
        self.assertRegex(message, r"^unsupported operation 'nn.GELU' "
                         r"\(node 'act', called from act\): nn.gelu is the "
                         r"tanh approximation; use nn.GELU\(approximate="
                         r"'tanh'\); supported: ")

    def test_broadcasting_is_refused(self):
        bias = nn.Parameter(torch.zeros(4))
        module = Lambda(lambda m, x: x + m.bias)
        module.bias = bias
        message = self.refusal(module, torch.randn(2, 4))
        self.assertIn("nn.add operands differ: tensor<2x4xf32> vs "
                      "tensor<4xf32> (node 'add', called from <root>); nn has "
                      "no broadcasting", message)

    def test_scalars_are_refused(self):
        message = self.refusal(Lambda(lambda m, x: x * 2.0),
                               torch.randn(2, 4))
        self.assertIn("operand 2.0 is not a tensor (node 'mul'", message)

    def test_buffers_are_refused(self):
        module = Lambda(lambda m, x: x + m.offset)
        module.register_buffer("offset", torch.zeros(2, 4))
        message = self.refusal(module, torch.randn(2, 4))
        self.assertIn("'offset' is a buffer or constant tensor", message)

    def test_slicing_is_refused(self):
        message = self.refusal(Lambda(lambda m, x: x.split(2, dim=1)[0]),
                               torch.randn(2, 4))
        self.assertIn("unsupported operation 'Tensor.split'", message)
        self.assertIn("nn has no slice op", message)

    def test_rope_and_attention_keep_their_attributes(self):
        module = Lambda(lambda m, x: loom_torch.causal_attention(
            loom_torch.rope(x, 500000.0), x, x))
        text, _ = imported(module, torch.randn(1, 4, 2, 8))
        self.assertIn("nn.rope %x theta 500000.0", text)
        self.assertIn("nn.attention %rope, %x, %x", text)

    def test_bad_model_specs(self):
        with self.assertRaisesRegex(torch_import.ImportFailure,
                                    "is not FILE.py:FACTORY"):
            torch_import.load_factory("no_colon")
        with self.assertRaisesRegex(torch_import.ImportFailure,
                                    "does not exist"):
            torch_import.load_factory("missing.py:f")
        with self.assertRaisesRegex(torch_import.ImportFailure,
                                    "has no factory function 'nope'"):
            torch_import.load_factory("torch_import:nope")


if __name__ == "__main__":
    unittest.main()
