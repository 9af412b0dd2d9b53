#include "common/http/client_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace tributary::http {

namespace {

// An address as 16 bytes (IPv4 mapped into IPv6); false when it is none.
bool to_bytes(std::string_view text, std::array<uint8_t, 16>& out) {
  std::string s(text);
  if (s.size() > 2 && s.front() == '[' && s.back() == ']') {
    s = s.substr(1, s.size() - 2);
  }
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) {
    out.fill(0);
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, &a4, 4);
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    std::memcpy(out.data(), a6.s6_addr, 16);
    return true;
  }
  return false;
}

bool v4_mapped(const std::array<uint8_t, 16>& b) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(b.data(), prefix, 12) == 0;
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// The node of a `for=` value or an X-Forwarded-For entry, without quotes,
// brackets or port: "192.0.2.60", "\"[2001:db8::1]:4711\"" -> "2001:db8::1".
std::string node_address(std::string v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    v = v.substr(1, v.size() - 2);
  }
  if (!v.empty() && v.front() == '[') {
    const size_t close = v.find(']');
    return close == std::string::npos ? std::string() : v.substr(1, close - 1);
  }
  if (std::count(v.begin(), v.end(), ':') == 1) {
    v = v.substr(0, v.find(':')); // IPv4 with a port
  }
  return v;
}

// The `for=` nodes of a Forwarded header, in order (client first).
std::vector<std::string> forwarded_for(const std::string& header) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= header.size()) {
    size_t end = header.find_first_of(",;", start);
    const std::string pair = trim(std::string_view(header).substr(start, end == std::string::npos ? std::string::npos
                                                                                                  : end - start));
    if (pair.size() > 4 && (pair.compare(0, 4, "for=") == 0 || pair.compare(0, 4, "For=") == 0 ||
                            pair.compare(0, 4, "FOR=") == 0)) {
      out.push_back(node_address(pair.substr(4)));
    }
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return out;
}

std::vector<std::string> comma_list(const std::string& header) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = header.find(',', start);
    out.push_back(node_address(header.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    if (end == std::string::npos) {
      return out;
    }
    start = end + 1;
  }
}

} // namespace

std::string client_key(std::string_view address) {
  std::array<uint8_t, 16> b{};
  if (!to_bytes(address, b)) {
    return {};
  }
  char text[INET6_ADDRSTRLEN];
  if (v4_mapped(b)) {
    return inet_ntop(AF_INET, b.data() + 12, text, sizeof text);
  }
  std::memset(b.data() + 8, 0, 8);
  return std::string(inet_ntop(AF_INET6, b.data(), text, sizeof text)) + "/64";
}

Result<ProxyTrust> ProxyTrust::parse(const std::vector<std::string>& entries) {
  ProxyTrust t;
  for (const auto& e : entries) {
    const size_t slash = e.find('/');
    Block b;
    if (!to_bytes(e.substr(0, slash), b.bytes)) {
      return make_error(ErrorKind::usage, "'" + e + "' is neither an IP address nor a CIDR block");
    }
    const bool v4 = v4_mapped(b.bytes);
    int bits = v4 ? 32 : 128;
    if (slash != std::string::npos) {
      const std::string n = e.substr(slash + 1);
      if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(n) > bits) {
        return make_error(ErrorKind::usage, "'" + e + "': a prefix length of 0 to " + std::to_string(bits) +
                                                " was expected after '/'");
      }
      bits = std::stoi(n);
    }
    b.bits = v4 ? 96 + bits : bits;
    t.m_blocks.push_back(b);
  }
  return t;
}

bool ProxyTrust::trusts(std::string_view address) const {
  std::array<uint8_t, 16> a{};
  if (m_blocks.empty() || !to_bytes(address, a)) {
    return false;
  }
  for (const auto& b : m_blocks) {
    int left = b.bits;
    bool in = true;
    for (size_t i = 0; i < 16 && left > 0 && in; ++i, left -= 8) {
      const uint8_t mask = left >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - left));
      in = (a[i] & mask) == (b.bytes[i] & mask);
    }
    if (in) {
      return true;
    }
  }
  return false;
}

std::string ProxyTrust::client_of(const std::string& peer, const std::string* forwarded,
                                  const std::string* x_forwarded_for) const {
  std::string client = peer;
  if (trusts(peer)) {
    std::vector<std::string> chain =
        forwarded ? forwarded_for(*forwarded) : x_forwarded_for ? comma_list(*x_forwarded_for)
                                                                : std::vector<std::string>{};
    // From the nearest hop back: the first that is not a proxy of ours.
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if (client_key(*it).empty()) {
        break; // "unknown", an obfuscated node: the proxy before it is what we know
      }
      client = *it;
      if (!trusts(*it)) {
        break;
      }
    }
  }
  const std::string key = client_key(client);
  return key.empty() ? peer : key;
}

} // namespace tributary::http
