#pragma once

#include "sync_engine/fetcher.h"
#include "sync_engine/source_config.h"

#include <chrono>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tributary::sync {

// Which URLs a source's documents may make us fetch: http(s) (file: only for
// a source configured with a file: URL), from the configured hosts or
// allow_hosts. Content may also come from an entry's duplicate hosts (see
// RunContext::host_allowed).
struct HostRules {
  std::set<std::string> configured; // hosts of the source URL and its mirrors, lower-case
  std::set<std::string> allowed;    // allow_hosts, lower-case
  bool file_source = false;

  // The scheme rule alone: http and https, file for a file source.
  bool scheme_allowed(const Url& u, std::string& why) const;
  // The scheme rule and a configured or allowed host.
  bool document_allowed(const Url& u, std::string& why) const;
};

// The fetcher one source uses. It
// - fails over between the source's endpoints: URLs under the configured
//   URL's base are served by the highest-priority endpoint that works
//   (the configured URL first, then `mirrors` by pri); an endpoint that fails
//   with a transient error or a 5xx is skipped for a while;
// - adds the source's credentials, to its own endpoints' hosts only (a
//   token never travels to a mirror named in a document);
// - sets the source's timeout, TLS verification, body limit and request rate.
class EndpointFetcher : public Fetcher {
public:
  // Reads the auth secret now; fails (permanent) if it cannot.
  static Result<std::shared_ptr<EndpointFetcher>> create(std::shared_ptr<Fetcher> inner, const SourceConfig& source);

  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options, const BodySink& sink) override;

  // The options every request of this source starts from.
  FetchOptions base_options() const;
  // Whether `url`'s origin is one of the source's endpoints.
  bool is_own_host(const std::string& url) const;
  const HostRules& host_rules() const { return *m_rules; }
  // The headers fetch() would send with a GET of `url` when it goes to
  // `url` itself (the source's credentials on its own hosts); none when
  // fetch() would fail over between endpoints for it.
  std::optional<std::map<std::string, std::string>> direct_headers(const std::string& url,
                                                                   const FetchOptions& options) const;

private:
  struct Endpoint {
    std::string base; // scheme://host[:port]/path-prefix/
    uint32_t pri = 0;
    std::chrono::steady_clock::time_point down_until{};
  };
  EndpointFetcher(std::shared_ptr<Fetcher> inner, const SourceConfig& source);

  std::shared_ptr<Fetcher> m_inner;
  FetchOptions m_base;
  std::string m_auth_header; // "Authorization" value, never logged
  std::vector<Endpoint> m_endpoints;
  std::shared_ptr<const HostRules> m_rules; // shared with m_base.allow_url
  mutable std::mutex m_mutex; // guards down_until
};

} // namespace tributary::sync
