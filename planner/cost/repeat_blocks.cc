// Repeating a plan's middle block (see repeat_blocks.h).
#include "planner/cost/repeat_blocks.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "plan/lifetimes.h"
#include "plan/scope.h"

namespace loom::planner::cost {
namespace {

// Where "<stack>.<N>" sits in `text` (a scope or a buffer name such as
// "exp_avg:layers.3.attention.wq.weight"): the offset and length of N.
struct LayerRef {
  size_t at = 0;
  size_t length = 0;
  int64_t layer = -1;
};

LayerRef findLayer(std::string_view text, std::string_view stack) {
  for (size_t at = text.find(stack); at != std::string_view::npos; at = text.find(stack, at + 1)) {
    const bool boundary = at == 0 || text[at - 1] == '.' || text[at - 1] == ':';
    size_t p = at + stack.size();
    if (!boundary || p >= text.size() || text[p] != '.') continue;
    size_t q = ++p;
    while (q < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[q]))) ++q;
    if (q == p || (q < text.size() && text[q] != '.')) continue;
    int64_t layer = 0;
    if (!absl::SimpleAtoi(std::string(text.substr(p, q - p)), &layer)) continue;
    return {.at = p, .length = q - p, .layer = layer};
  }
  return {};
}

std::string shiftLayer(std::string_view text, std::string_view stack, int64_t delta) {
  if (delta == 0) return std::string(text);
  const LayerRef ref = findLayer(text, stack);
  if (ref.layer < 0) return std::string(text);
  return absl::StrCat(std::string(text.substr(0, ref.at)), ref.layer + delta,
                      std::string(text.substr(ref.at + ref.length)));
}

// A plan cut into pipeline stages (a pp axis), of which stagePlan keeps one
// program.
bool isStage(const plan::Plan& plan) {
  return std::find(plan.strategies.begin(), plan.strategies.end(), "pp") != plan.strategies.end();
}

// A unit of a block: its prefix, one repeated block's segment, its suffix.
constexpr int64_t kPrefix = -1;
constexpr int64_t kSuffix = -2;

class Repeater {
 public:
  Repeater(const plan::Plan& shorter, int64_t blocks)
      : k_(shorter), blocks_(blocks), stage_(isStage(shorter)) {}
  absl::StatusOr<Repeated> run();

 private:
  absl::Status findStack();
  absl::Status cutBlock(size_t b);
  // The template block a longer plan's block `layer` copies.
  int64_t source(int64_t layer) const {
    if (layer <= middle_) return layer;
    return layer <= middle_ + extra_ ? middle_ : layer - extra_;
  }
  int64_t layerOf(const plan::Instruction& in) const;
  // `ref`'s layer counted from the template's first (-1: none, or a layer
  // of another stage's).
  int64_t relative(const LayerRef& ref) const {
    const int64_t layer = ref.layer < 0 ? -1 : ref.layer - base_;
    return layer >= 0 && layer < depth_ ? layer : -1;
  }
  void addEntryBuffers();
  int64_t newBuffer(const plan::Buffer& from, int64_t delta);
  // Where a reader is: its repeated block in the longer plan and in the
  // template (-1 both: none), and the shift of its layer indices.
  struct Reader {
    int64_t layer = -1;
    int64_t source = -1;
    int64_t delta = 0;
  };
  absl::StatusOr<int64_t> resolve(int64_t id, const Reader& reader) const;
  using Steps = std::vector<Repeated::Step>;
  absl::Status emit(size_t b, size_t i, int64_t unit, const Reader& reader, Steps& out);
  absl::Status emitUnit(size_t b, int64_t unit, Steps& out);
  // The prefix or suffix: instructions of block m repeat once per copy.
  absl::Status emitEnds(size_t b, int64_t unit, Steps& out);
  // ... where block m's instructions there are interleaved with its
  // neighbour's (`mine`: the unit's instructions).
  absl::Status emitInterleaved(size_t b, int64_t unit, const std::vector<size_t>& mine,
                               bool descending, Steps& out);
  void computeLifetimes();

  const plan::Plan& k_;
  const int64_t blocks_;
  // A pipeline stage's program: its layers start at base_ and another
  // stage's buffers are not its own.
  const bool stage_;
  std::string stack_;
  int64_t base_ = 0;
  // The template's blocks of the stack (kTemplateBlocks or more).
  int64_t depth_ = 0;
  int64_t middle_ = 0;
  int64_t extra_ = 0;
  // Per template block (program block): the unit of each instruction, and
  // the units in program order.
  std::vector<std::vector<int64_t>> unitOf_;
  std::vector<bool> descending_;
  // Where each template buffer is defined: (program block, unit, ordinal);
  // entry buffers are absent.
  struct Def {
    size_t block;
    int64_t unit;
    size_t ordinal;
    int64_t layer;  // of the defining instruction (-1: none)
  };
  std::vector<std::optional<Def>> defs_;

  Repeated out_;
  // Entry buffers: those of no layer by template id (-1: none); per layer
  // by their name without the layer index (numbered) and the layer.
  std::vector<int64_t> entryById_;
  std::vector<std::pair<int64_t, int64_t>> entryKey_;  // template id -> (name, layer)
  std::vector<std::vector<int64_t>> entryByName_;      // [name][layer], -1: none
  // Buffers the longer plan defines in its segments, by program block x
  // repeated block, in order; in its prefixes and suffixes, by (template
  // id, layer shift).
  std::vector<std::vector<int64_t>> defined_;
  std::vector<int64_t>& definedIn(size_t b, int64_t layer) {
    return defined_[b * static_cast<size_t>(blocks_) + static_cast<size_t>(layer)];
  }
  const std::vector<int64_t>& definedIn(size_t b, int64_t layer) const {
    return defined_[b * static_cast<size_t>(blocks_) + static_cast<size_t>(layer)];
  }
  // Keyed by fixedKey(template id, layer shift).
  static uint64_t fixedKey(int64_t id, int64_t delta) {
    return (static_cast<uint64_t>(id) << 32) ^ static_cast<uint32_t>(delta);
  }
  std::unordered_map<uint64_t, int64_t> fixed_;
};

absl::Status Repeater::findStack() {
  std::map<std::string, int64_t> counts, minIndex, maxIndex;
  for (const plan::Instruction* in : k_.programs.front().instructions()) {
    if (std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(in->scope)) {
      const bool first = counts[block->stack]++ == 0;
      minIndex[block->stack] =
          first ? block->index : std::min(minIndex[block->stack], block->index);
      maxIndex[block->stack] = std::max(maxIndex[block->stack], block->index);
    }
  }
  if (counts.empty()) {
    return absl::InvalidArgumentError(
        "the plan has no repeated blocks (no instruction scope names a numbered layer)");
  }
  stack_ = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
             return a.second < b.second;
           })->first;
  // A stage's program holds a run of the stack's blocks; a whole plan
  // holds them from the first.
  base_ = stage_ ? minIndex[stack_] : 0;
  depth_ = maxIndex[stack_] - base_ + 1;
  if (depth_ < kTemplateBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("the template plan has ", depth_,
                                                   " blocks of '", stack_, "', fewer than ",
                                                   kTemplateBlocks));
  }
  middle_ = depth_ / 2;
  extra_ = blocks_ - depth_;
  return absl::OkStatus();
}

int64_t Repeater::layerOf(const plan::Instruction& in) const {
  LayerRef ref = findLayer(in.scope, stack_);
  if (ref.layer < 0 && in.info->family == plan::OpFamily::kOptimizer) {
    ref = findLayer(k_.buffers[in.operands[0]].name, stack_);
  }
  return relative(ref);
}

// Cuts template block `b` into units: segment i ends at the last compute
// (or optimizer) instruction of repeated block i and starts after the
// previous segment's end; the first starts after the last unscoped compute
// or point-to-point op before it.
absl::Status Repeater::cutBlock(size_t b) {
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  std::vector<int64_t> anchor(static_cast<size_t>(depth_), -1);
  int64_t lastRoot = -1;
  for (size_t i = 0; i < ins.size(); ++i) {
    const plan::OpFamily family = ins[i].info->family;
    if (family != plan::OpFamily::kCompute && family != plan::OpFamily::kOptimizer) continue;
    const int64_t layer = layerOf(ins[i]);
    if (layer >= 0 && layer < depth_) anchor[layer] = static_cast<int64_t>(i);
  }
  std::vector<int64_t>& unit = unitOf_.emplace_back(ins.size(), kPrefix);
  descending_.push_back(false);
  if (std::all_of(anchor.begin(), anchor.end(), [](int64_t a) { return a < 0; })) {
    return absl::OkStatus();
  }
  if (std::any_of(anchor.begin(), anchor.end(), [](int64_t a) { return a < 0; })) {
    return absl::InvalidArgumentError(absl::StrCat("block '", k_.programs.front().blocks[b].name,
                                                   "' has ops of some repeated blocks only"));
  }
  const bool descending = anchor[0] > anchor[1];
  descending_.back() = descending;
  std::vector<int64_t> order(static_cast<size_t>(depth_));
  for (int64_t i = 0; i < depth_; ++i) order[i] = descending ? depth_ - 1 - i : i;
  for (size_t i = 1; i < order.size(); ++i) {
    if (anchor[order[i]] <= anchor[order[i - 1]]) {
      return absl::InvalidArgumentError(absl::StrCat("block '", k_.programs.front().blocks[b].name,
                                                     "' runs the repeated blocks out of order"));
    }
  }
  for (int64_t i = 0; i < anchor[order[0]]; ++i) {
    const plan::OpFamily family = ins[i].info->family;
    // A stage's receives are posted at the top of its block, whatever
    // layer reads them: the prefix's.
    if (family == plan::OpFamily::kPointToPoint ||
        ((family == plan::OpFamily::kCompute || family == plan::OpFamily::kOptimizer) &&
         layerOf(ins[i]) < 0)) {
      lastRoot = i;
    }
  }
  int64_t start = lastRoot + 1;
  for (int64_t layer : order) {
    for (int64_t i = start; i <= anchor[layer]; ++i) unit[i] = layer;
    start = anchor[layer] + 1;
  }
  for (size_t i = static_cast<size_t>(start); i < ins.size(); ++i) unit[i] = kSuffix;
  return absl::OkStatus();
}

int64_t Repeater::newBuffer(const plan::Buffer& from, int64_t delta) {
  out_.source.push_back(from.id);
  out_.shift.push_back(static_cast<int32_t>(delta));
  return static_cast<int64_t>(out_.source.size()) - 1;
}

// Parameters, optimizer states and inputs: one per layer of the longer
// plan, named for it.
void Repeater::addEntryBuffers() {
  std::map<std::string, int64_t> names;
  entryKey_.assign(k_.buffers.size(), {-1, -1});
  entryById_.assign(k_.buffers.size(), -1);
  for (const plan::Buffer& b : k_.buffers) {
    if (!plan::onEntry(k_, b.id)) continue;
    const LayerRef ref = findLayer(b.name, stack_);
    const int64_t layer = relative(ref);
    if (layer < 0) {
      entryById_[b.id] = newBuffer(b, 0);
      continue;
    }
    const std::string unnumbered =
        absl::StrCat(b.name.substr(0, ref.at), "#", b.name.substr(ref.at + ref.length));
    const int64_t name =
        names.emplace(unnumbered, static_cast<int64_t>(names.size())).first->second;
    if (name == static_cast<int64_t>(entryByName_.size())) entryByName_.emplace_back(blocks_, -1);
    entryKey_[b.id] = {name, layer};
    for (int64_t target = 0; target < blocks_; ++target) {
      if (source(target) != layer) continue;
      entryByName_[name][target] = newBuffer(b, target - layer);
    }
  }
}

// The longer plan's buffer for template buffer `id` as `reader` sees it:
// an entry buffer by its name with the reader's shift; one a repeated block
// defines at the same distance in blocks as in the template.
absl::StatusOr<int64_t> Repeater::resolve(int64_t id, const Reader& reader) const {
  if (!defs_[id]) {
    if (entryById_[id] >= 0) return entryById_[id];
    const auto [name, layer] = entryKey_[id];
    // A reader of no block (the optimizer's wait on the last layer's copy
    // back, scoped to the next parameter) sees the template's blocks where
    // the longer plan has them, as for buffers defined in blocks below.
    const int64_t at = reader.source >= 0 ? layer + reader.delta
                                          : layer + (layer > middle_ ? extra_ : 0);
    if (name >= 0 && at >= 0 && at < blocks_ && entryByName_[name][at] >= 0) {
      return entryByName_[name][at];
    }
    return absl::InvalidArgumentError(
        absl::StrCat("no buffer ", shiftLayer(k_.buffers[id].name, stack_, reader.delta),
                     " in the longer plan"));
  }
  const Def& d = *defs_[id];
  const int64_t defLayer = d.unit >= 0 ? d.unit : d.layer;
  int64_t target = defLayer;
  if (defLayer >= 0) {
    target = reader.source >= 0 ? reader.layer - (reader.source - defLayer)
                                : defLayer + (defLayer > middle_ ? extra_ : 0);
  }
  if (d.unit < 0) {
    auto it = fixed_.find(fixedKey(id, defLayer >= 0 ? target - defLayer : 0));
    if (it != fixed_.end()) return it->second;
  } else {
    if (target >= 0 && target < blocks_) {
      const std::vector<int64_t>& made = definedIn(d.block, target);
      if (d.ordinal < made.size()) return made[d.ordinal];
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "repeated block ", target, " of '", stack_, "' does not define what block ", defLayer,
      " of the template does (buffer ", k_.buffers[id].name, "); its segments are not alike"));
}

absl::Status Repeater::emit(size_t b, size_t i, int64_t unit, const Reader& reader, Steps& out) {
  const plan::Instruction& in = k_.programs.front().blocks[b].instructions[i];
  out.push_back({.block = static_cast<int32_t>(b),
                 .position = static_cast<int32_t>(i),
                 .delta = static_cast<int32_t>(reader.delta),
                 .args = static_cast<int32_t>(out_.ids.size())});
  for (int64_t operand : in.operands) {
    absl::StatusOr<int64_t> id = resolve(operand, reader);
    if (!id.ok()) return id.status();
    out_.ids.push_back(*id);
  }
  for (size_t r = 0; r < in.results.size(); ++r) {
    const int64_t id = in.results[r];
    const std::optional<Def>& def = defs_[id];
    const bool defines = def && def->block == b && def->unit == (unit >= 0 ? source(unit) : unit) &&
                         (unit < 0 || def->ordinal == definedIn(b, unit).size());
    if (defines) {
      const int64_t made = newBuffer(k_.buffers[id], reader.delta);
      if (unit >= 0) {
        definedIn(b, unit).push_back(made);
      } else {
        fixed_[fixedKey(id, reader.delta)] = made;
      }
      out_.ids.push_back(made);
      continue;
    }
    absl::StatusOr<int64_t> existing = resolve(id, reader);
    if (!existing.ok()) return existing.status();
    out_.ids.push_back(*existing);
  }
  return absl::OkStatus();
}

absl::Status Repeater::emitUnit(size_t b, int64_t unit, Steps& out) {
  if (unit < 0) return emitEnds(b, unit, out);
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  const Reader reader{.layer = unit, .source = source(unit), .delta = unit - source(unit)};
  for (size_t i = 0; i < ins.size(); ++i) {
    if (unitOf_[b][i] != reader.source) continue;
    if (absl::Status s = emit(b, i, unit, reader, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Repeater::emitEnds(size_t b, int64_t unit, Steps& out) {
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  std::vector<size_t> mine;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (unitOf_[b][i] == unit) mine.push_back(i);
  }
  // Whether block m's instructions here follow a later block's (they run
  // descending), and whether the neighbour that ran before them has
  // instructions among them.
  std::vector<int64_t> layers(mine.size());
  for (size_t j = 0; j < mine.size(); ++j) layers[j] = layerOf(ins[mine[j]]);
  const auto first = std::find(layers.begin(), layers.end(), middle_);
  if (first != layers.end()) {
    const auto before = std::find_if(std::make_reverse_iterator(first), layers.rend(),
                                     [](int64_t layer) { return layer >= 0; });
    const bool descending = before != layers.rend() && *before > middle_;
    const auto last = std::find(layers.rbegin(), layers.rend(), middle_).base();
    const int64_t neighbour = descending ? middle_ + 1 : middle_ - 1;
    if (std::find(first, last, neighbour) != last) {
      return emitInterleaved(b, unit, mine, descending, out);
    }
  }
  for (size_t at = 0; at < mine.size();) {
    const int64_t layer = layers[at];
    if (layer != middle_) {
      const int64_t delta = layer > middle_ ? extra_ : 0;
      const Reader reader{.layer = layer < 0 ? -1 : layer + delta, .source = layer, .delta = delta};
      if (absl::Status s = emit(b, mine[at], unit, reader, out); !s.ok()) return s;
      ++at;
      continue;
    }
    // A run of block m's instructions: once per copy, in the order the
    // neighbouring blocks run (descending when a later block came first).
    size_t end = at;
    while (end < mine.size() && layers[end] == middle_) ++end;
    bool descending = false;
    for (size_t j = at; j-- > 0;) {
      if (layers[j] >= 0) {
        descending = layers[j] > middle_;
        break;
      }
    }
    for (int64_t c = 0; c <= extra_; ++c) {
      const int64_t delta = descending ? extra_ - c : c;
      const Reader reader{.layer = middle_ + delta, .source = middle_, .delta = delta};
      for (size_t j = at; j < end; ++j) {
        if (absl::Status s = emit(b, mine[j], unit, reader, out); !s.ok()) return s;
      }
    }
    at = end;
  }
  return absl::OkStatus();
}

// Block m's instructions in a prefix or suffix, interleaved with the block
// that ran before it: a DDP suffix waits for layer L's all-reduce, then
// for the host copy of layer L+1's last gradient, then copies layer L's
// (plan-offload's one group in flight). Block m's period runs from its
// first instruction to the next block's first; it holds some of the
// neighbour's (`prev`), and the next period some of block m's. The
// neighbour's period must be this one a block on (steady state). Each
// copy of the period is shifted whole; a neighbour's instruction in copy
// d reads what the same instruction of copy d +- 1 made, which the
// neighbour's period defines in the template, so that buffer is aliased.
// Block m's instructions after the period belong to the last copy.
absl::Status Repeater::emitInterleaved(size_t b, int64_t unit, const std::vector<size_t>& mine,
                                       bool descending, Steps& out) {
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  const int64_t prev = descending ? middle_ + 1 : middle_ - 1;
  const int64_t next = descending ? middle_ - 1 : middle_ + 1;
  std::vector<int64_t> layers(mine.size());
  for (size_t j = 0; j < mine.size(); ++j) layers[j] = layerOf(ins[mine[j]]);
  const size_t first = static_cast<size_t>(std::find(layers.begin(), layers.end(), middle_) -
                                           layers.begin());
  const size_t end = static_cast<size_t>(
      std::find(layers.begin() + static_cast<std::ptrdiff_t>(first), layers.end(), next) -
      layers.begin());
  const size_t prevFirst =
      static_cast<size_t>(std::find(layers.begin(), layers.end(), prev) - layers.begin());
  const size_t length = end - first;
  const std::string blockName = k_.programs.front().blocks[b].name;
  auto notAlike = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "block '", blockName, "' interleaves repeated block ", middle_, " of '", stack_,
        "' with its neighbour, and the neighbour's instructions are not block ", middle_,
        "'s a block on; its segments are not alike"));
  };
  if (prevFirst >= first || first - prevFirst != length || mine.size() - end < length) {
    return notAlike();
  }
  // The neighbours' periods, each this one a block on: (start, block).
  const std::pair<size_t, int64_t> neighbours[] = {{prevFirst, prev}, {end, next}};
  for (const auto& [start, block] : neighbours) {
    for (size_t k = 0; k < length; ++k) {
      const plan::Instruction& a = ins[mine[start + k]];
      const plan::Instruction& c = ins[mine[first + k]];
      const int64_t la = layers[start + k];
      const int64_t lc = layers[first + k];
      if (a.op != c.op || a.results.size() != c.results.size() || (la < 0) != (lc < 0) ||
          (la >= 0 && la - lc != block - middle_)) {
        return notAlike();
      }
    }
  }
  auto emitAt = [&](size_t j, int64_t delta) {
    const int64_t layer = layers[j];
    const Reader reader{.layer = layer < 0 ? -1 : layer + delta, .source = layer, .delta = delta};
    return emit(b, mine[j], unit, reader, out);
  };
  for (size_t j = 0; j < first; ++j) {
    if (absl::Status s = emitAt(j, layers[j] > middle_ ? extra_ : 0); !s.ok()) return s;
  }
  for (int64_t c = 0; c <= extra_; ++c) {
    const int64_t delta = descending ? extra_ - c : c;
    for (size_t k = 0; k < length; ++k) {
      if (absl::Status s = emitAt(first + k, delta); !s.ok()) return s;
    }
    // What a neighbour's instruction at the same place in its period
    // defines is what this copy's made, for readers of another copy: the
    // neighbour's block + d' is block m + delta when d' = delta + m -
    // block.
    for (const auto& [start, block] : neighbours) {
      for (size_t k = 0; k < length; ++k) {
        const plan::Instruction& defining = ins[mine[start + k]];
        const plan::Instruction& copied = ins[mine[first + k]];
        for (size_t r = 0; r < defining.results.size(); ++r) {
          const auto made = fixed_.find(fixedKey(copied.results[r], delta));
          if (made == fixed_.end()) continue;
          fixed_.emplace(fixedKey(defining.results[r], delta + middle_ - block), made->second);
        }
      }
    }
  }
  for (size_t j = end; j < mine.size(); ++j) {
    const int64_t layer = layers[j];
    const int64_t delta = layer == middle_ ? (descending ? 0 : extra_) : layer > middle_ ? extra_ : 0;
    if (absl::Status s = emitAt(j, delta); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// plan::computeLifetimes over the steps: an async start's operands are
// held until the wait on its future.
void Repeater::computeLifetimes() {
  const std::vector<Repeated::Step>& steps = out_.steps;
  const size_t buffers = out_.source.size();
  auto at = [&](const Repeated::Step& s) -> const plan::Instruction& {
    return k_.programs.front().blocks[s.block].instructions[s.position];
  };
  std::vector<int64_t> waitAt(buffers, -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (at(steps[i]).info->family == plan::OpFamily::kWait) {
      waitAt[out_.ids[steps[i].args]] = static_cast<int64_t>(i);
    }
  }
  out_.live.assign(buffers, plan::Lifetime{});
  std::vector<bool> defined(buffers, false);
  for (size_t id = 0; id < buffers; ++id) defined[id] = plan::onEntry(k_, out_.source[id]);
  for (size_t i = 0; i < steps.size(); ++i) {
    const plan::Instruction& in = at(steps[i]);
    const int64_t order = static_cast<int64_t>(i);
    const int64_t* ids = out_.ids.data() + steps[i].args;
    const size_t operands = in.operands.size();
    int64_t until = order;
    if (in.info->async_start && waitAt[ids[operands]] >= 0) until = waitAt[ids[operands]];
    for (size_t k = 0; k < operands; ++k) {
      out_.live[ids[k]].last = std::max(out_.live[ids[k]].last, until);
    }
    for (size_t k = operands; k < operands + in.results.size(); ++k) {
      plan::Lifetime& live = out_.live[ids[k]];
      if (!defined[ids[k]]) {
        defined[ids[k]] = true;
        live.first = order;
      }
      live.last = std::max(live.last, order);
    }
  }
}

absl::StatusOr<Repeated> Repeater::run() {
  if (k_.programs.size() != 1) {
    return absl::InvalidArgumentError(
        "repeating blocks needs a plan with one program (stagePlan takes one stage's)");
  }
  if (absl::Status s = findStack(); !s.ok()) return s;
  if (blocks_ < depth_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot shorten a plan: ", blocks_, " < ", depth_, " blocks"));
  }
  const plan::Program& program = k_.programs.front();
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    if (absl::Status s = cutBlock(b); !s.ok()) return s;
  }
  // Definitions: a result first defined by an instruction (not an entry
  // buffer, not an in-place update), numbered within its unit.
  // Per program block and unit (kSuffix, kPrefix, 0.. shifted by 2).
  std::vector<std::vector<size_t>> defCount(program.blocks.size(),
                                            std::vector<size_t>(depth_ + 2, 0));
  defs_.assign(k_.buffers.size(), std::nullopt);
  defined_.assign(program.blocks.size() * static_cast<size_t>(blocks_), {});
  std::vector<bool> seen(k_.buffers.size(), false);
  for (size_t id = 0; id < k_.buffers.size(); ++id) seen[id] = plan::onEntry(k_, id);
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    const std::vector<plan::Instruction>& ins = program.blocks[b].instructions;
    for (size_t i = 0; i < ins.size(); ++i) {
      for (int64_t id : ins[i].results) {
        if (seen[id]) continue;
        seen[id] = true;
        const int64_t unit = unitOf_[b][i];
        defs_[id] = Def{
            .block = b, .unit = unit, .ordinal = defCount[b][unit + 2]++, .layer = layerOf(ins[i])};
      }
    }
  }
  out_.stack = stack_;
  // About blocks_ / depth_ times the template's.
  const size_t scale = static_cast<size_t>(blocks_ / depth_ + 1);
  out_.source.reserve(k_.buffers.size() * scale);
  out_.shift.reserve(k_.buffers.size() * scale);
  addEntryBuffers();
  std::vector<Steps> blockSteps(program.blocks.size());
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    blockSteps[b].reserve(program.blocks[b].instructions.size() * scale);
    std::vector<int64_t> units = {kPrefix};
    for (int64_t i = 0; i < blocks_; ++i) units.push_back(descending_[b] ? blocks_ - 1 - i : i);
    units.push_back(kSuffix);
    for (int64_t unit : units) {
      if (absl::Status s = emitUnit(b, unit, blockSteps[b]); !s.ok()) return s;
    }
  }
  for (size_t b : program.blockOrder()) {
    out_.steps.insert(out_.steps.end(), blockSteps[b].begin(), blockSteps[b].end());
  }
  out_.interface = k_.interface;
  plan::Interface& io = out_.interface;
  for (int64_t* id : {&io.ids, &io.labels, &io.loss_grad_seed, &io.loss, &io.positions}) {
    if (*id < 0) continue;
    absl::StatusOr<int64_t> mapped = resolve(*id, Reader{});
    // A stage holds the inputs and the loss only where it uses them.
    if (!mapped.ok() && stage_) mapped = -1;
    if (!mapped.ok()) return mapped.status();
    *id = *mapped;
  }
  out_.stage = stage_;
  computeLifetimes();
  return std::move(out_);
}

}  // namespace

plan::Plan stagePlan(const plan::Plan& plan, size_t program) {
  plan::Plan out = plan;
  out.programs = {plan.programs[program]};
  return out;
}

absl::StatusOr<Repeated> repeatBlocks(const plan::Plan& shorter, int64_t blocks) {
  return Repeater(shorter, blocks).run();
}

Repeated wholePlan(const plan::Plan& plan) {
  Repeated out;
  const plan::Program& program = plan.programs.front();
  out.stage = isStage(plan);
  const std::vector<plan::Lifetime> stageLive =
      out.stage ? plan::computeLifetimes(plan, program) : std::vector<plan::Lifetime>{};
  for (size_t b : program.blockOrder()) {
    const std::vector<plan::Instruction>& ins = program.blocks[b].instructions;
    for (size_t i = 0; i < ins.size(); ++i) {
      out.steps.push_back({.block = static_cast<int32_t>(b),
                           .position = static_cast<int32_t>(i),
                           .delta = 0,
                           .args = static_cast<int32_t>(out.ids.size())});
      out.ids.insert(out.ids.end(), ins[i].operands.begin(), ins[i].operands.end());
      out.ids.insert(out.ids.end(), ins[i].results.begin(), ins[i].results.end());
    }
  }
  for (const plan::Buffer& b : plan.buffers) {
    out.source.push_back(b.id);
    out.shift.push_back(0);
    out.live.push_back(out.stage ? stageLive[b.id] : b.live);
  }
  out.interface = plan.interface;
  return out;
}

plan::Plan materialize(const plan::Plan& shorter, const Repeated& repeated) {
  plan::Plan out;
  out.source = shorter.source;
  out.model = shorter.model;
  out.function = shorter.function;
  out.mesh = shorter.mesh;
  out.strategies = shorter.strategies;
  out.topology = shorter.topology;
  out.micro_batches = shorter.micro_batches;
  out.interface = repeated.interface;
  out.buffers.reserve(repeated.source.size());
  for (size_t id = 0; id < repeated.source.size(); ++id) {
    plan::Buffer& b = out.buffers.emplace_back(shorter.buffers[repeated.source[id]]);
    b.id = static_cast<int64_t>(id);
    b.name = shiftLayer(b.name, repeated.stack, repeated.shift[id]);
    b.live = repeated.live[id];
  }
  const plan::Program& program = shorter.programs.front();
  plan::Program& longer = out.programs.emplace_back();
  longer.stage = program.stage;
  longer.schedule = program.schedule;
  for (const plan::Block& block : program.blocks) {
    longer.blocks.push_back({.name = block.name, .phase = block.phase, .instructions = {}});
  }
  for (const Repeated::Step& step : repeated.steps) {
    const plan::Instruction& in = program.blocks[step.block].instructions[step.position];
    plan::Block& block = longer.blocks[step.block];
    plan::Instruction& copy = block.instructions.emplace_back(in);
    copy.scope = shiftLayer(in.scope, repeated.stack, step.delta);
    copy.position = static_cast<int64_t>(block.instructions.size()) - 1;
    copy.start_s.reset();
    copy.duration_s.reset();
    const int64_t* ids = repeated.ids.data() + step.args;
    copy.operands.assign(ids, ids + in.operands.size());
    copy.results.assign(ids + in.operands.size(), ids + in.operands.size() + in.results.size());
  }
  // Instruction indices and async handles (one per start, repeated by its
  // wait), in block order as the exporter numbers them.
  int64_t index = 0, handles = 0;
  std::map<int64_t, std::string> handleOf;  // future buffer -> handle
  for (plan::Block& block : longer.blocks) {
    for (plan::Instruction& in : block.instructions) {
      in.index = index++;
      if (in.info->async_start) {
        in.attrs.async_handle = absl::StrCat("h", handles++);
        handleOf[in.results[0]] = in.attrs.async_handle;
      } else if (in.info->family == plan::OpFamily::kWait) {
        in.attrs.async_handle = handleOf[in.operands[0]];
      }
    }
  }
  longer.assignOrder();
  return out;
}

}  // namespace loom::planner::cost
