// A caching host allocator for the executor's buffers: freed blocks are kept
// in per-size free lists and handed out again, so a training step after the
// first makes no malloc calls. It counts the bytes handed out (what the
// planner's memory model predicts) and the bytes it holds from the system.
#ifndef LOOM_RUNTIME_EXECUTOR_CACHING_ALLOCATOR_H_
#define LOOM_RUNTIME_EXECUTOR_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace loom::runtime {

struct AllocatorStats {
  int64_t in_use_bytes = 0;       // requested sizes of live blocks
  int64_t peak_in_use_bytes = 0;  // since the last resetPeak
  int64_t reserved_bytes = 0;     // held from the system (live + cached)
  int64_t system_allocations = 0; // calls to the system allocator
  int64_t allocations = 0;        // calls to allocate
};

class CachingAllocator {
 public:
  CachingAllocator() = default;
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // 64-byte aligned, zero-filled memory for `bytes` bytes (0 is allowed and
  // returns a distinct small block).
  void* allocate(size_t bytes);
  void release(void* block);

  const AllocatorStats& stats() const { return stats_; }
  // Starts a new peak window at the current in-use figure.
  void resetPeak() { stats_.peak_in_use_bytes = stats_.in_use_bytes; }

 private:
  // Blocks are rounded up to a size class so that near sizes share lists.
  static size_t sizeClass(size_t bytes);

  struct Live {
    size_t requested;
    size_t capacity;
  };
  std::unordered_map<void*, Live> live_;
  std::multimap<size_t, void*> free_;  // capacity -> block
  AllocatorStats stats_;
};

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_CACHING_ALLOCATOR_H_
