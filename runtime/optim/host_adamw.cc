// AdamW on the host over a thread pool (host_adamw.h).
#include "runtime/optim/host_adamw.h"

#include <algorithm>
#include <cstring>

#include "comm/half_float.h"

namespace loom::runtime::optim {

HostAdamW::HostAdamW(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { work(); });
}

HostAdamW::~HostAdamW() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

// A worker: wakes for each job and takes its chunks until none is left,
// running each without the lock.
void HostAdamW::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t seen = 0;
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_ < chunks_) {
      const int64_t chunk = next_++;
      const std::function<void(int64_t)>& body = *body_;
      lock.unlock();
      body(chunk);
      lock.lock();
      if (--running_ == 0) done_.notify_all();
    }
  }
}

void HostAdamW::parallelFor(int64_t chunks, const std::function<void(int64_t)>& body) {
  if (chunks <= 1 || workers_.empty()) {
    for (int64_t c = 0; c < chunks; ++c) body(c);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  body_ = &body;
  chunks_ = chunks;
  next_ = 0;
  running_ = chunks;
  ++generation_;
  wake_.notify_all();
  while (next_ < chunks_) {
    const int64_t chunk = next_++;
    lock.unlock();
    body(chunk);
    lock.lock();
    --running_;
  }
  done_.wait(lock, [&] { return running_ == 0; });
  body_ = nullptr;
  chunks_ = 0;
}

void HostAdamW::step(const AdamWConfig& config, int64_t step, float* params, HostGrads grads,
                     float* exp_avg, float* exp_avg_sq, int64_t count, float grad_scale) {
  const bool scale = grad_scale < 1.0f;
  parallelFor((count + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t begin = chunk * kChunk;
    const int64_t n = std::min(kChunk, count - begin);
    const float* g = static_cast<const float*>(grads.data) + begin;
    // Widened or scaled gradients go to scratch of the chunk's own.
    std::vector<float> scratch;
    if (grads.bf16 || scale) {
      scratch.resize(static_cast<size_t>(n));
      if (grads.bf16) {
        const uint16_t* bits = static_cast<const uint16_t*>(grads.data) + begin;
        for (int64_t i = 0; i < n; ++i) scratch[i] = comm::bfloat16ToFloat(bits[i]);
      } else {
        std::memcpy(scratch.data(), g, static_cast<size_t>(n) * sizeof(float));
      }
      if (scale) scaleGradients(scratch.data(), n, grad_scale);
      g = scratch.data();
    }
    adamwStep(config, step, params + begin, g, exp_avg + begin, exp_avg_sq + begin, n);
  });
}

void HostAdamW::toBfloat16(const float* src, uint16_t* dst, int64_t count) {
  parallelFor((count + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = std::min(begin + kChunk, count);
    for (int64_t i = begin; i < end; ++i) dst[i] = comm::floatToBfloat16(src[i]);
  });
}

}  // namespace loom::runtime::optim
