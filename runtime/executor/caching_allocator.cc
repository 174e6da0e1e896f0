// Size-class caching over a BlockSource; see the header.
#include "runtime/executor/caching_allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace loom::runtime {
namespace {

class HostBlockSource : public BlockSource {
 public:
  void* allocate(size_t bytes) override {
    void* block = std::aligned_alloc(64, bytes);
    if (block == nullptr) throw std::bad_alloc();
    return block;
  }
  void free(void* block) override { std::free(block); }
  void zero(void* block, size_t bytes) override { std::memset(block, 0, bytes); }
};

}  // namespace

std::unique_ptr<BlockSource> hostBlockSource() { return std::make_unique<HostBlockSource>(); }

CachingAllocator::CachingAllocator(std::unique_ptr<BlockSource> source)
    : source_(source ? std::move(source) : hostBlockSource()) {}

CachingAllocator::~CachingAllocator() {
  for (auto& [block, info] : live_) source_->free(block);
  for (auto& [capacity, block] : free_) source_->free(block);
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

void CachingAllocator::freeCached() {
  for (auto& [capacity, block] : free_) {
    source_->free(block);
    stats_.reserved_bytes -= static_cast<int64_t>(capacity);
  }
  free_.clear();
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
    block = source_->allocate(capacity);
    if (block == nullptr && !free_.empty()) {
      // Cached blocks of other classes may be what fills the device.
      freeCached();
      block = source_->allocate(capacity);
    }
    if (block == nullptr) return nullptr;
    ++stats_.system_allocations;
    stats_.reserved_bytes += static_cast<int64_t>(capacity);
    live_[block] = {bytes, capacity};
  }
  source_->zero(block, bytes);
  ++stats_.allocations;
  stats_.in_use_bytes += static_cast<int64_t>(bytes);
  if (stats_.in_use_bytes > stats_.peak_in_use_bytes)
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
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
