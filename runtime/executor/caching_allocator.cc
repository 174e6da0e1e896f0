// Size-class caching over aligned_alloc; see the header.
#include "runtime/executor/caching_allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace loom::runtime {

CachingAllocator::~CachingAllocator() {
  for (auto& [block, info] : live_) std::free(block);
  for (auto& [capacity, block] : free_) std::free(block);
}

size_t CachingAllocator::sizeClass(size_t bytes) {
  // 256-byte steps up to 1 MiB, then 1/8 of the next power of two, so a
  // cached block wastes at most ~12 % of its size.
  if (bytes <= 256) return 256;
  if (bytes <= (1u << 20)) return (bytes + 255) & ~size_t{255};
  size_t power = 1u << 20;
  while (power < bytes) power <<= 1;
  const size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t capacity = sizeClass(bytes);
  void* block = nullptr;
  // The smallest cached block that fits, if it is not more than twice the
  // class (so a small request does not pin a huge block).
  auto it = free_.lower_bound(capacity);
  if (it != free_.end() && it->first <= 2 * capacity) {
    block = it->second;
    const size_t have = it->first;
    free_.erase(it);
    live_[block] = {bytes, have};
  } else {
    block = std::aligned_alloc(64, capacity);
    if (block == nullptr) throw std::bad_alloc();
    ++stats_.system_allocations;
    stats_.reserved_bytes += static_cast<int64_t>(capacity);
    live_[block] = {bytes, capacity};
  }
  std::memset(block, 0, bytes);
  ++stats_.allocations;
  stats_.in_use_bytes += static_cast<int64_t>(bytes);
  if (stats_.in_use_bytes > stats_.peak_in_use_bytes) stats_.peak_in_use_bytes = stats_.in_use_bytes;
  return block;
}

void CachingAllocator::release(void* block) {
  auto it = live_.find(block);
  if (it == live_.end()) return;
  stats_.in_use_bytes -= static_cast<int64_t>(it->second.requested);
  free_.emplace(it->second.capacity, block);
  live_.erase(it);
}

}  // namespace loom::runtime
