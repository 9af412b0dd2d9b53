#include "common/url_host.h"

#include <libpsl.h>
#include <uriparser/Uri.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace tributary {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The list libpsl was built with (Debian builds it with the list of the
// day); the system's newer copy (publicsuffix package) when it can be
// read. Loaded once, read-only afterwards, so safe from any thread.
const psl_ctx_t* suffix_list() {
  static const psl_ctx_t* ctx = [] {
    const psl_ctx_t* latest = psl_latest(nullptr);
    return latest ? latest : psl_builtin();
  }();
  return ctx;
}

} // namespace

std::string url_host(std::string_view url) {
  const std::string u(url);
  UriUriA parsed;
  const char* error_pos = nullptr;
  if (uriParseSingleUriA(&parsed, u.c_str(), &error_pos) != URI_SUCCESS) {
    return {};
  }
  std::string host;
  if (parsed.hostText.first != nullptr && parsed.hostText.afterLast != nullptr) {
    host.assign(parsed.hostText.first, parsed.hostText.afterLast);
  }
  uriFreeUriMembersA(&parsed);
  return lower(std::move(host));
}

std::string registrable_domain(std::string_view host_in) {
  std::string host = lower(std::string(host_in));
  while (!host.empty() && host.back() == '.') {
    host.pop_back();
  }
  if (host.empty() || is_ip_literal(host) || host.find('.') == std::string::npos) {
    return host;
  }
  const psl_ctx_t* ctx = suffix_list();
  if (ctx == nullptr) {
    return host;
  }
  const char* domain = psl_registrable_domain(ctx, host.c_str());
  return domain != nullptr ? std::string(domain) : host;
}

} // namespace tributary
