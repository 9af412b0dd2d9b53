#include "sync_engine/net_policy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>

namespace tributary::sync {

namespace {

// IPv4 ranges that are not the public Internet (RFC 6890 and friends).
std::string special_v4(uint32_t a) {
  auto in = [a](uint32_t net, int bits) {
    const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
    return (a & mask) == net;
  };
  if (in(0x7f000000, 8)) return "loopback";
  if (in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16)) return "private";
  if (in(0xa9fe0000, 16)) return "link-local";
  if (in(0x64400000, 10)) return "carrier-grade NAT";
  if (in(0x00000000, 8)) return "'this network'";
  if (in(0xe0000000, 4)) return "multicast";
  if (in(0xf0000000, 4)) return "reserved"; // includes 255.255.255.255
  if (in(0xc0000000, 24) || in(0xc0000200, 24) || in(0xc6336400, 24) || in(0xcb007100, 24) ||
      in(0xc6120000, 15)) {
    return "reserved for documentation or benchmarks";
  }
  return {};
}

} // namespace

AddressPolicy::AddressPolicy(std::set<std::string> permitted) : m_permitted(std::move(permitted)) {
  static std::atomic<uint64_t> next{1};
  m_id = next++;
}

std::string AddressPolicy::numeric(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

std::string AddressPolicy::special_range(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return special_v4(ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr));
  }
  if (addr->sa_family != AF_INET6) {
    return "not an Internet address";
  }
  const auto& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
  const uint8_t* b = a6.s6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6) || IN6_IS_ADDR_V4COMPAT(&a6)) {
    const uint32_t v4 = (uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8) | b[15];
    if (IN6_IS_ADDR_V4COMPAT(&a6) && v4 <= 1) {
      return v4 == 1 ? "loopback" : "unspecified";
    }
    return special_v4(v4);
  }
  if (IN6_IS_ADDR_LOOPBACK(&a6)) return "loopback";
  if (IN6_IS_ADDR_UNSPECIFIED(&a6)) return "unspecified";
  if ((b[0] & 0xfe) == 0xfc) return "private"; // fc00::/7
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "site-local";
  if (b[0] == 0xff) return "multicast";
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
    // NAT64 (64:ff9b::/96): judged by the IPv4 address inside.
    return special_v4((uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8) | b[15]);
  }
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return "reserved for documentation";
  return {};
}

bool AddressPolicy::allows(const sockaddr* addr, std::string& why) const {
  const std::string range = special_range(addr);
  if (range.empty()) {
    return true;
  }
  const std::string text = numeric(addr);
  if (m_permitted.count(text)) {
    return true;
  }
  why = text + " is a " + range + " address (refused unless the source's own URL is there or allow_hosts names it)";
  return false;
}

std::string bare_host(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

namespace {

// Calls `each` with every address `host` resolves to, in the resolver's
// order, until it returns false; the getaddrinfo error code (0: resolved).
int lookup(const std::string& host, const std::function<bool(const sockaddr*)>& each) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(bare_host(host).c_str(), nullptr, &hints, &res); rc != 0) {
    return rc;
  }
  for (addrinfo* p = res; p && each(p->ai_addr); p = p->ai_next) {
  }
  freeaddrinfo(res);
  return 0;
}

} // namespace

PickedAddress pick_address(const std::string& host, const AddressPolicy& policy) {
  PickedAddress out;
  const int rc = lookup(host, [&](const sockaddr* a) {
    std::string why;
    if (policy.allows(a, why)) {
      out.address = AddressPolicy::numeric(a);
      out.error.clear();
      return false;
    }
    if (out.error.empty()) {
      out.error = "host " + bare_host(host) + " resolves to " + why;
    }
    return true;
  });
  if (rc != 0) {
    out.resolved = false;
    out.error = "cannot resolve host " + bare_host(host) + ": " + gai_strerror(rc);
  }
  return out;
}

std::vector<std::string> resolve_host(const std::string& host) {
  std::vector<std::string> out;
  lookup(host, [&](const sockaddr* a) {
    std::string text = AddressPolicy::numeric(a);
    if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) {
      out.push_back(std::move(text));
    }
    return true;
  });
  return out;
}

} // namespace tributary::sync
