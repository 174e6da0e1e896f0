// Emits the `nn` graphs of the model zoo: GPT-2 (pre-LayerNorm, learned
// positions, GELU MLP, tied LM head) and the Llama family (RMSNorm, rotary
// GQA attention with optional q/k/v biases and frequency scaling, SwiGLU
// MLP, tied or untied output), with checkpoint parameter names.
#include "planner/models/zoo_builder.h"

#include <cctype>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::models {
namespace {

using mlir::Value;

// How a parameter starts, as GPT-2 and Llama initialise them: weights from
// normal(0, 0.02), norm scales at one, biases at zero.
enum class Init { kNormal, kOnes, kZeros };

constexpr double kInitStd = 0.02;

// Builds the body of the model function into a detached block and collects
// the argument list as it goes, so parameters are declared where they are
// first used and the function is created once with its final signature.
class GraphEmitter {
 public:
  GraphEmitter(mlir::MLIRContext& context, const TransformerConfig& config, const BatchShape& shape,
               mlir::Type element_type)
      : builder_(&context),
        config_(config),
        shape_(shape),
        element_type_(element_type),
        block_(std::make_unique<mlir::Block>()) {
    builder_.setInsertionPointToEnd(block_.get());
  }

  // A non-parameter argument: token ids, labels, position ids.
  Value input(llvm::StringRef name, mlir::Type type) {
    arg_attrs_.push_back(builder_.getDictionaryAttr({}));
    return block_->addArgument(type, loc(name));
  }

  // A parameter argument named after its checkpoint tensor, with its init.
  Value param(const std::string& name, llvm::ArrayRef<int64_t> shape, Init init = Init::kNormal) {
    mlir::MLIRContext* context = builder_.getContext();
    const char* kind = init == Init::kNormal ? "normal" : init == Init::kOnes ? "ones" : "zeros";
    const mlir::DictionaryAttr initAttr = builder_.getDictionaryAttr({
        builder_.getNamedAttr("kind", builder_.getStringAttr(kind)),
        builder_.getNamedAttr("mean", builder_.getF64FloatAttr(0)),
        builder_.getNamedAttr("std",
                              builder_.getF64FloatAttr(init == Init::kNormal ? kInitStd : 0)),
    });
    arg_attrs_.push_back(builder_.getDictionaryAttr({
        builder_.getNamedAttr(nn::NnDialect::kParamAttrName, mlir::UnitAttr::get(context)),
        builder_.getNamedAttr(nn::NnDialect::kNameAttrName, builder_.getStringAttr(name)),
        builder_.getNamedAttr(nn::NnDialect::kInitAttrName, initAttr),
    }));
    return block_->addArgument(mlir::RankedTensorType::get(shape, element_type_), loc(name));
  }

  mlir::Location loc(llvm::StringRef name) {
    return mlir::NameLoc::get(builder_.getStringAttr(name));
  }

  // [batch, seq, ...dims] activations and ids.
  mlir::RankedTensorType tokens(llvm::ArrayRef<int64_t> dims, mlir::Type element) const {
    llvm::SmallVector<int64_t> shape = {shape_.batch, shape_.seq};
    shape.append(dims.begin(), dims.end());
    return mlir::RankedTensorType::get(shape, element);
  }

  Value linear(const std::string& at, Value x, Value weight, Value bias = nullptr) {
    return nn::LinearOp::create(builder_, loc(at), x, weight, bias);
  }

  // [B, S, heads * D] -> [B, S, heads, D] and back.
  Value splitHeads(const std::string& at, Value x, int64_t heads) {
    return nn::ReshapeOp::create(builder_, loc(at),
                                 tokens({heads, config_.headDim()}, element_type_), x);
  }
  Value mergeHeads(const std::string& at, Value x) {
    return nn::ReshapeOp::create(builder_, loc(at), tokens({config_.hidden}, element_type_), x);
  }

  mlir::OpBuilder& builder() { return builder_; }
  mlir::FloatAttr f64(double value) { return builder_.getF64FloatAttr(value); }

  // Returns `loss` and wraps the block into the model function of `module`.
  void finish(mlir::ModuleOp module, Value loss) {
    mlir::func::ReturnOp::create(builder_, loc("loss"), loss);
    builder_.setInsertionPointToEnd(module.getBody());
    const auto type = builder_.getFunctionType(block_->getArgumentTypes(), {loss.getType()});
    auto func =
        mlir::func::FuncOp::create(builder_, loc(config_.name), modelFunctionName(config_), type,
                                   /*attrs=*/{}, arg_attrs_);
    func.getBody().push_back(block_.release());
  }

 private:
  mlir::OpBuilder builder_;
  const TransformerConfig& config_;
  const BatchShape& shape_;
  mlir::Type element_type_;
  std::unique_ptr<mlir::Block> block_;
  llvm::SmallVector<mlir::DictionaryAttr> arg_attrs_;
};

// The LM head: a weight of its own ([hidden, vocab], as the other
// projections), or the token table read as [vocab, hidden] when tied.
Value emitHead(GraphEmitter& e, const TransformerConfig& c, const std::string& name, Value x,
               Value embedding) {
  if (c.tie_embeddings) {
    return nn::MatmulOp::create(e.builder(), e.loc(name), x, embedding,
                                /*transpose_lhs=*/false, /*transpose_rhs=*/true);
  }
  const Value head = e.param(name + ".weight", {c.hidden, c.vocab});
  return e.linear(name, x, head);
}

// Hugging Face `GPT2LMHeadModel`. Its Conv1D weights are stored [in, out],
// the layout nn.linear takes, so they map to arguments unchanged. nn has no
// slice op, so the fused c_attn projection is declared as three column
// blocks (query, key, value), each named after the slice of the checkpoint
// tensor it is, e.g. "transformer.h.0.attn.c_attn.weight[:, 768:1536]".
Value emitGpt2(GraphEmitter& e, const TransformerConfig& c, Value input_ids, Value position_ids,
               Value labels) {
  mlir::OpBuilder& b = e.builder();
  const int64_t h = c.hidden;
  const double eps = c.norm_eps;
  const Value wte = e.param("transformer.wte.weight", {c.vocab, h});
  const Value wpe = e.param("transformer.wpe.weight", {c.max_seq, h});
  const Value tok = nn::EmbeddingOp::create(b, e.loc("transformer.wte"), input_ids, wte);
  const Value pos = nn::EmbeddingOp::create(b, e.loc("transformer.wpe"), position_ids, wpe);
  Value x = nn::AddOp::create(b, e.loc("transformer.wpe"), tok, pos);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = absl::StrCat("transformer.h.", layer, ".");
    auto norm = [&](const std::string& name, Value in) {
      const Value gamma = e.param(p + name + ".weight", {h}, Init::kOnes);
      const Value beta = e.param(p + name + ".bias", {h}, Init::kZeros);
      return Value(nn::LayerNormOp::create(b, e.loc(p + name), in, gamma, beta, e.f64(eps)));
    };
    const Value ln1 = norm("ln_1", x);
    Value qkv[3];
    for (int64_t i = 0; i < 3; ++i) {
      const std::string cols = absl::StrCat(i * h, ":", (i + 1) * h);
      const Value w = e.param(absl::StrCat(p, "attn.c_attn.weight[:, ", cols, "]"), {h, h});
      const Value bias =
          e.param(absl::StrCat(p, "attn.c_attn.bias[", cols, "]"), {h}, Init::kZeros);
      qkv[i] = e.splitHeads(p + "attn", e.linear(p + "attn.c_attn", ln1, w, bias), c.num_heads);
    }
    const Value attn = nn::AttentionOp::create(b, e.loc(p + "attn"), qkv[0], qkv[1], qkv[2]);
    const Value proj_w = e.param(p + "attn.c_proj.weight", {h, h});
    const Value proj_b = e.param(p + "attn.c_proj.bias", {h}, Init::kZeros);
    const Value proj = e.linear(p + "attn.c_proj", e.mergeHeads(p + "attn", attn), proj_w, proj_b);
    x = nn::AddOp::create(b, e.loc(p + "attn"), x, proj);

    const Value ln2 = norm("ln_2", x);
    const Value fc_w = e.param(p + "mlp.c_fc.weight", {h, c.ffn_hidden});
    const Value fc_b = e.param(p + "mlp.c_fc.bias", {c.ffn_hidden}, Init::kZeros);
    const Value fc = e.linear(p + "mlp.c_fc", ln2, fc_w, fc_b);
    const Value act = nn::GeluOp::create(b, e.loc(p + "mlp.act"), fc);
    const Value out_w = e.param(p + "mlp.c_proj.weight", {c.ffn_hidden, h});
    const Value out_b = e.param(p + "mlp.c_proj.bias", {h}, Init::kZeros);
    const Value out = e.linear(p + "mlp.c_proj", act, out_w, out_b);
    x = nn::AddOp::create(b, e.loc(p + "mlp"), x, out);
  }
  const Value gamma = e.param("transformer.ln_f.weight", {h}, Init::kOnes);
  const Value beta = e.param("transformer.ln_f.bias", {h}, Init::kZeros);
  x = nn::LayerNormOp::create(b, e.loc("transformer.ln_f"), x, gamma, beta, e.f64(eps));
  // Every released GPT-2 ties the head to the token table.
  const Value logits = emitHead(e, c, "lm_head", x, wte);
  return nn::CrossEntropyOp::create(b, e.loc("loss"), logits, labels);
}

// The tensor names of a Llama-family checkpoint, relative to a layer's
// prefix where they belong to one. Module paths (op locations) are the same
// names without ".weight".
struct LlamaNames {
  const char* embed;
  const char* layer_prefix;  // followed by the layer index and '.'
  const char* attention_norm;
  const char* attention;
  const char* q;
  const char* k;
  const char* v;
  const char* o;
  const char* mlp_norm;
  const char* mlp;
  const char* gate;
  const char* up;
  const char* down;
  const char* final_norm;
  const char* head;
};

// Meta's reference model (`model.py` of meta-llama/llama and llama-models).
constexpr LlamaNames kMetaNames = {.embed = "tok_embeddings",
                                   .layer_prefix = "layers.",
                                   .attention_norm = "attention_norm",
                                   .attention = "attention",
                                   .q = "wq",
                                   .k = "wk",
                                   .v = "wv",
                                   .o = "wo",
                                   .mlp_norm = "ffn_norm",
                                   .mlp = "feed_forward",
                                   .gate = "w1",
                                   .up = "w3",
                                   .down = "w2",
                                   .final_norm = "norm",
                                   .head = "output"};
// Hugging Face transformers' LlamaForCausalLM, MistralForCausalLM and
// Qwen2ForCausalLM.
constexpr LlamaNames kHuggingFaceNames = {.embed = "model.embed_tokens",
                                          .layer_prefix = "model.layers.",
                                          .attention_norm = "input_layernorm",
                                          .attention = "self_attn",
                                          .q = "q_proj",
                                          .k = "k_proj",
                                          .v = "v_proj",
                                          .o = "o_proj",
                                          .mlp_norm = "post_attention_layernorm",
                                          .mlp = "mlp",
                                          .gate = "gate_proj",
                                          .up = "up_proj",
                                          .down = "down_proj",
                                          .final_norm = "model.norm",
                                          .head = "lm_head"};

// One layer of the Llama family. Both checkpoints store nn.Linear weights
// [out, in]; the arguments hold them transposed ([in, out]) under the same
// names.
class LlamaLayerEmitter {
 public:
  LlamaLayerEmitter(GraphEmitter& e, const TransformerConfig& c, const LlamaNames& names,
                    int64_t layer)
      : e_(e), c_(c), n_(names), p_(absl::StrCat(names.layer_prefix, layer, ".")) {}

  Value emit(Value x) {
    x = attention(x);
    return mlp(x);
  }

 private:
  Value norm(const char* name, Value in) {
    const Value gamma = e_.param(p_ + name + ".weight", {c_.hidden}, Init::kOnes);
    return nn::RmsNormOp::create(e_.builder(), e_.loc(p_ + name), in, gamma, e_.f64(c_.norm_eps));
  }

  // `module`'s projection of `in` to `out` features, with a bias if asked.
  Value project(const std::string& module, const char* name, Value in, int64_t in_features,
                int64_t out_features, bool bias = false) {
    const std::string path = absl::StrCat(module, ".", name);
    const Value w = e_.param(path + ".weight", {in_features, out_features});
    const Value b = bias ? e_.param(path + ".bias", {out_features}, Init::kZeros) : nullptr;
    return e_.linear(path, in, w, b);
  }
  Value project(const std::string& module, const char* name, Value in, Value weight) {
    return e_.linear(absl::StrCat(module, ".", name), in, weight);
  }

  Value attention(Value x) {
    mlir::OpBuilder& b = e_.builder();
    const int64_t h = c_.hidden;
    const int64_t q_width = c_.num_heads * c_.headDim();
    const int64_t kv_width = c_.num_kv_heads * c_.headDim();
    const std::string attn = p_ + n_.attention;
    const Value xn = norm(n_.attention_norm, x);
    const bool bias = c_.qkv_bias;
    const Value q = e_.splitHeads(attn, project(attn, n_.q, xn, h, q_width, bias), c_.num_heads);
    const Value k =
        e_.splitHeads(attn, project(attn, n_.k, xn, h, kv_width, bias), c_.num_kv_heads);
    const Value v =
        e_.splitHeads(attn, project(attn, n_.v, xn, h, kv_width, bias), c_.num_kv_heads);
    const mlir::FloatAttr theta = e_.f64(c_.rope_theta);
    const Value qr = nn::RopeOp::create(b, e_.loc(attn), q, theta, false, c_.rope_scaling);
    const Value kr = nn::RopeOp::create(b, e_.loc(attn), k, theta, false, c_.rope_scaling);
    const Value o = nn::AttentionOp::create(b, e_.loc(attn), qr, kr, v);
    const Value out = project(attn, n_.o, e_.mergeHeads(attn, o), q_width, h);
    return nn::AddOp::create(b, e_.loc(attn), x, out);
  }

  // SwiGLU: down(silu(gate(x)) * up(x)).
  Value mlp(Value x) {
    mlir::OpBuilder& b = e_.builder();
    const std::string ffn = p_ + n_.mlp;
    const Value yn = norm(n_.mlp_norm, x);
    // Declared as Meta numbers them (w1, w2, w3), the argument order of
    // every earlier plan: parameters draw their init streams in that order.
    auto weight = [&](const char* name, int64_t in, int64_t out) {
      return e_.param(absl::StrCat(ffn, ".", name, ".weight"), {in, out});
    };
    const Value gate_w = weight(n_.gate, c_.hidden, c_.ffn_hidden);
    const Value down_w = weight(n_.down, c_.ffn_hidden, c_.hidden);
    const Value up_w = weight(n_.up, c_.hidden, c_.ffn_hidden);
    const Value gate = nn::SiluOp::create(b, e_.loc(ffn), project(ffn, n_.gate, yn, gate_w));
    const Value up = project(ffn, n_.up, yn, up_w);
    const Value down = project(ffn, n_.down, nn::MulOp::create(b, e_.loc(ffn), gate, up), down_w);
    return nn::AddOp::create(b, e_.loc(ffn), x, down);
  }

  GraphEmitter& e_;
  const TransformerConfig& c_;
  const LlamaNames& n_;
  const std::string p_;
};

// The Llama family (Llama 2/3, Mistral, Qwen2): RMSNorm, rotary GQA
// attention, SwiGLU MLP.
Value emitLlama(GraphEmitter& e, const TransformerConfig& c, Value tokens, Value labels) {
  mlir::OpBuilder& b = e.builder();
  const LlamaNames& names =
      c.names == CheckpointNames::kHuggingFace ? kHuggingFaceNames : kMetaNames;
  const std::string embed_name = names.embed;
  const Value embed = e.param(embed_name + ".weight", {c.vocab, c.hidden});
  Value x = nn::EmbeddingOp::create(b, e.loc(embed_name), tokens, embed);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    x = LlamaLayerEmitter(e, c, names, layer).emit(x);
  }
  const std::string norm_name = names.final_norm;
  const Value gamma = e.param(norm_name + ".weight", {c.hidden}, Init::kOnes);
  x = nn::RmsNormOp::create(b, e.loc(norm_name), x, gamma, e.f64(c.norm_eps));
  const Value logits = emitHead(e, c, names.head, x, embed);
  return nn::CrossEntropyOp::create(b, e.loc("loss"), logits, labels);
}

}  // namespace

std::string modelFunctionName(const TransformerConfig& config) {
  std::string name = config.name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> buildModel(mlir::MLIRContext& context,
                                                             const TransformerConfig& config,
                                                             const BatchShape& shape,
                                                             mlir::Type element_type) {
  if (absl::Status status = validateConfig(config); !status.ok()) return status;
  if (shape.batch < 1 || shape.seq < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model ", config.name,
                                                   ": batch and seq must be at least 1, got batch ",
                                                   shape.batch, ", seq ", shape.seq));
  }
  if (shape.seq > config.max_seq) {
    const char* why = config.family == ModelFamily::kGpt2
                          ? "its learned position table has max_seq rows"
                          : "it was trained up to that length";
    return absl::InvalidArgumentError(absl::StrCat("model ", config.name, ": seq ", shape.seq,
                                                   " exceeds the model's max_seq ", config.max_seq,
                                                   " (", why, "); choose seq <= ", config.max_seq));
  }
  if (config.sliding_window > 0 && shape.seq > config.sliding_window) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", config.name, ": seq ", shape.seq, " exceeds the model's sliding_window ",
        config.sliding_window,
        "; the graph's attention is causal over the whole sequence, which "
        "equals the model's sliding-window attention only up to the window, so plan with --seq <= ",
        config.sliding_window));
  }
  if (!element_type || !(element_type.isF32() || element_type.isBF16() || element_type.isF16())) {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (element_type) {
      os << element_type;
    } else {
      os << "no type";
    }
    return absl::InvalidArgumentError(
        absl::StrCat("model ", config.name, ": parameters must be f32, bf16 or f16, got ", text));
  }
  context.loadDialect<mlir::func::FuncDialect, nn::NnDialect>();

  mlir::OpBuilder top(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::NameLoc::get(top.getStringAttr(config.name)));
  GraphEmitter e(context, config, shape, element_type);
  const mlir::Type ids = e.tokens({}, top.getI32Type());
  Value loss;
  if (config.family == ModelFamily::kGpt2) {
    const Value input_ids = e.input("input_ids", ids);
    const Value labels = e.input("labels", ids);
    const Value position_ids = e.input("position_ids", ids);
    loss = emitGpt2(e, config, input_ids, position_ids, labels);
  } else {
    const Value tokens = e.input("tokens", ids);
    const Value labels = e.input("labels", ids);
    loss = emitLlama(e, config, tokens, labels);
  }
  e.finish(*module, loss);
  return module;
}

}  // namespace loom::planner::models
