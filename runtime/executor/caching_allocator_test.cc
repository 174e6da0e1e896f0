// The caching allocator reuses freed blocks and counts what it hands out.
#include "runtime/executor/caching_allocator.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace loom::runtime {
namespace {

TEST(CachingAllocatorTest, ReusesFreedBlocksWithoutSystemCalls) {
  CachingAllocator allocator;
  void* a = allocator.allocate(1000);
  void* b = allocator.allocate(5000);
  EXPECT_EQ(allocator.stats().system_allocations, 2);
  allocator.release(a);
  allocator.release(b);
  // A second "step" with the same sizes is served from the cache.
  void* c = allocator.allocate(1000);
  void* d = allocator.allocate(5000);
  EXPECT_EQ(allocator.stats().system_allocations, 2);
  EXPECT_EQ(c, a);
  EXPECT_EQ(d, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 64, 0u);
}

TEST(CachingAllocatorTest, CountsRequestedBytesAndThePeak) {
  CachingAllocator allocator;
  void* a = allocator.allocate(100);
  void* b = allocator.allocate(300);
  EXPECT_EQ(allocator.stats().in_use_bytes, 400);
  allocator.release(a);
  EXPECT_EQ(allocator.stats().in_use_bytes, 300);
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, 400);
  allocator.resetPeak();
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, 300);
  allocator.release(b);
  EXPECT_EQ(allocator.stats().in_use_bytes, 0);
  EXPECT_GE(allocator.stats().reserved_bytes, 400);
}

TEST(CachingAllocatorTest, HandsOutZeroedMemoryEvenWhenReused) {
  CachingAllocator allocator;
  auto* a = static_cast<unsigned char*>(allocator.allocate(4096));
  std::memset(a, 0xff, 4096);
  allocator.release(a);
  auto* b = static_cast<unsigned char*>(allocator.allocate(4000));
  for (int i = 0; i < 4000; ++i) ASSERT_EQ(b[i], 0) << i;
}

TEST(CachingAllocatorTest, DoesNotPinHugeBlocksForSmallRequests) {
  CachingAllocator allocator;
  void* big = allocator.allocate(8 << 20);
  allocator.release(big);
  void* small = allocator.allocate(1024);
  EXPECT_NE(small, big);
  EXPECT_EQ(allocator.stats().system_allocations, 2);
}

}  // namespace
}  // namespace loom::runtime
