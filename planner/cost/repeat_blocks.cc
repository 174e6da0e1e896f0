// Repeating a plan's middle block (see repeat_blocks.h).
#include "planner/cost/repeat_blocks.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  const LayerRef ref = findLayer(text, stack);
  if (ref.layer < 0 || delta == 0) return std::string(text);
  return absl::StrCat(std::string(text.substr(0, ref.at)), ref.layer + delta,
                      std::string(text.substr(ref.at + ref.length)));
}

// A unit of a block: its prefix, one repeated block's segment, its suffix.
constexpr int64_t kPrefix = -1;
constexpr int64_t kSuffix = -2;

class Repeater {
 public:
  Repeater(const plan::Plan& shorter, int64_t blocks) : k_(shorter), blocks_(blocks) {}
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
  absl::Status emit(size_t b, const plan::Instruction& in, int64_t unit, const Reader& reader,
                    plan::Block& out);
  absl::Status emitUnit(size_t b, int64_t unit, plan::Block& out);
  // The prefix or suffix: instructions of block m repeat once per copy.
  absl::Status emitEnds(size_t b, int64_t unit, plan::Block& out);
  void finish();

  const plan::Plan& k_;
  const int64_t blocks_;
  std::string stack_;
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

  plan::Plan out_;
  std::vector<int64_t> source_;
  // Entry buffers: those of no layer by template id; per layer by their
  // name without the layer index (numbered) and the layer.
  std::map<int64_t, int64_t> entryById_;
  std::vector<std::pair<int64_t, int64_t>> entryKey_;  // template id -> (name, layer)
  std::map<std::pair<int64_t, int64_t>, int64_t> entryByKey_;
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
  std::map<std::pair<int64_t, int64_t>, int64_t> fixed_;
};

absl::Status Repeater::findStack() {
  std::map<std::string, int64_t> counts, maxIndex;
  for (const plan::Instruction* in : k_.programs.front().instructions()) {
    if (std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(in->scope)) {
      ++counts[block->stack];
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
  if (maxIndex[stack_] + 1 != kTemplateBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("the template plan has ", maxIndex[stack_] + 1,
                                                   " blocks of '", stack_, "', not ",
                                                   kTemplateBlocks));
  }
  middle_ = kTemplateBlocks / 2;
  extra_ = blocks_ - kTemplateBlocks;
  return absl::OkStatus();
}

int64_t Repeater::layerOf(const plan::Instruction& in) const {
  int64_t layer = findLayer(in.scope, stack_).layer;
  if (layer < 0 && in.info->family == plan::OpFamily::kOptimizer) {
    layer = findLayer(k_.buffers[in.operands[0]].name, stack_).layer;
  }
  return layer;
}

// Cuts template block `b` into units: segment i ends at the last compute
// (or optimizer) instruction of repeated block i and starts after the
// previous segment's end; the first starts after the last unscoped compute
// before it.
absl::Status Repeater::cutBlock(size_t b) {
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  std::vector<int64_t> anchor(kTemplateBlocks, -1);
  int64_t lastRoot = -1;
  for (size_t i = 0; i < ins.size(); ++i) {
    const plan::OpFamily family = ins[i].info->family;
    if (family != plan::OpFamily::kCompute && family != plan::OpFamily::kOptimizer) continue;
    const int64_t layer = layerOf(ins[i]);
    if (layer >= 0 && layer < kTemplateBlocks) anchor[layer] = static_cast<int64_t>(i);
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
  std::vector<int64_t> order(kTemplateBlocks);
  for (int64_t i = 0; i < kTemplateBlocks; ++i) order[i] = descending ? kTemplateBlocks - 1 - i : i;
  for (size_t i = 1; i < order.size(); ++i) {
    if (anchor[order[i]] <= anchor[order[i - 1]]) {
      return absl::InvalidArgumentError(absl::StrCat("block '", k_.programs.front().blocks[b].name,
                                                     "' runs the repeated blocks out of order"));
    }
  }
  for (int64_t i = 0; i < anchor[order[0]]; ++i) {
    const plan::OpFamily family = ins[i].info->family;
    if ((family == plan::OpFamily::kCompute || family == plan::OpFamily::kOptimizer) &&
        layerOf(ins[i]) < 0) {
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
  plan::Buffer& b = out_.buffers.emplace_back(from);
  source_.push_back(from.id);
  b.id = static_cast<int64_t>(out_.buffers.size()) - 1;
  b.name = shiftLayer(from.name, stack_, delta);
  return b.id;
}

// Parameters, optimizer states and inputs: one per layer of the longer
// plan, named for it.
void Repeater::addEntryBuffers() {
  std::map<std::string, int64_t> names;
  entryKey_.assign(k_.buffers.size(), {-1, -1});
  for (const plan::Buffer& b : k_.buffers) {
    if (!plan::onEntry(k_, b.id)) continue;
    const LayerRef ref = findLayer(b.name, stack_);
    if (ref.layer < 0) {
      entryById_[b.id] = newBuffer(b, 0);
      continue;
    }
    const std::string unnumbered =
        absl::StrCat(b.name.substr(0, ref.at), "#", b.name.substr(ref.at + ref.length));
    const int64_t name =
        names.emplace(unnumbered, static_cast<int64_t>(names.size())).first->second;
    entryKey_[b.id] = {name, ref.layer};
    for (int64_t target = 0; target < blocks_; ++target) {
      if (source(target) != ref.layer) continue;
      entryByKey_[{name, target}] = newBuffer(b, target - ref.layer);
    }
  }
}

// The longer plan's buffer for template buffer `id` as `reader` sees it:
// an entry buffer by its name with the reader's shift; one a repeated block
// defines at the same distance in blocks as in the template.
absl::StatusOr<int64_t> Repeater::resolve(int64_t id, const Reader& reader) const {
  if (!defs_[id]) {
    if (auto it = entryById_.find(id); it != entryById_.end()) return it->second;
    const auto [name, layer] = entryKey_[id];
    if (auto it = entryByKey_.find({name, layer + reader.delta}); it != entryByKey_.end()) {
      return it->second;
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
    auto it = fixed_.find({id, defLayer >= 0 ? target - defLayer : 0});
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

absl::Status Repeater::emit(size_t b, const plan::Instruction& in, int64_t unit,
                            const Reader& reader, plan::Block& out) {
  plan::Instruction copy = in;
  copy.scope = shiftLayer(in.scope, stack_, reader.delta);
  copy.position = static_cast<int64_t>(out.instructions.size());
  for (int64_t& operand : copy.operands) {
    absl::StatusOr<int64_t> id = resolve(operand, reader);
    if (!id.ok()) return id.status();
    operand = *id;
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
        fixed_[{id, reader.delta}] = made;
      }
      copy.results[r] = made;
      continue;
    }
    absl::StatusOr<int64_t> existing = resolve(id, reader);
    if (!existing.ok()) return existing.status();
    copy.results[r] = *existing;
  }
  out.instructions.push_back(std::move(copy));
  return absl::OkStatus();
}

absl::Status Repeater::emitUnit(size_t b, int64_t unit, plan::Block& out) {
  if (unit < 0) return emitEnds(b, unit, out);
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  const Reader reader{.layer = unit, .source = source(unit), .delta = unit - source(unit)};
  for (size_t i = 0; i < ins.size(); ++i) {
    if (unitOf_[b][i] != reader.source) continue;
    if (absl::Status s = emit(b, ins[i], unit, reader, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Repeater::emitEnds(size_t b, int64_t unit, plan::Block& out) {
  const std::vector<plan::Instruction>& ins = k_.programs.front().blocks[b].instructions;
  std::vector<size_t> mine;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (unitOf_[b][i] == unit) mine.push_back(i);
  }
  for (size_t at = 0; at < mine.size();) {
    const int64_t layer = layerOf(ins[mine[at]]);
    if (layer != middle_) {
      const int64_t delta = layer > middle_ ? extra_ : 0;
      const Reader reader{.layer = layer < 0 ? -1 : layer + delta, .source = layer, .delta = delta};
      if (absl::Status s = emit(b, ins[mine[at]], unit, reader, out); !s.ok()) return s;
      ++at;
      continue;
    }
    // A run of block m's instructions: once per copy, in the order the
    // neighbouring blocks run (descending when a later block came first).
    size_t end = at;
    while (end < mine.size() && layerOf(ins[mine[end]]) == middle_) ++end;
    bool descending = false;
    for (size_t j = at; j-- > 0;) {
      const int64_t before = layerOf(ins[mine[j]]);
      if (before >= 0) {
        descending = before > middle_;
        break;
      }
    }
    for (int64_t c = 0; c <= extra_; ++c) {
      const int64_t delta = descending ? extra_ - c : c;
      const Reader reader{.layer = middle_ + delta, .source = middle_, .delta = delta};
      for (size_t j = at; j < end; ++j) {
        if (absl::Status s = emit(b, ins[mine[j]], unit, reader, out); !s.ok()) return s;
      }
    }
    at = end;
  }
  return absl::OkStatus();
}

// Instruction indices, async handles (one per start, repeated by its wait),
// order and lifetimes of the longer plan.
void Repeater::finish() {
  plan::Program& program = out_.programs.front();
  int64_t index = 0, handles = 0;
  std::map<int64_t, std::string> handleOf;  // future buffer -> handle
  for (plan::Block& block : program.blocks) {
    for (plan::Instruction& in : block.instructions) {
      in.index = index++;
      in.start_s.reset();
      in.duration_s.reset();
      if (in.info->async_start) {
        in.attrs.async_handle = absl::StrCat("h", handles++);
        handleOf[in.results[0]] = in.attrs.async_handle;
      } else if (in.info->family == plan::OpFamily::kWait) {
        in.attrs.async_handle = handleOf[in.operands[0]];
      }
    }
  }
  program.assignOrder();
  const std::vector<plan::Lifetime> live = plan::computeLifetimes(out_, program);
  for (plan::Buffer& b : out_.buffers) b.live = live[b.id];
}

absl::StatusOr<Repeated> Repeater::run() {
  if (k_.programs.size() != 1) {
    return absl::InvalidArgumentError("repeating blocks needs a plan with one program");
  }
  if (absl::Status s = findStack(); !s.ok()) return s;
  if (blocks_ < kTemplateBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot shorten a plan: ", blocks_, " < ", kTemplateBlocks, " blocks"));
  }
  const plan::Program& program = k_.programs.front();
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    if (absl::Status s = cutBlock(b); !s.ok()) return s;
  }
  // Definitions: a result first defined by an instruction (not an entry
  // buffer, not an in-place update), numbered within its unit.
  std::map<std::pair<size_t, int64_t>, size_t> defCount;
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
            .block = b, .unit = unit, .ordinal = defCount[{b, unit}]++, .layer = layerOf(ins[i])};
      }
    }
  }
  // The template's header; buffers and the program are made below.
  out_.source = k_.source;
  out_.model = k_.model;
  out_.function = k_.function;
  out_.mesh = k_.mesh;
  out_.strategies = k_.strategies;
  out_.topology = k_.topology;
  out_.micro_batches = k_.micro_batches;
  out_.interface = k_.interface;
  // About blocks_ / kTemplateBlocks times the template's.
  const size_t scale = static_cast<size_t>(blocks_ / kTemplateBlocks + 1);
  out_.buffers.reserve(k_.buffers.size() * scale);
  source_.reserve(k_.buffers.size() * scale);
  addEntryBuffers();
  plan::Program& longer = out_.programs.emplace_back();
  longer.stage = program.stage;
  longer.schedule = program.schedule;
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    plan::Block& block = longer.blocks.emplace_back();
    block.name = program.blocks[b].name;
    block.phase = program.blocks[b].phase;
    block.instructions.reserve(program.blocks[b].instructions.size() * scale);
    std::vector<int64_t> units = {kPrefix};
    for (int64_t i = 0; i < blocks_; ++i) units.push_back(descending_[b] ? blocks_ - 1 - i : i);
    units.push_back(kSuffix);
    for (int64_t unit : units) {
      if (absl::Status s = emitUnit(b, unit, block); !s.ok()) return s;
    }
  }
  plan::Interface& io = out_.interface;
  for (int64_t* id : {&io.ids, &io.labels, &io.loss_grad_seed, &io.loss, &io.positions}) {
    if (*id < 0) continue;
    absl::StatusOr<int64_t> mapped = resolve(*id, Reader{});
    if (!mapped.ok()) return mapped.status();
    *id = *mapped;
  }
  finish();
  return Repeated{.plan = std::move(out_), .source = std::move(source_)};
}

}  // namespace

absl::StatusOr<Repeated> repeatBlocks(const plan::Plan& shorter, int64_t blocks) {
  return Repeater(shorter, blocks).run();
}

void copySizes(const plan::Plan& resized, Repeated& repeated) {
  repeated.plan.mesh = resized.mesh;
  for (plan::Buffer& b : repeated.plan.buffers) {
    const plan::Buffer& from = resized.buffers[repeated.source[b.id]];
    b.global_shape = from.global_shape;
    b.local_shape = from.local_shape;
    b.bytes = from.bytes;
  }
}

}  // namespace loom::planner::cost
