// A monotonic-clock deadline for the blocking calls of the communication
// layer; every wait converts its absl::Duration timeout into one of these.
#ifndef LOOM_COMM_DEADLINE_H_
#define LOOM_COMM_DEADLINE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace loom::comm {

// Deadlines use the steady clock so that wall-clock jumps (NTP, a suspended
// laptop) neither fire nor stretch a timeout.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // A deadline `timeout` from now; negative timeouts are already expired and
  // absl::InfiniteDuration() never expires.
  static Deadline after(absl::Duration timeout) {
    const Clock::time_point now = Clock::now();
    if (timeout >= kForever) return Deadline(Clock::time_point::max());
    if (timeout <= absl::ZeroDuration()) return Deadline(now);
    return Deadline(
        now + std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(timeout)));
  }

  bool expired() const { return Clock::now() >= when_; }

  absl::Duration remaining() const {
    if (when_ == Clock::time_point::max()) return absl::InfiniteDuration();
    const Clock::time_point now = Clock::now();
    if (now >= when_) return absl::ZeroDuration();
    return absl::FromChrono(when_ - now);
  }

  // Milliseconds to pass to poll()/epoll_wait(), rounded up so a poll never
  // returns just before the deadline, capped at `cap_ms`.
  int pollMillis(int cap_ms) const {
    const absl::Duration left = remaining();
    if (left == absl::InfiniteDuration()) return cap_ms;
    const int64_t ms = absl::ToInt64Milliseconds(left + absl::Microseconds(999));
    return static_cast<int>(std::min<int64_t>(ms, cap_ms));
  }

 private:
  // Longer than any job; treated as "never" to keep the arithmetic in range.
  static constexpr absl::Duration kForever = absl::Hours(24 * 365 * 100);

  explicit Deadline(Clock::time_point when) : when_(when) {}

  Clock::time_point when_;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_DEADLINE_H_
