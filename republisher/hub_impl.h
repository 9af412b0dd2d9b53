#pragma once

// Hub::Impl: the hub's state, shared by its subscription requests
// (hub_subscriptions.cpp), its deliveries (hub_delivery.cpp) and its public
// side (hub.cpp). Not for use outside republisher/.

#include "republisher/hub.h"

#include "common/log.h"
#include "common/url_host.h"
#include "resourcesync/websub.h"
#include "resourcesync/writer.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

namespace tributary::pub {

namespace hub_detail {

// `text` with `callback` (whose path may hold the subscriber's only
// credential) shown as its label: what the log and the status API say.
// However the text spells the callback's origin (the fetcher's errors drop
// an explicit default port, lower-case the host), its path and query, and
// any userinfo, are replaced wherever they appear.
inline std::string scrubbed(std::string text, const std::string& callback) {
  if (callback.empty()) {
    return text;
  }
  auto replace_all = [&text](const std::string& what, const std::string& with) {
    if (what.size() < 2) {
      return;
    }
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size())) {
      text.replace(at, what.size(), with);
    }
  };
  const std::string label = rs::websub::callback_label(callback);
  replace_all(callback, label);
  if (const size_t scheme = callback.find("://"); scheme != std::string::npos) {
    const size_t rest = callback.find_first_of("/?#", scheme + 3);
    const std::string authority = callback.substr(scheme + 3, rest == std::string::npos ? std::string::npos
                                                                                        : rest - scheme - 3);
    if (const size_t at = authority.rfind('@'); at != std::string::npos) {
      replace_all(authority.substr(0, at + 1), ""); // user:password@
    }
    if (rest != std::string::npos) {
      replace_all(callback.substr(rest), label.substr(label.rfind(" #")));
    }
  }
  return text;
}

} // namespace hub_detail

namespace hub_detail {

using Clock = std::chrono::system_clock;

inline rs::Timestamp at(Clock::time_point t) { return std::chrono::time_point_cast<std::chrono::microseconds>(t); }

inline bool http_url(const std::string& u) {
  return (u.rfind("http://", 0) == 0 && u.size() > 7) || (u.rfind("https://", 0) == 0 && u.size() > 8);
}

inline void answer(http::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_body(text + "\n", "text/plain; charset=utf-8");
}

// What a subscription request asks for, checked.
struct Intent {
  std::string mode; // "subscribe" or "unsubscribe"
  std::string topic;
  std::string set;
  std::string callback;
  std::string secret;
  std::chrono::seconds lease{0};
  std::string client;        // who asked (its address)
  std::string callback_host; // the callback's host, lower-cased
  std::string callback_domain; // its registrable domain
};

// The host of a callback URL in its one spelling (canonical_host: an
// address however written, a name through IDNA), so that every quota,
// cap, limit and pool keyed on it counts a host once ("" when none).
inline std::string host_of(const std::string& url) {
  return canonical_host(url_host(url));
}

} // namespace hub_detail

// The names of hub_detail the class below uses.
using hub_detail::Intent;

struct Hub::Impl {
  std::shared_ptr<store::PushStore> store;
  std::shared_ptr<store::StoreReader> reader;
  UrlScheme urls;
  HubTransport transport;
  HubOptions options;

  std::mutex mutex;
  // Held from a verified subscription's quota checks to its write: the
  // verifiers run on several threads, and two callbacks on different hosts
  // of one domain, verified at once, each counted the other's domain short
  // of its quota (a fourth subscription under a quota of three, in CI).
  std::mutex admit_mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool started = false;
  std::map<std::string, PublishedSet> sets; // name -> set, as last published
  std::map<std::string, int64_t> shown_seq; // name -> seq its Change List shows
  // Verifications: intents waiting per callback host; the hosts whose turn
  // may come (waiting intents, none under way), in order; and what each
  // client and host has waiting or under way.
  std::map<std::string, std::deque<Intent>> waiting;
  std::deque<std::string> turns;
  std::set<std::string> verifying_hosts;
  std::map<std::string, size_t> pending_by_client;
  std::map<std::string, size_t> pending_by_host;
  size_t pending = 0;
  std::set<std::pair<std::string, std::string>> in_flight; // (topic, callback)
  std::deque<store::HubSubscription> due;      // for the delivery workers
  std::deque<store::HubSubscription> due_slow; // for the slow pool: hosts whose last delivery was slow
  std::map<std::string, size_t> delivering;    // callback host -> deliveries under way or due
  std::set<std::string> slow_hosts;            // their last delivery took longer than slow_delivery
  bool leading = false;
  std::vector<std::thread> threads;
  std::set<std::string> external_known; // sets whose topic the external hub follows (scheduler only)
  std::vector<store::FrameworkEvent> framework_pending; // under mutex: for the scheduler to record
  int64_t framework_seq = 0;                           // under mutex: the newest recorded
  std::chrono::steady_clock::time_point framework_expired{};

  Impl(std::shared_ptr<store::PushStore> s, std::shared_ptr<store::StoreReader> r, UrlScheme u, HubTransport t,
       HubOptions o)
      : store(std::move(s)), reader(std::move(r)), urls(std::move(u)), transport(std::move(t)), options(o) {}

  // ---- subscription requests -------------------------------------------------

  // The request's intent, or the reason it is refused (a 4xx).
  std::variant<Intent, std::string> parse(const http::Request& req);

  static bool renews(const std::vector<store::HubSubscription>& existing, const Intent& i);

  static size_t on_host(const std::vector<store::HubSubscription>& existing, const std::string& host);
  static size_t on_domain(const std::vector<store::HubSubscription>& existing, const std::string& domain);
  // How many subscriptions have a callback on a host that resolves to one
  // of `host`'s addresses (none known: 0).
  size_t on_addresses(const std::vector<store::HubSubscription>& existing, const std::string& host);
  std::vector<std::string> addresses_of(const std::string& host);
  std::mutex resolved_mutex;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::vector<std::string>>> resolved;

  void subscription_request(const http::Request& req, http::Response& res);

  // WebSub 5.3: the hub asks the callback whether it meant it; only an
  // answer of 2xx carrying the challenge, unchanged, confirms.
  void verify(const Intent& i);

  // Takes the intent of the host whose turn it is; that host has no other
  // verification under way until this one ends.
  void verifier();

  // ---- deliveries ---------------------------------------------------------

  // The notification body: the changes as our Change List shows them.
  std::string payload(const PublishedSet& set, const std::vector<store::LoggedChange>& changes);

  std::string hub_url() const { return options.external_hub.empty() ? urls.hub() : options.external_hub; }

  // With an external hub: each published set's topic has it as a
  // subscriber (added once; its cursor then moves like any other's).
  void publish_to_external(const std::vector<std::pair<std::string, int64_t>>& missing);

  std::chrono::seconds backoff(int failures);

  // POSTs a notification; records what came of it. True when delivered.
  void post_notification(const store::HubSubscription& s, std::string body, int64_t last, bool full);

  // A framework channel's events after the cursor, as one notification.
  void deliver_framework(const store::HubSubscription& s, const std::string& set, int64_t upto);

  void deliver(const store::HubSubscription& s);

  // Picks what is due; the workers deliver it.
  void scheduler();

  // A delivery worker: of the prompt pool (`due`) or the slow one.
  void worker(bool slow);
};

} // namespace tributary::pub
