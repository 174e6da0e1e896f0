// Implements rendezvous: parses the init method URL and environment, opens
// the store, then runs a small protocol on it (claim the rank, agree on the
// world size, count arrivals) that turns every misconfiguration into an
// error naming the culprit instead of a hang.
#include "comm/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "comm/deadline.h"
#include "comm/errors.h"
#include "comm/file_store.h"
#include "comm/prefix_store.h"
#include "comm/tcp_store.h"

namespace loom::comm {
namespace {

// Protocol keys live under their own prefix so that they cannot collide
// with what the job stores later.
constexpr char kRendezvousPrefix[] = "loom/rendezvous";
constexpr char kWorldSizeKey[] = "world_size";
// Counts the ranks that passed every check.
constexpr char kArrivedKey[] = "arrived";
// Set once: "ok" by the last rank to arrive, or a failure (see publish) by
// the first rank that finds one. Every rank waits for it.
constexpr char kOutcomeKey[] = "outcome";
// Counts the ranks that have seen a failed outcome (see markSeen).
constexpr char kSeenKey[] = "seen";
constexpr absl::string_view kOk = "ok";
// After its deadline, the rank that serves the store keeps it up this much
// longer, for ranks already connected to learn the outcome.
constexpr absl::Duration kLingerGrace = absl::Seconds(2);

struct ParsedUrl {
  std::string scheme;
  std::string host;
  uint16_t port = 0;
  std::string path;
  std::optional<int> rank;
  std::optional<int> world_size;
};

absl::string_view av(std::string_view text) { return absl::string_view(text.data(), text.size()); }

// What a numeric field means, for the error that says how to set it.
std::string_view fieldMeaning(std::string_view field) {
  if (field == "rank" || field == "RANK") {
    return "this process's rank, an integer from 0 to the world size - 1";
  }
  if (field == "world_size" || field == "WORLD_SIZE") {
    return "the number of processes in the job, a positive integer such as 2";
  }
  if (field == "LOCAL_RANK") return "this process's rank on its machine, an integer from 0";
  return "an integer";
}

absl::StatusOr<int> parseInt(std::string_view field, std::string_view value,
                             std::string_view where) {
  int parsed = 0;
  if (!absl::SimpleAtoi(av(value), &parsed)) {
    return invalidArgumentError(absl::StrFormat("%s=%s in %s is not an integer; set it to %s",
                                                av(field), av(value), av(where),
                                                av(fieldMeaning(field))));
  }
  return parsed;
}

absl::StatusOr<uint16_t> parsePort(std::string_view value, std::string_view where) {
  int port = 0;
  if (!absl::SimpleAtoi(av(value), &port) || port < 1 || port > 65535) {
    return invalidArgumentError(absl::StrFormat(
        "port '%s' in %s is not a port number in [1, 65535]", av(value), av(where)));
  }
  return static_cast<uint16_t>(port);
}

absl::Status parseQuery(std::string_view query, std::string_view url, ParsedUrl& parsed) {
  if (query.empty()) return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(av(query), '&')) {
    if (item.empty()) continue;
    const std::pair<absl::string_view, absl::string_view> pair =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string_view name(pair.first.data(), pair.first.size());
    const std::string_view value(pair.second.data(), pair.second.size());
    if (name != "rank" && name != "world_size") {
      return invalidArgumentError(
          absl::StrFormat("unknown parameter '%s' in %s; the init method accepts rank and "
                          "world_size",
                          av(name), av(url)));
    }
    absl::StatusOr<int> number = parseInt(name, value, url);
    if (!number.ok()) return number.status();
    (name == "rank" ? parsed.rank : parsed.world_size) = *number;
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedUrl> parseUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    return invalidArgumentError(
        absl::StrFormat("init method '%s' has no scheme; use env://, tcp://host:port or "
                        "file:///path",
                        url));
  }
  ParsedUrl parsed;
  parsed.scheme = url.substr(0, scheme_end);
  std::string_view rest = std::string_view(url).substr(scheme_end + 3);
  std::string_view query;
  if (const size_t mark = rest.find('?'); mark != std::string_view::npos) {
    query = rest.substr(mark + 1);
    rest = rest.substr(0, mark);
  }
  if (parsed.scheme == "env") {
    if (!rest.empty()) {
      return invalidArgumentError(
          absl::StrFormat("env:// takes its address from MASTER_ADDR and MASTER_PORT, but %s "
                          "names one; use tcp://host:port to give it in the url",
                          url));
    }
  } else if (parsed.scheme == "tcp") {
    std::string_view host;
    std::string_view port;
    if (!rest.empty() && rest.front() == '[') {
      const size_t close = rest.find(']');
      if (close == std::string_view::npos || rest.substr(close + 1, 1) != ":") {
        return invalidArgumentError(
            absl::StrFormat("cannot parse '%s'; write tcp://[ipv6]:port", url));
      }
      host = rest.substr(1, close - 1);
      port = rest.substr(close + 2);
    } else {
      const size_t colon = rest.rfind(':');
      if (colon == std::string_view::npos) {
        return invalidArgumentError(absl::StrFormat("%s has no port; write tcp://host:port", url));
      }
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    if (host.empty()) {
      return invalidArgumentError(absl::StrFormat("%s has no host; write tcp://host:port", url));
    }
    absl::StatusOr<uint16_t> number = parsePort(port, url);
    if (!number.ok()) return number.status();
    parsed.host = std::string(host);
    parsed.port = *number;
  } else if (parsed.scheme == "file") {
    if (rest.empty()) {
      return invalidArgumentError(
          absl::StrFormat("%s has no path; write file:///path/to/shared/file", url));
    }
    parsed.path = std::string(rest);
  } else {
    return invalidArgumentError(
        absl::StrFormat("unsupported init method '%s://'; use env://, tcp://host:port or "
                        "file:///path",
                        parsed.scheme));
  }
  if (absl::Status status = parseQuery(query, url, parsed); !status.ok()) {
    return status;
  }
  return parsed;
}

// Combines the places a value may come from; they must agree.
absl::StatusOr<std::optional<int>> merge(std::string_view name, std::optional<int> first,
                                         std::string_view first_source, std::optional<int> second,
                                         std::string_view second_source) {
  if (first.has_value() && second.has_value() && *first != *second) {
    return invalidArgumentError(
        absl::StrFormat("%s is %d in %s but %d in %s; give it once, or the same in both", av(name),
                        *first, av(first_source), *second, av(second_source)));
  }
  return first.has_value() ? first : second;
}

std::string makeClaim() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device device;
  const uint64_t nonce =
      (static_cast<uint64_t>(device()) << 32) ^ device() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return absl::StrFormat("pid %d on host %s (%016x)", ::getpid(), host, nonce);
}

std::string rankKey(int rank) { return absl::StrCat("rank/", rank); }

// Records that this rank has seen a failed outcome; the rank that serves
// the store waits for every joined rank to get this far before it shuts
// the store down.
void markSeen(Store& store) {
  absl::StatusOr<int64_t> seen = store.add(kSeenKey, 1);
  if (seen.ok()) {
    store.setString(absl::StrCat(kSeenKey, "/", *seen), "").IgnoreError();
  }
}

// Publishes this rank's failure as the outcome, so that every waiting rank
// fails at once with the same cause. If the outcome was already decided,
// that decision stands: "ok" means the rendezvous succeeded after all (the
// last rank arrived just as this one gave up).
absl::Status publish(Store& store, int rank, absl::Status error) {
  const std::string outcome =
      absl::StrCat("error\n", static_cast<int>(error.code()), "\n", rank, "\n", error.message());
  absl::StatusOr<Bytes> decided = store.compareSet(kOutcomeKey, {}, toBytes(outcome));
  if (decided.ok() && toString(*decided) == kOk) return absl::OkStatus();
  markSeen(store);
  return error;
}

// The error of a failure that another rank published.
absl::Status publishedError(absl::string_view outcome) {
  const std::vector<absl::string_view> parts = absl::StrSplit(outcome, absl::MaxSplits('\n', 3));
  int code = 0;
  int rank = -1;
  if (parts.size() != 4 || parts[0] != "error" || !absl::SimpleAtoi(parts[1], &code) ||
      !absl::SimpleAtoi(parts[2], &rank)) {
    return storeError(absl::StrFormat("the rendezvous outcome '%s' is not one this build "
                                      "writes; run every rank from the same build",
                                      absl::CHexEscape(outcome)),
                      absl::StatusCode::kInternal);
  }
  const auto status_code = static_cast<absl::StatusCode>(code);
  return makeError(errorKind(absl::Status(status_code, "failed")), status_code,
                   absl::StrCat("rank ", rank, " reports: ", parts[3]));
}

// The ranks whose claims are missing, for the timeout message.
std::vector<int> missingRanks(Store& store, int world_size) {
  std::vector<int> missing;
  for (int rank = 0; rank < world_size; ++rank) {
    absl::StatusOr<bool> present = store.check({rankKey(rank)});
    if (present.ok() && !*present) missing.push_back(rank);
  }
  return missing;
}

std::string describeRanks(const std::vector<int>& ranks) {
  constexpr size_t kShown = 16;
  std::vector<int> shown(ranks.begin(), ranks.begin() + std::min(ranks.size(), kShown));
  std::string text = absl::StrCat("[", absl::StrJoin(shown, ", "));
  if (ranks.size() > kShown) {
    absl::StrAppend(&text, ", and ", ranks.size() - kShown, " more");
  }
  return absl::StrCat(text, "]");
}

absl::Status joinAndAwaitOutcome(Store& store, const std::string& url, int rank, int world_size,
                                 const Deadline& deadline, absl::Duration timeout) {
  const std::string my_size = absl::StrCat(world_size);
  absl::StatusOr<Bytes> agreed = store.compareSet(kWorldSizeKey, {}, toBytes(my_size));
  if (!agreed.ok()) return agreed.status();
  if (toString(*agreed) != my_size) {
    return publish(
        store, rank,
        storeError(absl::StrFormat("world size mismatch at %s: rank %d was started with "
                                   "world_size %d but the ranks before it use world_size "
                                   "%s; give every rank the same WORLD_SIZE",
                                   url, rank, world_size, toString(*agreed))));
  }
  const std::string claim = makeClaim();
  absl::StatusOr<Bytes> owner = store.compareSet(rankKey(rank), {}, toBytes(claim));
  if (!owner.ok()) return owner.status();
  if (toString(*owner) != claim) {
    return publish(store, rank,
                   storeError(absl::StrFormat("duplicate rank at %s: rank %d is claimed by "
                                              "%s and again by %s; give every process its "
                                              "own RANK in [0, %d)",
                                              url, rank, toString(*owner), claim, world_size),
                              absl::StatusCode::kAlreadyExists));
  }
  absl::StatusOr<int64_t> arrived = store.add(kArrivedKey, 1);
  if (!arrived.ok()) return arrived.status();
  if (*arrived == world_size) {
    absl::StatusOr<Bytes> set = store.compareSet(kOutcomeKey, {}, toBytes(std::string(kOk)));
    if (!set.ok()) return set.status();
  }
  absl::Status waited = store.wait({kOutcomeKey}, deadline.remaining());
  if (errorKind(waited) == ErrorKind::kTimeout) {
    return publish(store, rank,
                   timeoutError(absl::StrFormat(
                       "rendezvous at %s timed out after %s: rank(s) %s of world_size %d "
                       "never arrived; start them with the same init method and world "
                       "size, or raise the timeout",
                       url, absl::FormatDuration(timeout),
                       describeRanks(missingRanks(store, world_size)), world_size)));
  }
  if (!waited.ok()) return waited;
  absl::StatusOr<Bytes> outcome = store.get(kOutcomeKey);
  if (!outcome.ok()) return outcome.status();
  const std::string text = toString(*outcome);
  if (text == kOk) return absl::OkStatus();
  markSeen(store);
  return publishedError(text);
}

// Runs the protocol. When it fails and this rank keeps the store alive
// (rank 0 serves it for tcp:// and env://; for file:// the last rank to
// close removes the file), the store stays up until every rank has seen the
// failure, or until shortly after the deadline. Taking it down at once
// would leave a late rank with "connection refused", or a fresh empty file,
// instead of the cause.
absl::Status runProtocol(Store& store, const std::string& url, int rank, int world_size,
                         const Deadline& deadline, absl::Duration timeout, bool keeps_store_alive) {
  absl::Status status = joinAndAwaitOutcome(store, url, rank, world_size, deadline, timeout);
  if (!status.ok() && keeps_store_alive) {
    // Before the deadline, ranks yet to come should learn the cause too;
    // after it, only those already waiting for the outcome.
    int64_t ranks_to_tell = world_size;
    absl::Duration linger = deadline.remaining();
    if (deadline.expired()) {
      absl::StatusOr<int64_t> waiting = store.add(kArrivedKey, 0);
      if (waiting.ok()) ranks_to_tell = *waiting;
      linger = kLingerGrace;
    }
    store.wait({absl::StrCat(kSeenKey, "/", ranks_to_tell)}, linger).IgnoreError();
  }
  return status;
}

}  // namespace

absl::StatusOr<RendezvousResult> rendezvous(const std::string& url,
                                            const RendezvousOptions& options) {
  const Deadline deadline = Deadline::after(options.timeout);
  const auto getenv = [&](const std::string& name) -> std::optional<std::string> {
    if (options.getenv) return options.getenv(name);
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  absl::StatusOr<ParsedUrl> parsed = parseUrl(url);
  if (!parsed.ok()) return parsed.status();

  std::optional<int> env_rank;
  std::optional<int> env_world_size;
  RendezvousResult result;
  if (parsed->scheme == "env") {
    const std::optional<std::string> addr = getenv("MASTER_ADDR");
    const std::optional<std::string> port = getenv("MASTER_PORT");
    if (!addr.has_value() || addr->empty()) {
      return invalidArgumentError(
          "env:// rendezvous needs MASTER_ADDR (the host of rank 0); set it, "
          "as torchrun does, or use tcp://host:port");
    }
    if (!port.has_value()) {
      return invalidArgumentError(
          "env:// rendezvous needs MASTER_PORT (the store port on rank 0); set "
          "it, as torchrun does, or use tcp://host:port");
    }
    absl::StatusOr<uint16_t> port_number = parsePort(*port, "environment variable MASTER_PORT");
    if (!port_number.ok()) return port_number.status();
    parsed->host = *addr;
    parsed->port = *port_number;
    for (const auto& [name, target] :
         {std::pair<const char*, std::optional<int>*>{"RANK", &env_rank},
          {"WORLD_SIZE", &env_world_size},
          {"LOCAL_RANK", &result.local_rank}}) {
      if (const std::optional<std::string> value = getenv(name)) {
        absl::StatusOr<int> number = parseInt(name, *value, "the environment");
        if (!number.ok()) return number.status();
        *target = *number;
      }
    }
  }
  absl::StatusOr<std::optional<int>> rank =
      merge("rank", parsed->rank, "the url", options.rank, "the options");
  if (!rank.ok()) return rank.status();
  absl::StatusOr<std::optional<int>> world_size =
      merge("world_size", parsed->world_size, "the url", options.world_size, "the options");
  if (!world_size.ok()) return world_size.status();
  if (parsed->scheme == "env") {
    rank = merge("rank", *rank, "the url or options", env_rank, "RANK");
    if (!rank.ok()) return rank.status();
    world_size =
        merge("world_size", *world_size, "the url or options", env_world_size, "WORLD_SIZE");
    if (!world_size.ok()) return world_size.status();
  }
  const std::string where = parsed->scheme == "env" ? "set RANK and WORLD_SIZE, as torchrun does"
                                                    : "add ?rank=R&world_size=N to the url";
  if (!world_size->has_value()) {
    return invalidArgumentError(
        absl::StrFormat("%s:// rendezvous needs the world size; %s or pass it in the options",
                        parsed->scheme, where));
  }
  if (!rank->has_value()) {
    return invalidArgumentError(
        absl::StrFormat("%s:// rendezvous needs this process's rank; %s or pass it in the "
                        "options",
                        parsed->scheme, where));
  }
  result.rank = **rank;
  result.world_size = **world_size;
  if (result.world_size < 1) {
    return invalidArgumentError(
        absl::StrFormat("world_size is %d; it must be at least 1", result.world_size));
  }
  if (result.rank < 0 || result.rank >= result.world_size) {
    return invalidArgumentError(absl::StrFormat("rank %d is outside [0, %d) for world_size %d",
                                                result.rank, result.world_size, result.world_size));
  }
  if (result.local_rank.has_value() && *result.local_rank < 0) {
    return invalidArgumentError(
        absl::StrFormat("LOCAL_RANK is %d; it must be at least 0", *result.local_rank));
  }

  if (parsed->scheme == "file") {
    absl::StatusOr<std::unique_ptr<FileStore>> store =
        FileStore::open(parsed->path, options.timeout);
    if (!store.ok()) return store.status();
    result.store = std::move(*store);
  } else {
    TCPStoreOptions store_options;
    store_options.host = parsed->host;
    store_options.port = parsed->port;
    store_options.is_server = result.rank == 0;
    store_options.timeout = options.timeout;
    store_options.token = options.token;
    if (store_options.token.empty()) {
      store_options.token = getenv("LOOM_STORE_TOKEN").value_or("");
    }
    absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(store_options);
    if (!store.ok()) {
      if (result.rank == 0 && errorKind(store.status()) == ErrorKind::kNetwork) {
        return networkError(
            absl::StrFormat("rank 0 cannot serve the store for %s: %s; is another job, or a "
                            "second rank 0, using that port?",
                            url, store.status().message()));
      }
      return store.status();
    }
    result.store = std::move(*store);
  }

  PrefixStore protocol_store(kRendezvousPrefix, result.store);
  if (absl::Status status = runProtocol(
          protocol_store, url, result.rank, result.world_size, deadline, options.timeout,
          /*keeps_store_alive=*/parsed->scheme == "file" || result.rank == 0);
      !status.ok()) {
    return status;
  }
  return result;
}

}  // namespace loom::comm
