#include "common/url_host.h"

#include <idn2.h>
#include <libpsl.h>
#include <uriparser/Uri.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

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

std::string canonical_host(std::string_view host_in) {
  std::string host;
  for (size_t i = 0; i < host_in.size(); ++i) { // percent-escapes, as RFC 3986 allows in a reg-name
    if (host_in[i] == '%' && i + 2 < host_in.size() && std::isxdigit(static_cast<unsigned char>(host_in[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(host_in[i + 2]))) {
      host += static_cast<char>(std::stoi(std::string(host_in.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      host += host_in[i];
    }
  }
  host = lower(std::move(host));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  while (!host.empty() && host.back() == '.') {
    host.pop_back();
  }
  if (host.empty()) {
    return host;
  }
  char text[INET6_ADDRSTRLEN];
  if (host.find(':') != std::string::npos) {
    in6_addr a6{};
    if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
      if (IN6_IS_ADDR_V4MAPPED(&a6)) {
        in_addr a4{};
        std::memcpy(&a4, a6.s6_addr + 12, 4);
        return inet_ntop(AF_INET, &a4, text, sizeof text);
      }
      return inet_ntop(AF_INET6, &a6, text, sizeof text);
    }
    return host;
  }
  // An IPv4 address in any of the forms a resolver accepts: digits, dots
  // and hex only, then inet_aton (decimal, octal, hex; 1 to 4 parts).
  if (host.find_first_not_of("0123456789abcdefx.") == std::string::npos) {
    in_addr a4{};
    if (inet_aton(host.c_str(), &a4) == 1) {
      return inet_ntop(AF_INET, &a4, text, sizeof text);
    }
  }
  char* ascii = nullptr;
  if (idn2_to_ascii_8z(host.c_str(), &ascii, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL) == IDN2_OK && ascii) {
    std::string out = lower(ascii);
    idn2_free(ascii);
    return out;
  }
  idn2_free(ascii);
  return host;
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
