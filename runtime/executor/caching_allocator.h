// A caching allocator for the executor's buffers: freed blocks are kept in
// per-size free lists and handed out again, so a training step after the
// first asks the system for no memory. It counts the bytes handed out (what
// the planner's memory model predicts) and the bytes it holds from the
// system. Where the blocks come from is a BlockSource: host memory by
// default, one CUDA device's memory for the CUDA executor (cuda_device.h),
// so both keep the same size classes and the same AllocatorStats.
#ifndef LOOM_RUNTIME_EXECUTOR_CACHING_ALLOCATOR_H_
#define LOOM_RUNTIME_EXECUTOR_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

namespace loom::runtime {

struct AllocatorStats {
  int64_t in_use_bytes = 0;        // requested sizes of live blocks
  int64_t peak_in_use_bytes = 0;   // since the last resetPeak
  int64_t reserved_bytes = 0;      // held from the system (live + cached)
  int64_t system_allocations = 0;  // calls to the system allocator
  int64_t allocations = 0;         // calls to allocate
};

// The system memory under the cache.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // `bytes` bytes aligned to at least 64, or nullptr when the memory is
  // exhausted.
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* block) = 0;
  // Zeroes `bytes` bytes at `block` before the block is handed out (for a
  // device: ordered before any later work on the device's compute stream).
  virtual void zero(void* block, size_t bytes) = 0;
};

// aligned_alloc / free / memset; throws std::bad_alloc when exhausted.
std::unique_ptr<BlockSource> hostBlockSource();

class CachingAllocator {
 public:
  // Host memory unless `source` says otherwise.
  explicit CachingAllocator(std::unique_ptr<BlockSource> source = nullptr);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // 64-byte aligned, zero-filled memory for `bytes` bytes (0 is allowed and
  // returns a distinct small block). When the source is exhausted the
  // cached free blocks are given back and the request tried once more;
  // nullptr if it still fails.
  void* allocate(size_t bytes);
  void release(void* block);

  const AllocatorStats& stats() const { return stats_; }
  // Starts a new peak window at the current in-use figure.
  void resetPeak() { stats_.peak_in_use_bytes = stats_.in_use_bytes; }

 private:
  // Blocks are rounded up to a size class so that near sizes share lists.
  static size_t sizeClass(size_t bytes);
  void freeCached();

  struct Live {
    size_t requested;
    size_t capacity;
  };
  std::unique_ptr<BlockSource> source_;
  std::unordered_map<void*, Live> live_;
  std::multimap<size_t, void*> free_;  // capacity -> block
  AllocatorStats stats_;
};

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_CACHING_ALLOCATOR_H_
