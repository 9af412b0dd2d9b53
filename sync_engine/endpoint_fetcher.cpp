#include "sync_engine/endpoint_fetcher.h"

#include "sync_engine/net_policy.h"

#include "common/text.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

namespace tributary::sync {

namespace {

constexpr auto k_down_for = std::chrono::seconds(60);

// The directory part of a URL: "https://h/a/b.xml" -> "https://h/a/".
std::string base_of(const std::string& url) {
  auto u = parse_url(url);
  if (!u) {
    return url;
  }
  std::string path = u->target.substr(0, u->target.find('?'));
  return u->origin() + path.substr(0, path.rfind('/') + 1);
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

} // namespace

bool HostRules::scheme_allowed(const Url& u, std::string& why) const {
  if (u.scheme == "file") {
    if (file_source) {
      return true;
    }
    why = "file URLs are only fetched for file sources";
    return false;
  }
  if (u.scheme != "http" && u.scheme != "https") {
    why = "only http and https URLs are fetched";
    return false;
  }
  return true;
}

bool HostRules::document_allowed(const Url& u, std::string& why) const {
  if (!scheme_allowed(u, why)) {
    return false;
  }
  if (u.scheme == "file" || configured.count(u.host) > 0 || allowed.count(u.host) > 0) {
    return true;
  }
  why = "host " + u.host + " is not the source's and not in allow_hosts";
  return false;
}

EndpointFetcher::EndpointFetcher(std::shared_ptr<Fetcher> inner, const SourceConfig& source)
    : m_inner(std::move(inner)) {
  m_base.connect_timeout = std::min(source.timeout, std::chrono::milliseconds(10000));
  m_base.read_timeout = source.timeout;
  m_base.verify_tls = source.verify_tls;
  m_base.max_body_bytes = source.max_body_bytes;
  m_base.requests_per_second = source.max_requests_per_second;
  m_base.max_connections = source.concurrency;
  m_base.min_bytes_per_second = source.min_bytes_per_second;
  m_base.rate_window = source.rate_window;
  m_endpoints.push_back(Endpoint{base_of(source.url), 0, {}});
  std::vector<MirrorEndpoint> mirrors = source.mirrors;
  std::stable_sort(mirrors.begin(), mirrors.end(),
                   [](const MirrorEndpoint& a, const MirrorEndpoint& b) { return a.pri < b.pri; });
  for (const auto& m : mirrors) {
    m_endpoints.push_back(Endpoint{base_of(m.url), m.pri, {}});
  }
  // What documents may name (HostRules), and, whoever names it, no
  // address outside the public Internet unless the configuration put the
  // source there or allow_hosts names it.
  auto rules = std::make_shared<HostRules>();
  std::set<std::string> permitted;
  auto resolve_into_permitted = [&](const std::string& host) {
    for (auto& a : resolve_host(host)) {
      permitted.insert(std::move(a));
    }
  };
  for (const auto& e : m_endpoints) {
    if (auto u = parse_url(e.base); u && !u->host.empty()) {
      rules->configured.insert(u->host);
      resolve_into_permitted(u->host);
    }
  }
  for (const auto& h : source.allow_hosts) {
    rules->allowed.insert(to_lower(h));
    resolve_into_permitted(h);
  }
  rules->file_source = source.url.rfind("file:", 0) == 0;
  m_rules = rules;
  m_base.addresses = std::make_shared<const AddressPolicy>(std::move(permitted));
  m_base.allow_url = [rules = m_rules](const Url& u, std::string& why) { return rules->document_allowed(u, why); };
}

Result<std::shared_ptr<EndpointFetcher>> EndpointFetcher::create(std::shared_ptr<Fetcher> inner,
                                                                  const SourceConfig& source) {
  auto f = std::shared_ptr<EndpointFetcher>(new EndpointFetcher(std::move(inner), source));
  if (source.auth.type != AuthConfig::Type::none) {
    auto secret = read_secret(source.auth.secret, "source '" + source.name + "'");
    if (!secret) {
      return tl::unexpected(secret.error());
    }
    f->m_auth_header = source.auth.type == AuthConfig::Type::bearer
                           ? "Bearer " + *secret
                           : "Basic " + base64(source.auth.username + ":" + *secret);
  }
  return f;
}

FetchOptions EndpointFetcher::base_options() const { return m_base; }

bool EndpointFetcher::is_own_host(const std::string& url) const {
  auto u = parse_url(url);
  if (!u) {
    return false;
  }
  for (const auto& e : m_endpoints) {
    auto b = parse_url(e.base);
    if (b && b->origin() == u->origin()) {
      return true;
    }
  }
  return false;
}

std::optional<std::map<std::string, std::string>> EndpointFetcher::direct_headers(const std::string& url,
                                                                                 const FetchOptions& options) const {
  const std::string& primary = m_endpoints[0].base;
  if (m_endpoints.size() > 1 && url.compare(0, primary.size(), primary) == 0) {
    return std::nullopt;
  }
  auto headers = options.headers;
  if (!m_auth_header.empty() && is_own_host(url)) {
    headers["Authorization"] = m_auth_header;
  }
  return headers;
}

Result<FetchResponse> EndpointFetcher::fetch(const std::string& url, const FetchOptions& options,
                                             const BodySink& sink) {
  FetchOptions o = options;
  const std::string& primary = m_endpoints[0].base;
  const bool under_base = url.compare(0, primary.size(), primary) == 0;
  if (!under_base || m_endpoints.size() == 1) {
    if (!m_auth_header.empty() && is_own_host(url)) {
      o.headers["Authorization"] = m_auth_header;
    }
    return m_inner->fetch(url, o, sink);
  }
  // Try endpoints in priority order, those that failed recently last.
  const std::string suffix = url.substr(primary.size());
  std::vector<size_t> order;
  {
    std::lock_guard lock(m_mutex);
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < m_endpoints.size(); ++i) {
      if (m_endpoints[i].down_until <= now) {
        order.push_back(i);
      }
    }
    for (size_t i = 0; i < m_endpoints.size(); ++i) {
      if (m_endpoints[i].down_until > now) {
        order.push_back(i);
      }
    }
  }
  Result<FetchResponse> last = make_error(ErrorKind::transient, "GET " + url + ": no endpoint");
  for (size_t i : order) {
    const std::string target = m_endpoints[i].base + suffix;
    FetchOptions oi = o;
    if (!m_auth_header.empty()) {
      oi.headers["Authorization"] = m_auth_header;
    }
    bool delivered = false;
    last = m_inner->fetch(target, oi, [&](const char* d, size_t n) {
      delivered = true;
      return sink(d, n);
    });
    const bool endpoint_failed =
        (!last && last.error().kind == ErrorKind::transient) || (last && last->status >= 500);
    if (!endpoint_failed) {
      return last;
    }
    {
      std::lock_guard lock(m_mutex);
      m_endpoints[i].down_until = std::chrono::steady_clock::now() + k_down_for;
    }
    if (delivered && !(o.restart && o.restart())) {
      return last;
    }
  }
  return last;
}

} // namespace tributary::sync
