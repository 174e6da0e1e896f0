// AdamW on the host for offloaded optimizer states (docs/planner_offload.md):
// adamwStep over fixed chunks of elements, spread over a small pool of
// threads. adamwStep is elementwise, so each element takes exactly the
// operations the one-call step does, and neither the chunk size nor the
// thread count changes a bit: the host step equals the device step on the
// CPU kernel set, which calls adamwStep on the whole tensor.
#ifndef LOOM_RUNTIME_OPTIM_HOST_ADAMW_H_
#define LOOM_RUNTIME_OPTIM_HOST_ADAMW_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/optim/adamw.h"

namespace loom::runtime::optim {

// Gradients as the host step reads them: f32, or bf16 as raw bits (read
// as their exact f32 values).
struct HostGrads {
  const void* data = nullptr;
  bool bf16 = false;
};

class HostAdamW {
 public:
  // Elements per chunk: large enough that a chunk's scratch and work
  // amortise the hand-off, small enough to spread a layer over threads.
  static constexpr int64_t kChunk = int64_t{1} << 16;

  // `threads` workers in all, the calling thread one of them (at least 1).
  explicit HostAdamW(int threads);
  ~HostAdamW();
  HostAdamW(const HostAdamW&) = delete;
  HostAdamW& operator=(const HostAdamW&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // adamwStep on `count` elements of `params` (f32), `exp_avg` and
  // `exp_avg_sq`, the gradients first multiplied by `grad_scale` when it
  // is below 1, as scaleGradients would (a copy: `grads` is not written).
  void step(const AdamWConfig& config, int64_t step, float* params, HostGrads grads,
            float* exp_avg, float* exp_avg_sq, int64_t count, float grad_scale = 1.0f);

  // dst[i] = src[i] rounded to bf16, to nearest even (comm::floatToBfloat16).
  void toBfloat16(const float* src, uint16_t* dst, int64_t count);

 private:
  // Runs body(c) for every chunk c < chunks on the pool and the caller.
  void parallelFor(int64_t chunks, const std::function<void(int64_t)>& body);
  void work();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  // The job in hand: its body, chunk count, next chunk to take, chunks
  // still running, and a generation that wakes the workers once per job.
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t chunks_ = 0;
  int64_t next_ = 0;
  int64_t running_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace loom::runtime::optim

#endif  // LOOM_RUNTIME_OPTIM_HOST_ADAMW_H_
