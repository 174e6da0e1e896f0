// Makes ThreadSanitizer see Abseil's locks. Debian's Abseil is a prebuilt,
// uninstrumented shared library, so TSan cannot see absl::Mutex,
// absl::CondVar or absl::Notification order threads, and reports every
// access they guard as a race. Linked into every binary by `--config=tsan`
// (through --custom_malloc), this file defines the public lock, wait and
// notify entry points in the executable, which take precedence over the
// shared library's (symbol interposition). Each forwards to Abseil's own,
// found with dlsym(RTLD_NEXT), and tells TSan what it did with the
// annotations Abseil makes itself when it is built with TSan. Outside a TSan
// build this file is empty.
#if defined(__SANITIZE_THREAD__)

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

// Mangled names of absl::<inline namespace>::X. Debian's inline namespace
// is "debian3"; with another, dlsym fails and the binary says so at once.
#define ABSL_MEMBER(tail) "_ZN4absl7debian3" tail
#define ABSL_CONST_MEMBER(tail) "_ZNK4absl7debian3" tail

namespace {

using absl::Condition;
using absl::CondVar;
using absl::Mutex;
using absl::Notification;

// Abseil's definition of `name`: the next one after this executable's.
template <typename F>
F next(const char* name) {
  void* symbol = ::dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s is not in Abseil; update %s\n", name, __FILE__);
    std::abort();
  }
  return reinterpret_cast<F>(symbol);
}

// Abseil's public functions call each other through the PLT (AwaitWithTimeout
// tail-calls AwaitWithDeadline, Notification locks its own mutex), so
// those inner calls reach the wrappers too. Only the outermost call on a
// thread is annotated; what happens inside it is Abseil's business.
thread_local int t_depth = 0;

class Outermost {
 public:
  Outermost() : outer_(t_depth++ == 0) {}
  ~Outermost() { --t_depth; }
  explicit operator bool() const { return outer_; }

 private:
  const bool outer_;
};

// For calls that release the mutex while they wait and hold it again when
// they return: the release is visible to TSan at once; what the call does
// inside (Abseil evaluating Conditions) is ignored, and the return acquires.
void releaseForWait(Mutex* mu) { __tsan_mutex_pre_unlock(mu, 0); }
void acquireAfterWait(Mutex* mu) {
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

}  // namespace

// Each wrapper is a plain function under the member's mangled name; `this`
// is its first argument, as in the member's calling convention.
extern "C" {

void loomLock(Mutex* mu) __asm__(ABSL_MEMBER("5Mutex4LockEv"));
void loomLock(Mutex* mu) {
  static const auto real = next<void (*)(Mutex*)>(ABSL_MEMBER("5Mutex4LockEv"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(mu, 0);
  real(mu);
  if (outer) __tsan_mutex_post_lock(mu, 0, 0);
}

void loomUnlock(Mutex* mu) __asm__(ABSL_MEMBER("5Mutex6UnlockEv"));
void loomUnlock(Mutex* mu) {
  static const auto real = next<void (*)(Mutex*)>(ABSL_MEMBER("5Mutex6UnlockEv"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_unlock(mu, 0);
  real(mu);
  if (outer) __tsan_mutex_post_unlock(mu, 0);
}

bool loomTryLock(Mutex* mu) __asm__(ABSL_MEMBER("5Mutex7TryLockEv"));
bool loomTryLock(Mutex* mu) {
  static const auto real = next<bool (*)(Mutex*)>(ABSL_MEMBER("5Mutex7TryLockEv"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(mu, __tsan_mutex_try_lock);
  const bool locked = real(mu);
  if (outer) {
    __tsan_mutex_post_lock(mu, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  }
  return locked;
}

void loomReaderLock(Mutex* mu) __asm__(ABSL_MEMBER("5Mutex10ReaderLockEv"));
void loomReaderLock(Mutex* mu) {
  static const auto real = next<void (*)(Mutex*)>(ABSL_MEMBER("5Mutex10ReaderLockEv"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(mu, __tsan_mutex_read_lock);
  real(mu);
  if (outer) __tsan_mutex_post_lock(mu, __tsan_mutex_read_lock, 0);
}

void loomReaderUnlock(Mutex* mu) __asm__(ABSL_MEMBER("5Mutex12ReaderUnlockEv"));
void loomReaderUnlock(Mutex* mu) {
  static const auto real = next<void (*)(Mutex*)>(ABSL_MEMBER("5Mutex12ReaderUnlockEv"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_unlock(mu, __tsan_mutex_read_lock);
  real(mu);
  if (outer) __tsan_mutex_post_unlock(mu, __tsan_mutex_read_lock);
}

void loomLockWhen(Mutex* mu,
                  const Condition& cond) __asm__(ABSL_MEMBER("5Mutex8LockWhenERKNS0_9ConditionE"));
void loomLockWhen(Mutex* mu, const Condition& cond) {
  static const auto real =
      next<void (*)(Mutex*, const Condition&)>(ABSL_MEMBER("5Mutex8LockWhenERKNS0_9ConditionE"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(mu, 0);
  real(mu, cond);
  if (outer) __tsan_mutex_post_lock(mu, 0, 0);
}

bool loomLockWhenWithTimeout(Mutex* mu, const Condition& cond, absl::Duration timeout) __asm__(
    ABSL_MEMBER("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
bool loomLockWhenWithTimeout(Mutex* mu, const Condition& cond, absl::Duration timeout) {
  static const auto real = next<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      ABSL_MEMBER("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(mu, 0);
  const bool met = real(mu, cond, timeout);
  if (outer) __tsan_mutex_post_lock(mu, 0, 0);
  return met;
}

void loomAwait(Mutex* mu,
               const Condition& cond) __asm__(ABSL_MEMBER("5Mutex5AwaitERKNS0_9ConditionE"));
void loomAwait(Mutex* mu, const Condition& cond) {
  static const auto real =
      next<void (*)(Mutex*, const Condition&)>(ABSL_MEMBER("5Mutex5AwaitERKNS0_9ConditionE"));
  const Outermost outer;
  if (outer) releaseForWait(mu);
  real(mu, cond);
  if (outer) acquireAfterWait(mu);
}

bool loomAwaitWithTimeout(Mutex* mu, const Condition& cond, absl::Duration timeout) __asm__(
    ABSL_MEMBER("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
bool loomAwaitWithTimeout(Mutex* mu, const Condition& cond, absl::Duration timeout) {
  static const auto real = next<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      ABSL_MEMBER("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  const Outermost outer;
  if (outer) releaseForWait(mu);
  const bool met = real(mu, cond, timeout);
  if (outer) acquireAfterWait(mu);
  return met;
}

bool loomAwaitWithDeadline(Mutex* mu, const Condition& cond, absl::Time deadline) __asm__(
    ABSL_MEMBER("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
bool loomAwaitWithDeadline(Mutex* mu, const Condition& cond, absl::Time deadline) {
  static const auto real = next<bool (*)(Mutex*, const Condition&, absl::Time)>(
      ABSL_MEMBER("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  const Outermost outer;
  if (outer) releaseForWait(mu);
  const bool met = real(mu, cond, deadline);
  if (outer) acquireAfterWait(mu);
  return met;
}

void loomWait(CondVar* cv, Mutex* mu) __asm__(ABSL_MEMBER("7CondVar4WaitEPNS0_5MutexE"));
void loomWait(CondVar* cv, Mutex* mu) {
  static const auto real =
      next<void (*)(CondVar*, Mutex*)>(ABSL_MEMBER("7CondVar4WaitEPNS0_5MutexE"));
  const Outermost outer;
  if (outer) releaseForWait(mu);
  real(cv, mu);
  if (outer) acquireAfterWait(mu);
}

bool loomWaitWithTimeout(CondVar* cv, Mutex* mu, absl::Duration timeout) __asm__(
    ABSL_MEMBER("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE"));
bool loomWaitWithTimeout(CondVar* cv, Mutex* mu, absl::Duration timeout) {
  static const auto real = next<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      ABSL_MEMBER("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE"));
  const Outermost outer;
  if (outer) releaseForWait(mu);
  const bool timed_out = real(cv, mu, timeout);
  if (outer) acquireAfterWait(mu);
  return timed_out;
}

bool loomWaitWithDeadline(CondVar* cv, Mutex* mu, absl::Time deadline) __asm__(
    ABSL_MEMBER("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE"));
bool loomWaitWithDeadline(CondVar* cv, Mutex* mu, absl::Time deadline) {
  static const auto real = next<bool (*)(CondVar*, Mutex*, absl::Time)>(
      ABSL_MEMBER("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE"));
  const Outermost outer;
  if (outer) releaseForWait(mu);
  const bool timed_out = real(cv, mu, deadline);
  if (outer) acquireAfterWait(mu);
  return timed_out;
}

// Notify is a release; a wait that sees it is the matching acquire.
void loomNotify(Notification* n) __asm__(ABSL_MEMBER("12Notification6NotifyEv"));
void loomNotify(Notification* n) {
  static const auto real = next<void (*)(Notification*)>(ABSL_MEMBER("12Notification6NotifyEv"));
  const Outermost outer;
  if (outer) __tsan_release(n);
  real(n);
}

void loomWaitForNotification(const Notification* n) __asm__(
    ABSL_CONST_MEMBER("12Notification19WaitForNotificationEv"));
void loomWaitForNotification(const Notification* n) {
  static const auto real = next<void (*)(const Notification*)>(
      ABSL_CONST_MEMBER("12Notification19WaitForNotificationEv"));
  const Outermost outer;
  real(n);
  if (outer) __tsan_acquire(const_cast<Notification*>(n));
}

bool loomWaitForNotificationWithTimeout(const Notification* n, absl::Duration timeout) __asm__(
    ABSL_CONST_MEMBER("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE"));
bool loomWaitForNotificationWithTimeout(const Notification* n, absl::Duration timeout) {
  static const auto real = next<bool (*)(const Notification*, absl::Duration)>(
      ABSL_CONST_MEMBER("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE"));
  const Outermost outer;
  const bool notified = real(n, timeout);
  if (outer && notified) __tsan_acquire(const_cast<Notification*>(n));
  return notified;
}

}  // extern "C"

#endif  // defined(__SANITIZE_THREAD__)
