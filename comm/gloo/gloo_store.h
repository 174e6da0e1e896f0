// Lets Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh) run
// over one of our Stores, with our timeouts and errors.
#ifndef LOOM_COMM_GLOO_GLOO_STORE_H_
#define LOOM_COMM_GLOO_GLOO_STORE_H_

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/store.h"
#include "gloo/rendezvous/store.h"

namespace loom::comm::gloo {

// What the adapter throws when the store fails: Gloo's rendezvous only
// speaks exceptions, and this one carries our Status through it intact.
class StoreFailure : public std::runtime_error {
 public:
  explicit StoreFailure(absl::Status status)
      : std::runtime_error(std::string(status.message())), status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class GlooStore : public ::gloo::rendezvous::Store {
 public:
  // Blocking calls without a timeout of their own wait up to `timeout`.
  GlooStore(std::shared_ptr<comm::Store> store, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<comm::Store> store_;
  absl::Duration timeout_;
};

}  // namespace loom::comm::gloo

#endif  // LOOM_COMM_GLOO_GLOO_STORE_H_
