// The binders of the compute ops (nn.*): each checks its instruction's
// shapes once and binds a body that calls the KernelSet on local shards.
// Deterministic mode's per-row partial sums are set up here for the ops
// that sum over batch rows (docs/runtime.md, "Deterministic mode").
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"

namespace loom::runtime {
namespace {

// The CUDA loss gradients take dloss as a host value; the executor knows it
// without reading the GPU only when it is the seed it feeds.
constexpr char kDlossNotSeed[] =
    "dloss is not the plan's loss_grad_seed; the CUDA loss-gradient kernels take dloss as a host "
    "value, known only for the fed seed (run this plan with --device=cpu)";

}  // namespace

absl::Status Executor::bindEmbedding(Site& site) {
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(2, 1); !st.ok()) return st;
  const int64_t hidden = shape(o[1]).back();
  const int64_t tokens = numel(o[0]);
  absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(plan_.buffers[o[1]], plan_.mesh, coords_);
  if (!box.ok()) return box.status();
  if (numel(r[0]) != tokens * hidden) return site.fail("result is not ids x hidden");
  const int64_t rowBegin = box->offsets[0], tableRows = box->valid[0];
  site.bound.body = [=, this](int64_t) {
    return kernels_->embedding(i32(o[0]), ref(o[1]), ref(r[0]), tokens, hidden, rowBegin,
                               tableRows);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindEmbeddingGrad(Site& site) {
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(2, 1); !st.ok()) return st;
  const int64_t hidden = shape(r[0]).back();
  const int64_t tokens = numel(o[0]);
  absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(plan_.buffers[r[0]], plan_.mesh, coords_);
  if (!box.ok()) return box.status();
  if (numel(o[1]) != tokens * hidden) return site.fail("dy is not ids x hidden");
  const int64_t rowBegin = box->offsets[0], tableRows = box->valid[0];
  const int64_t batch = order_->partials();
  if (absl::Status st = order_->reduceOverRows(site.bound, tokens, {true}); !st.ok()) {
    return site.fail(std::string(st.message()));
  }
  const int64_t table = numel(r[0]);
  site.bound.body = [=, this](int64_t) {
    const int64_t per = tokens / batch;
    absl::Status s =
        kernels_->zero2D(ref(r[0]).data, 0, batch * table * comm::dtypeSize(ref(r[0]).dtype), 1);
    for (int64_t b = 0; b < batch; ++b) {
      s.Update(kernels_->embeddingGrad(i32(o[0]) + b * per, ref(o[1]).at(b * per * hidden),
                                       ref(r[0]).at(b * table), per, hidden, rowBegin, tableRows));
    }
    return s;
  };
  return absl::OkStatus();
}

absl::Status Executor::bindLinear(Site& site) {
  const auto& [o, r] = site.io();
  if (o.size() != 2 && o.size() != 3) return site.fail("expected x, w and an optional bias");
  if (shape(o[1]).size() != 2) return site.fail("w must be rank 2");
  const int64_t inF = shape(o[1])[0], outF = shape(o[1])[1];
  if (shape(o[0]).back() != inF) {
    return site.fail(
        absl::StrCat("x ", shapeText(shape(o[0])), " does not match w ", shapeText(shape(o[1]))));
  }
  const int64_t rows = numel(o[0]) / inF;
  if (numel(r[0]) != rows * outF) return site.fail("result size");
  const bool bias = o.size() == 3;
  if (bias && numel(o[2]) != outF) return site.fail("bias size");
  const int64_t chunk = order_->gemmChunk(rows);
  site.bound.body = [=, this](int64_t) {
    absl::Status s;
    for (int64_t c = 0; c < rows; c += chunk) {
      s.Update(kernels_->linear(ref(o[0]).at(c * inF), ref(o[1]), bias ? ref(o[2]) : Ref{},
                                ref(r[0]).at(c * outF), chunk, inF, outF));
    }
    return s;
  };
  return absl::OkStatus();
}

absl::Status Executor::bindMatmul(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(2, 1); !st.ok()) return st;
  const bool tl = in.attrs.transpose_lhs, tr = in.attrs.transpose_rhs;
  if (tl && tr) return site.fail("transpose_lhs and transpose_rhs together are not supported");
  if (tl) {
    if (shape(r[0]).size() != 2) return site.fail("transpose_lhs result must be rank 2");
    const int64_t m = shape(r[0])[0], n = shape(r[0])[1];
    const int64_t rows = numel(o[0]) / m;
    if (shape(o[0]).back() != m || shape(o[1]).back() != n || numel(o[1]) != rows * n) {
      return site.fail("lhs^T rhs shapes disagree");
    }
    const int64_t batch = order_->partials();
    if (absl::Status st = order_->reduceOverRows(site.bound, rows, {true}); !st.ok()) {
      return site.fail(std::string(st.message()));
    }
    site.bound.body = [=, this](int64_t) {
      const int64_t per = rows / batch;
      absl::Status s;
      for (int64_t b = 0; b < batch; ++b) {
        s.Update(kernels_->matmulTransposeLhs(ref(o[0]).at(b * per * m), ref(o[1]).at(b * per * n),
                                              ref(r[0]).at(b * m * n), per, m, n));
      }
      return s;
    };
  } else {
    if (shape(o[1]).size() != 2)
      return site.fail("rhs must be rank 2 (batched matmuls are not supported)");
    const int64_t k = shape(o[0]).back();
    const int64_t n = tr ? shape(o[1])[0] : shape(o[1])[1];
    if ((tr ? shape(o[1])[1] : shape(o[1])[0]) != k) return site.fail("contraction dims disagree");
    const int64_t rows = numel(o[0]) / k;
    if (numel(r[0]) != rows * n) return site.fail("result size");
    const int64_t chunk = order_->gemmChunk(rows);
    site.bound.body = [=, this](int64_t) {
      absl::Status s;
      for (int64_t c = 0; c < rows; c += chunk) {
        s.Update(tr ? kernels_->matmulTransposeRhs(ref(o[0]).at(c * k), ref(o[1]),
                                                   ref(r[0]).at(c * n), chunk, k, n)
                    : kernels_->matmul(ref(o[0]).at(c * k), ref(o[1]), ref(r[0]).at(c * n), chunk,
                                       k, n));
      }
      return s;
    };
  }
  return absl::OkStatus();
}

absl::Status Executor::bindNorm(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  const bool layer = in.op == "nn.layer_norm";
  if (absl::Status st = site.need(layer ? 3 : 2, 1); !st.ok()) return st;
  const int64_t hidden = shape(o[0]).back(), rows = numel(o[0]) / hidden;
  if (numel(o[1]) != hidden) return site.fail("gamma size");
  const float eps = static_cast<float>(*in.attrs.epsilon);
  site.bound.body = [=, this](int64_t) {
    if (layer)
      return kernels_->layerNorm(ref(o[0]), ref(o[1]), ref(o[2]), ref(r[0]), rows, hidden, eps);
    return kernels_->rmsNorm(ref(o[0]), ref(o[1]), ref(r[0]), rows, hidden, eps);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindNormGrad(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  const bool layer = in.op == "nn.layer_norm_grad";
  if (absl::Status st = site.need(3, layer ? 3 : 2); !st.ok()) return st;
  const int64_t hidden = shape(o[0]).back(), rows = numel(o[0]) / hidden;
  if (numel(o[1]) != hidden || numel(o[2]) != numel(o[0])) return site.fail("shapes disagree");
  const float eps = static_cast<float>(*in.attrs.epsilon);
  const int64_t batch = order_->partials();
  absl::Status rowsSplit = order_->reduceOverRows(
      site.bound, rows,
      layer ? std::vector<bool>{false, true, true} : std::vector<bool>{false, true});
  if (!rowsSplit.ok()) return site.fail(std::string(rowsSplit.message()));
  site.bound.body = [=, this](int64_t) {
    const int64_t per = rows / batch;
    absl::Status s;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t t = b * per * hidden, g = b * hidden;
      s.Update(layer ? kernels_->layerNormGrad(ref(o[0]).at(t), ref(o[1]), ref(o[2]).at(t),
                                               ref(r[0]).at(t), ref(r[1]).at(g), ref(r[2]).at(g),
                                               per, hidden, eps)
                     : kernels_->rmsNormGrad(ref(o[0]).at(t), ref(o[1]), ref(o[2]).at(t),
                                             ref(r[0]).at(t), ref(r[1]).at(g), per, hidden, eps));
    }
    return s;
  };
  return absl::OkStatus();
}

absl::Status Executor::bindRope(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  const std::vector<int64_t>& s = shape(o[0]);
  if (s.size() != 4 || s[3] % 2) return site.fail("rope wants [B, S, H, D] with D even");
  for (const plan::AxisPlacement& p : plan_.buffers[o[0]].placement) {
    if (p.kind == plan::AxisPlacement::Kind::kShard && p.dim == 1) {
      return site.fail("rope of a sequence-sharded tensor is not supported");
    }
  }
  const plan::Attrs& a = in.attrs;
  const float theta = static_cast<float>(*a.theta);
  const bool inverse = a.inverse;
  plan::RopeScaling scaling;
  scaling.factor = a.scaling_factor.value_or(1.0);
  // Llama 3.1's bands come as three attributes (nn.rope's verifier keeps
  // them together); a plan with only some of them is not one the planner wrote.
  const int bands = static_cast<int>(a.low_freq_factor.has_value()) +
                    a.high_freq_factor.has_value() + a.original_max_positions.has_value();
  if (bands == 3 && a.scaling_factor.has_value()) {
    scaling.low_freq_factor = *a.low_freq_factor;
    scaling.high_freq_factor = *a.high_freq_factor;
    scaling.original_max_positions = *a.original_max_positions;
  } else if (bands != 0) {
    return site.fail(
        "rope's llama3 scaling needs scaling_factor, low_freq_factor, high_freq_factor and "
        "original_max_positions together");
  }
  site.bound.body = [=, this](int64_t) {
    return kernels_->rope(ref(o[0]), ref(r[0]), s[0], s[1], s[2], s[3], theta, inverse, scaling);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindAttention(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  const bool grad = in.op == "nn.attention_grad";
  if (absl::Status st = site.need(grad ? 4 : 3, grad ? 3 : 1); !st.ok()) return st;
  const std::vector<int64_t>& q = shape(o[0]);
  const std::vector<int64_t>& k = shape(o[1]);
  if (q.size() != 4 || k.size() != 4 || shape(o[2]) != k || q[0] != k[0] || q[1] != k[1] ||
      q[3] != k[3] || k[2] == 0 || q[2] % k[2]) {
    return site.fail(absl::StrCat("q ", shapeText(q), " and k/v ", shapeText(k), " do not fit"));
  }
  const cpu::AttentionShape a{q[0], q[1], q[2], k[2], q[3]};
  if (absl::Status st = kernels_->checkAttention(a); !st.ok())
    return site.fail(std::string(st.message()));
  site.bound.body = [=, this](int64_t) {
    if (grad) {
      return kernels_->attentionGrad(ref(o[0]), ref(o[1]), ref(o[2]), ref(o[3]), ref(r[0]),
                                     ref(r[1]), ref(r[2]), a);
    }
    return kernels_->attention(ref(o[0]), ref(o[1]), ref(o[2]), ref(r[0]), a);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindActivation(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  const bool gelu = in.op == "nn.gelu";
  const int64_t n = numel(o[0]);
  site.bound.body = [=, this](int64_t) {
    if (gelu) return kernels_->gelu(ref(o[0]), ref(r[0]), n);
    return kernels_->silu(ref(o[0]), ref(r[0]), n);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindActivationGrad(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(2, 1); !st.ok()) return st;
  const bool gelu = in.op == "nn.gelu_grad";
  const int64_t n = numel(o[0]);
  if (numel(o[1]) != n) return site.fail("x and dy differ in size");
  site.bound.body = [=, this](int64_t) {
    if (gelu) return kernels_->geluGrad(ref(o[0]), ref(o[1]), ref(r[0]), n);
    return kernels_->siluGrad(ref(o[0]), ref(o[1]), ref(r[0]), n);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindElementwise(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(2, 1); !st.ok()) return st;
  const int64_t n = numel(o[0]);
  if (numel(o[1]) != n || numel(r[0]) != n)
    return site.fail("operands differ in size (no broadcasting)");
  const bool mul = in.op == "nn.mul";
  order_->carryRows(site.bound);
  site.bound.body = [=, this](int64_t) {
    const int64_t count = n * std::max<int64_t>(1, stacks_[r[0]].rows);
    if (mul) return kernels_->mul(ref(o[0]), ref(o[1]), ref(r[0]), count);
    return kernels_->add(ref(o[0]), ref(o[1]), ref(r[0]), count);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindSoftmax(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  const bool grad = in.op == "nn.softmax_grad";
  if (absl::Status st = site.need(grad ? 2 : 1, 1); !st.ok()) return st;
  const int64_t n = shape(o[0]).back(), rows = numel(o[0]) / n;
  site.bound.body = [=, this](int64_t) {
    if (grad) return kernels_->softmaxGrad(ref(o[0]), ref(o[1]), ref(r[0]), rows, n);
    return kernels_->softmax(ref(o[0]), ref(r[0]), rows, n);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindReshape(Site& site) {
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  if (numel(o[0]) != numel(r[0])) return site.fail("reshape changes the element count");
  site.bound.view_of = o[0];
  site.bound.body = [](int64_t) { return absl::OkStatus(); };
  return absl::OkStatus();
}

absl::Status Executor::bindTranspose(Site& site) {
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  const std::vector<int64_t>& perm = site.in.attrs.permutation;
  const std::vector<int64_t> in = shape(o[0]);
  std::vector<bool> seen(in.size(), false);
  bool valid = perm.size() == in.size();
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    valid = perm[i] >= 0 && perm[i] < static_cast<int64_t>(in.size()) && !seen[perm[i]];
    if (valid) seen[perm[i]] = true;
  }
  if (!valid)
    return site.fail(absl::StrCat("permutation [", absl::StrJoin(perm, ", "),
                                  "] does not permute the ", in.size(), " dims of ",
                                  shapeText(in)));
  std::vector<int64_t> want(in.size());
  for (size_t i = 0; i < perm.size(); ++i) want[i] = in[perm[i]];
  if (want != shape(r[0]) || plan_.buffers[o[0]].dtype != plan_.buffers[r[0]].dtype) {
    return site.fail(absl::StrCat("transposing ", shapeText(in), " gives ", shapeText(want),
                                  " of the same type, not ", shapeText(shape(r[0]))));
  }
  const std::string where = site.in.where();
  site.bound.body = [=, this](int64_t) -> absl::Status {
    if (stacks_[o[0]].rows > 0) {
      return absl::UnimplementedError(
          absl::StrCat(where,
                       ": deterministic mode does not transpose per-row "
                       "partial sums"));
    }
    return permuteDims(*kernels_, ref(o[0]), in, perm, ref(r[0]));
  };
  return absl::OkStatus();
}

absl::Status Executor::bindReduceSum(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  const std::vector<int64_t>& dims = in.attrs.dims;
  const std::vector<int64_t> s = shape(o[0]);
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 0 || dims[k] >= static_cast<int64_t>(s.size()) || (k && dims[k] <= dims[k - 1])) {
      return site.fail("dims must be strictly increasing and in range");
    }
  }
  if (absl::Status st = kernels_->checkReduceSum(s.size()); !st.ok())
    return site.fail(std::string(st.message()));
  // A sum over the batch dim may be kept per batch row.
  const bool perRow = order_->keepsRows(dims, s);
  if (perRow) {
    if (absl::Status st = order_->reduceOverRows(site.bound, s[0], {true}); !st.ok()) {
      return site.fail(std::string(st.message()));
    }
  }
  std::vector<int64_t> rowShape = s;
  rowShape[0] = perRow ? 1 : s[0];
  const int64_t inRow = perRow ? numel(o[0]) / s[0] : 0, outRow = numel(r[0]);
  site.bound.body = [=, this](int64_t) {
    if (!perRow) {
      return kernels_->reduceSum(ref(o[0]), s, dims, ref(r[0]));
    }
    absl::Status status;
    for (int64_t b = 0; b < s[0]; ++b) {
      status.Update(
          kernels_->reduceSum(ref(o[0]).at(b * inRow), rowShape, dims, ref(r[0]).at(b * outRow)));
    }
    return status;
  };
  return absl::OkStatus();
}

absl::Status Executor::bindCrossEntropy(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  const bool grad = in.op == "nn.cross_entropy_grad";
  if (absl::Status st = site.need(grad ? 3 : 2, 1); !st.ok()) return st;
  const int64_t vocab = shape(o[0]).back(), tokens = numel(o[0]) / vocab;
  if (numel(o[1]) != tokens) return site.fail("labels do not match the logits' tokens");
  for (const plan::AxisPlacement& p : plan_.buffers[o[0]].placement) {
    if (p.kind == plan::AxisPlacement::Kind::kShard &&
        p.dim == static_cast<int64_t>(shape(o[0]).size()) - 1) {
      return site.fail("the logits are split over the vocabulary; this op needs them whole");
    }
  }
  if (absl::Status st = grad ? site.needF32({o[2]}) : site.needF32({r[0]}); !st.ok()) return st;
  const float scale = static_cast<float>(in.attrs.scale.value_or(1.0));
  const bool seedConstant = !kernels_->hostAddressable();
  if (grad && seedConstant && o[2] != plan_.interface.loss_grad_seed)
    return site.fail(kDlossNotSeed);
  // The loss may be kept as one mean per batch row.
  const int64_t batch = grad ? 1 : order_->partials();
  if (!grad) {
    if (absl::Status st = order_->reduceOverRows(site.bound, tokens, {true}, /*mean=*/true);
        !st.ok()) {
      return site.fail(std::string(st.message()));
    }
  }
  site.bound.body = [=, this](int64_t) {
    if (grad) {
      return kernels_->crossEntropyGrad(ref(o[0]), i32(o[1]),
                                        seedConstant ? loss_grad_seed_ : *f32(o[2]), scale,
                                        ref(r[0]), tokens, vocab);
    }
    const int64_t per = tokens / batch;
    absl::Status s;
    for (int64_t b = 0; b < batch; ++b) {
      s.Update(kernels_->crossEntropy(ref(o[0]).at(b * per * vocab), i32(o[1]) + b * per,
                                      f32(r[0]) + b, per, vocab));
    }
    return s;
  };
  return absl::OkStatus();
}

absl::Status Executor::bindBiasAdd(Site& site) {
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(2, 1); !st.ok()) return st;
  const int64_t outF = shape(o[0]).back(), rows = numel(o[0]) / std::max<int64_t>(outF, 1);
  if (numel(o[1]) != outF) return site.fail("bias does not match x's last dim");
  site.bound.body = [=, this](int64_t) {
    return kernels_->biasAdd(ref(o[0]), ref(o[1]), ref(r[0]), rows, outF);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindVocab(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  // Vocab-parallel cross-entropy: the logits' last dim may be a shard
  // of the vocabulary; its global rows come from the logits' placement.
  const bool ce = in.op == "nn.vocab_cross_entropy";
  const int64_t logitsId = ce ? -1 : o.at(0);
  int64_t local = 0, valid = 0, rowBegin = 0, tokens = 0;
  if (!ce) {
    const plan::Buffer& logits = plan_.buffers[logitsId];
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(logits, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    local = logits.local_shape.back();
    rowBegin = box->offsets.back();
    tokens = logits.numel() / std::max<int64_t>(local, 1);
    // A padded buffer's global dim is its padded extent; `vocab` says
    // how many rows are real.
    const int64_t vocab = in.attrs.vocab.value_or(logits.global_shape.back());
    if (vocab > logits.global_shape.back()) return site.fail("vocab exceeds the logits' rows");
    valid = std::clamp<int64_t>(vocab - rowBegin, 0, local);
  }
  if (in.op == "nn.vocab_max") {
    if (absl::Status st = site.need(1, 1); !st.ok()) return st;
    if (numel(r[0]) != tokens) return site.fail("max must hold one value per token");
    if (absl::Status st = site.needF32({r[0]}); !st.ok()) return st;
    site.bound.body = [=, this](int64_t) {
      return kernels_->vocabMax(ref(o[0]), f32(r[0]), tokens, local, valid);
    };
  } else if (in.op == "nn.vocab_stats") {
    if (absl::Status st = site.need(3, 1); !st.ok()) return st;
    if (numel(o[1]) != tokens || numel(o[2]) != tokens || numel(r[0]) != 2 * tokens) {
      return site.fail("labels, max and stats must match the logits' tokens");
    }
    if (absl::Status st = site.needF32({o[2], r[0]}); !st.ok()) return st;
    site.bound.body = [=, this](int64_t) {
      return kernels_->vocabStats(ref(o[0]), i32(o[1]), f32(o[2]), f32(r[0]), tokens, local, valid,
                                  rowBegin);
    };
  } else if (ce) {
    if (absl::Status st = site.need(1, 1); !st.ok()) return st;
    const int64_t count = numel(o[0]) / 2;
    if (absl::Status st = site.needF32({o[0], r[0]}); !st.ok()) return st;
    site.bound.body = [=, this](int64_t) {
      return kernels_->vocabCrossEntropy(f32(o[0]), f32(r[0]), count);
    };
  } else if (in.op == "nn.vocab_cross_entropy_grad") {
    if (absl::Status st = site.need(5, 1); !st.ok()) return st;
    if (numel(o[1]) != tokens || numel(o[2]) != tokens || numel(o[3]) != 2 * tokens ||
        numel(r[0]) != numel(o[0])) {
      return site.fail("labels, max, stats and the gradient must match the logits");
    }
    if (absl::Status st = site.needF32({o[2], o[3], o[4]}); !st.ok()) return st;
    const float scale = static_cast<float>(in.attrs.scale.value_or(1.0));
    const bool seedConstant = !kernels_->hostAddressable();
    if (seedConstant && o[4] != plan_.interface.loss_grad_seed) return site.fail(kDlossNotSeed);
    site.bound.body = [=, this](int64_t) {
      return kernels_->vocabCrossEntropyGrad(ref(o[0]), i32(o[1]), f32(o[2]), f32(o[3]),
                                             seedConstant ? loss_grad_seed_ : *f32(o[4]), scale,
                                             ref(r[0]), tokens, local, valid, rowBegin);
    };
  } else {
    return site.fail("unknown vocab-parallel op");
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime
