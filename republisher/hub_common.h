#pragma once

// Room republisher/hub_common: what the hub's parts (its public side,
// hub.cpp; its subscription requests, hub_subscriptions.*; its deliveries,
// hub_delivery.*) say alike: a callback scrubbed from a text, the hub's
// clock, a plain answer, a callback's host. Free functions only; not for use
// outside republisher/.

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


using Clock = std::chrono::system_clock;

inline rs::Timestamp at(Clock::time_point t) { return std::chrono::time_point_cast<std::chrono::microseconds>(t); }

inline bool http_url(const std::string& u) {
  return (u.rfind("http://", 0) == 0 && u.size() > 7) || (u.rfind("https://", 0) == 0 && u.size() > 8);
}

inline void answer(http::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_body(text + "\n", "text/plain; charset=utf-8");
}

// The host of a callback URL in its one spelling (canonical_host: an
// address however written, a name through IDNA), so that every quota,
// cap, limit and pool keyed on it counts a host once ("" when none).
inline std::string host_of(const std::string& url) {
  return canonical_host(url_host(url));
}

// The hub subscribers are sent to: ours, or the external one.
inline std::string hub_url(const UrlScheme& urls, const HubOptions& options) {
  return options.external_hub.empty() ? urls.hub() : options.external_hub;
}

} // namespace hub_detail

} // namespace tributary::pub
