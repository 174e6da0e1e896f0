// Replays the cases torch_reference.py recorded (every rank's inputs and
// PyTorch's outputs) through loom's ProcessGroup on the gloo backend, each
// rank a thread, and compares the outputs bit for bit. Prints one line per
// case and exits non-zero on any difference.
//
// Usage: torch_compare REFERENCE.json
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/all_backends.h"
#include "comm/errors.h"
#include "comm/hash_store.h"
#include "comm/object_collectives.h"
#include "comm/process_group.h"
#include "comm/reduce_op.h"
#include "comm/tensor.h"
#include "nlohmann/json.hpp"

namespace loom::comm {
namespace {

using Json = nlohmann::json;

// A tensor that owns its bytes.
struct Owned {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  Tensor tensor() { return Tensor(bytes.data(), dtype, shape); }
};

absl::StatusOr<Owned> decode(const Json& j) {
  Owned owned;
  absl::StatusOr<DType> dtype = dtypeFromName(j.at("dtype").get<std::string>());
  if (!dtype.ok()) return dtype.status();
  owned.dtype = *dtype;
  owned.shape = j.at("shape").get<std::vector<int64_t>>();
  const std::string raw = absl::HexStringToBytes(j.at("hex").get<std::string>());
  owned.bytes.assign(raw.begin(), raw.end());
  return owned;
}

absl::StatusOr<std::vector<Owned>> decodeAll(const Json& list) {
  std::vector<Owned> result;
  if (list.is_null()) return result;
  for (const Json& j : list) {
    absl::StatusOr<Owned> owned = decode(j);
    if (!owned.ok()) return owned.status();
    result.push_back(*std::move(owned));
  }
  return result;
}

// Zeroed tensors shaped like `like` (where the results go).
std::vector<Owned> blanksLike(const std::vector<Owned>& like) {
  std::vector<Owned> result = like;
  for (Owned& owned : result) std::fill(owned.bytes.begin(), owned.bytes.end(), 0);
  return result;
}

std::vector<Tensor> views(std::vector<Owned>& owned) {
  std::vector<Tensor> result;
  for (Owned& o : owned) result.push_back(o.tensor());
  return result;
}

absl::StatusOr<ReduceOp> reduceOpNamed(const std::string& name) {
  for (ReduceOp op : kAllReduceOps) {
    if (reduceOpName(op) == name) return op;
  }
  return invalidArgumentError(absl::StrCat("unknown reduce op ", name));
}

absl::Status waitFor(const absl::StatusOr<std::shared_ptr<Work>>& work) {
  if (!work.ok()) return work.status();
  return (*work)->wait();
}

// Empty when `got` equals `want` bit for bit, else what differs.
std::string difference(const std::vector<Owned>& got, const std::vector<Owned>& want) {
  if (got.size() != want.size()) {
    return absl::StrCat(got.size(), " outputs, want ", want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].bytes == want[i].bytes) continue;
    const std::string g(got[i].bytes.begin(), got[i].bytes.end());
    const std::string w(want[i].bytes.begin(), want[i].bytes.end());
    return absl::StrCat("output ", i, ": got ", absl::BytesToHexString(g.substr(0, 32)),
                        "..., want ", absl::BytesToHexString(w.substr(0, 32)), "...");
  }
  return "";
}

bool objectCase(const std::string& op) {
  return op == "broadcast_object_list" || op == "all_gather_object" || op == "gather_object" ||
         op == "scatter_object_list" || op == "send_recv_object_list";
}

// An object case: the strings torch's object collective delivered against
// those loom's delivers ("" when equal).
absl::StatusOr<std::string> runObjectCase(ProcessGroup& world, const std::string& op,
                                          const Json& mine) {
  const std::vector<std::string> in = mine.at("objects_in").get<std::vector<std::string>>();
  const int root = mine.value("root", 0);
  std::vector<std::string> got;
  absl::Status status;
  if (op == "broadcast_object_list") {
    got = in;
    status = broadcastObjectList(world, got, root);
  } else if (op == "all_gather_object") {
    status = allGatherObject(world, got, in.at(0));
  } else if (op == "gather_object") {
    status = gatherObject(world, in.at(0), got, root);
  } else if (op == "scatter_object_list") {
    got.resize(1);
    status = scatterObjectList(world, got[0], in, root);
  } else if (world.rank() == 0) {
    status = sendObjectList(world, in, 1);
  } else if (world.rank() == 1) {
    got.resize(2);
    status = recvObjectList(world, got, 0);
  }
  if (!status.ok()) return status;
  if (mine.at("objects_out").is_null()) return std::string();
  const std::vector<std::string> want = mine.at("objects_out").get<std::vector<std::string>>();
  if (got == want) return std::string();
  return absl::StrCat("objects [", absl::StrJoin(got, " | "), "], want [",
                      absl::StrJoin(want, " | "), "]");
}

// Runs one rank's part of a case; returns what differs from PyTorch's
// outputs ("" when nothing), or an error.
absl::StatusOr<std::string> runCase(ProcessGroup& world, const Json& mine) {
  const std::string op = mine.at("op").get<std::string>();
  absl::StatusOr<std::vector<Owned>> inputs = decodeAll(mine.at("inputs"));
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<std::vector<Owned>> want = decodeAll(mine.at("outputs"));
  if (!want.ok()) return want.status();
  const bool check = !mine.at("outputs").is_null();
  ReduceOp reduce_op = ReduceOp::kSum;
  if (mine.contains("reduce_op")) {
    absl::StatusOr<ReduceOp> parsed = reduceOpNamed(mine.at("reduce_op").get<std::string>());
    if (!parsed.ok()) return parsed.status();
    reduce_op = *parsed;
  }
  const int root = mine.value("root", 0);
  std::vector<Owned> got;
  absl::Status status;

  if (op == "all_reduce" || op == "reduce" || op == "broadcast") {
    got = *inputs;
    const Tensor tensor = got[0].tensor();
    if (op == "all_reduce") status = waitFor(world.allReduce(tensor, {.op = reduce_op}));
    if (op == "reduce") status = waitFor(world.reduce(tensor, {.root = root, .op = reduce_op}));
    if (op == "broadcast") status = waitFor(world.broadcast(tensor, {.root = root}));
  } else if (op == "all_gather") {
    got = blanksLike(*want);
    status = waitFor(world.allGather(views(got), (*inputs)[0].tensor()));
  } else if (op == "all_gather_into_tensor") {
    got = blanksLike(*want);
    status = waitFor(world.allGatherIntoTensor(got[0].tensor(), (*inputs)[0].tensor()));
  } else if (op == "gather") {
    got = blanksLike(*want);
    status = waitFor(world.gather(views(got), (*inputs)[0].tensor(), {.root = root}));
  } else if (op == "scatter") {
    got = blanksLike(*want);
    status = waitFor(world.scatter(got[0].tensor(), views(*inputs), {.root = root}));
  } else if (op == "reduce_scatter") {
    got = blanksLike(*want);
    status = waitFor(world.reduceScatter(got[0].tensor(), views(*inputs), {.op = reduce_op}));
  } else if (op == "reduce_scatter_tensor") {
    got = blanksLike(*want);
    status = waitFor(
        world.reduceScatterTensor(got[0].tensor(), (*inputs)[0].tensor(), {.op = reduce_op}));
  } else if (op == "all_to_all") {
    got = blanksLike(*want);
    status = waitFor(world.allToAll(views(got), views(*inputs)));
  } else if (op == "all_to_all_single") {
    got = blanksLike(*want);
    status = waitFor(world.allToAllSingle(got[0].tensor(), (*inputs)[0].tensor(),
                                          mine.at("output_splits").get<std::vector<int64_t>>(),
                                          mine.at("input_splits").get<std::vector<int64_t>>()));
  } else if (op == "subgroup_all_reduce") {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
        world.newGroup(mine.at("ranks").get<std::vector<int>>());
    if (!group.ok()) return group.status();
    if (*group != nullptr) {
      got = *inputs;
      status = waitFor((*group)->allReduce(got[0].tensor(), {.op = reduce_op}));
    }
  } else if (op == "send_recv_ring") {
    got = blanksLike(*want);
    const int n = world.size();
    const absl::StatusOr<std::shared_ptr<Work>> sent =
        world.send((*inputs)[0].tensor(), (world.rank() + 1) % n);
    status = waitFor(world.recv(got[0].tensor(), (world.rank() + n - 1) % n));
    if (status.ok()) status = waitFor(sent);
  } else if (op == "recv_any_source") {
    got = blanksLike(*want);
    if (world.rank() == 0) {
      std::vector<std::pair<int, Owned>> received;
      for (size_t i = 0; i < got.size() && status.ok(); ++i) {
        Owned message = got[i];
        absl::StatusOr<int> sender = world.recvAnySourceSync(message.tensor());
        status = sender.status();
        if (status.ok()) received.emplace_back(*sender, std::move(message));
      }
      std::sort(received.begin(), received.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<int> senders;
      for (size_t i = 0; i < received.size(); ++i) {
        senders.push_back(received[i].first);
        got[i] = received[i].second;
      }
      if (status.ok() && senders != mine.at("senders").get<std::vector<int>>()) {
        return absl::StrCat("senders [", absl::StrJoin(senders, ", "), "], want ",
                            mine.at("senders").dump());
      }
    } else {
      status = world.sendSync((*inputs)[0].tensor(), 0);
    }
    if (status.ok()) status = world.barrierSync();
  } else if (objectCase(op)) {
    return runObjectCase(world, op, mine);
  } else {
    return invalidArgumentError(absl::StrCat("unknown op ", op));
  }
  if (!status.ok()) return status;
  return check ? difference(got, *want) : "";
}

int run(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 2;
  }
  const Json reference = Json::parse(in);
  const int n = reference.at("world_size").get<int>();
  const Json& cases = reference.at("cases");
  registerAllBackends();
  auto store = std::make_shared<HashStore>(absl::Seconds(60));

  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      auto fail = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(absl::StrCat("rank ", rank, ": ", what));
      };
      ProcessGroupOptions options;
      options.timeout = absl::Seconds(60);
      absl::StatusOr<std::shared_ptr<ProcessGroup>> world =
          ProcessGroup::create(store, rank, n, options);
      if (!world.ok()) return fail(world.status().ToString());
      for (const Json& c : cases) {
        const std::string name = c.at("name").get<std::string>();
        absl::StatusOr<std::string> diff = runCase(**world, c.at("ranks").at(rank));
        if (!diff.ok()) return fail(absl::StrCat(name, ": ", diff.status().ToString()));
        if (!diff->empty()) fail(absl::StrCat(name, ": ", *diff));
      }
    });
  }
  for (std::thread& t : threads) t.join();

  for (const Json& c : cases) {
    const Json& first = c.at("ranks").at(0);
    std::printf("case %s (reference: %s)\n", c.at("name").get<std::string>().c_str(),
                first.at("via").get<std::string>().c_str());
  }
  for (const std::string& failure : failures) std::printf("MISMATCH %s\n", failure.c_str());
  std::printf("%zu cases on %d ranks against torch %s: %zu mismatches\n", cases.size(), n,
              reference.at("torch").get<std::string>().c_str(), failures.size());
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace loom::comm

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s REFERENCE.json\n", argv[0]);
    return 2;
  }
  return loom::comm::run(argv[1]);
}
