#include "sync_engine/fetcher.h"

#include "sync_engine/fetch_error_text.h"

#include "sync_engine/fetcher_impl.h"

#include "common/text.h"

#include <charconv>
#include <unordered_map>

namespace tributary::sync {

namespace {

int default_port(std::string_view scheme) {
  if (scheme == "http") {
    return 80;
  }
  if (scheme == "https") {
    return 443;
  }
  return 0;
}

// Dispatch table: scheme -> fetcher.
class SchemeFetcher : public Fetcher {
public:
  SchemeFetcher() {
    std::shared_ptr<Fetcher> http = make_http_fetcher();
    m_by_scheme["http"] = http;
    m_by_scheme["https"] = http;
    m_by_scheme["file"] = make_file_fetcher();
  }

  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options,
                              const BodySink& sink) override {
    auto parsed = parse_url(url);
    if (!parsed) {
      return tl::unexpected(parsed.error());
    }
    if (std::string why; options.allow_url && !options.allow_url(*parsed, why)) {
      return make_error(ErrorKind::permanent, "refused: " + why + " (" + url + ")");
    }
    auto it = m_by_scheme.find(parsed->scheme);
    if (it == m_by_scheme.end()) {
      return make_error(ErrorKind::usage, "cannot fetch '" + url + "': scheme '" + parsed->scheme +
                                              "' is not supported (http, https, file)");
    }
    return it->second->fetch(url, options, sink);
  }

private:
  std::unordered_map<std::string, std::shared_ptr<Fetcher>> m_by_scheme;
};

} // namespace

std::string Url::origin() const {
  if (scheme == "file") {
    return "file://";
  }
  std::string out;
  out.reserve(scheme.size() + 3 + host.size() + 6); // one allocation: asked once a resource fetched
  out += scheme;
  out += "://";
  out += host;
  if (port != default_port(scheme)) {
    out += ':';
    out += std::to_string(port);
  }
  return out;
}

Result<Url> parse_url(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::usage, "'" + std::string(text) + "' is not a usable URL: " + why);
  };
  size_t colon = text.find("://");
  if (colon == std::string_view::npos || colon == 0) {
    return bad("expected scheme://");
  }
  Url u;
  u.scheme = to_lower(text.substr(0, colon));
  std::string_view rest = text.substr(colon + 3);
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view target = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
  if (size_t hash = target.find('#'); hash != std::string_view::npos) {
    target = target.substr(0, hash);
  }
  u.target = target.empty() || target[0] != '/' ? "/" + std::string(target) : std::string(target);
  if (u.scheme == "file") {
    if (!authority.empty() && authority != "localhost") {
      return bad("file URLs must not name a host");
    }
    return u;
  }
  if (authority.find('@') != std::string_view::npos) {
    return bad("credentials in URLs are not accepted; configure them per source");
  }
  u.port = default_port(u.scheme);
  std::string_view host = authority;
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return bad("unterminated IPv6 address");
    }
    std::string_view after = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return bad("junk after IPv6 address");
      }
      authority = after; // ":port"
    } else {
      authority = {};
    }
    u.host = to_lower(host);
    if (!authority.empty()) {
      std::string_view p = authority.substr(1);
      auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), u.port);
      if (ec != std::errc() || ptr != p.data() + p.size() || u.port <= 0 || u.port > 65535) {
        return bad("bad port");
      }
    }
  } else {
    size_t pc = host.rfind(':');
    if (pc != std::string_view::npos) {
      std::string_view p = host.substr(pc + 1);
      host = host.substr(0, pc);
      auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), u.port);
      if (ec != std::errc() || ptr != p.data() + p.size() || u.port <= 0 || u.port > 65535) {
        return bad("bad port");
      }
    }
    u.host = to_lower(host);
  }
  if (u.host.empty()) {
    return bad("no host");
  }
  return u;
}

std::string resolve_redirect(const Url& base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) {
    return std::string(location);
  }
  if (location.substr(0, 2) == "//") {
    return base.scheme + ":" + std::string(location);
  }
  if (!location.empty() && location[0] == '/') {
    return base.origin() + std::string(location);
  }
  std::string dir = base.target.substr(0, base.target.find('?'));
  dir = dir.substr(0, dir.rfind('/') + 1);
  return base.origin() + dir + std::string(location);
}

std::unique_ptr<Fetcher> make_default_fetcher() { return std::make_unique<SchemeFetcher>(); }

Error status_error(const std::string& url, int status) {
  const ErrorKind kind = status == 404 || status == 410     ? ErrorKind::not_found
                         : status >= 500 || status == 429 ? ErrorKind::transient
                                                          : ErrorKind::permanent;
  return Error{kind, http_status_words(status, url)};
}

} // namespace tributary::sync
