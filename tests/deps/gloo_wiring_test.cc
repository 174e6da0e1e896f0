// Wiring test for Gloo: two ranks (threads) rendezvous through Gloo's
// in-memory store, connect over the TCP transport on loopback and all-reduce.
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"

namespace {

constexpr int kWorldSize = 2;
constexpr int kCount = 1024;
constexpr auto kTimeout = std::chrono::seconds(30);

void runRank(int rank, gloo::rendezvous::HashStore& store, std::vector<float>& data) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, kWorldSize);
  context->setTimeout(kTimeout);
  context->connectFullMesh(store, device);

  gloo::AllreduceOptions options(context);
  options.setOutput(data.data(), data.size());
  options.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  options.setTimeout(kTimeout);
  gloo::allreduce(options);
}

TEST(GlooWiringTest, TwoRankAllreduceOverTcp) {
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<float>> data(kWorldSize, std::vector<float>(kCount));
  for (int rank = 0; rank < kWorldSize; ++rank) {
    for (int i = 0; i < kCount; ++i) data[rank][i] = static_cast<float>((rank + 1) * i);
  }

  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    ranks.emplace_back([&, rank] { runRank(rank, store, data[rank]); });
  }
  for (auto& t : ranks) t.join();

  for (int rank = 0; rank < kWorldSize; ++rank) {
    for (int i = 0; i < kCount; ++i) {
      ASSERT_EQ(data[rank][i], static_cast<float>(3 * i)) << "rank " << rank << " element " << i;
    }
  }
}

}  // namespace
