#pragma once

// Who a request comes from, for per-client limits (#50). Behind the reverse
// proxy README prescribes for TLS every request's socket peer is the proxy,
// so all clients were one: one client's silent callbacks refused everyone
// else's subscriptions. From a peer the operator lists in
// `trusted_proxies`, the client is the address the proxy forwarded for
// (RFC 7239 `Forwarded: for=`, else `X-Forwarded-For`): the nearest one not
// itself a trusted proxy. From anyone else those headers are ignored (they
// are the client's to forge). An IPv6 client is counted by its /64, which
// one subscriber holds whole.

#include "common/result.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tributary::http {

class ProxyTrust {
public:
  // Addresses or CIDR blocks ("10.0.0.0/8", "::1", "2001:db8::/32"); a
  // usage error naming the first that is neither.
  static Result<ProxyTrust> parse(const std::vector<std::string>& entries);

  bool trusts(std::string_view address) const;

  // The client for limits: `peer`, or from a trusted peer the forwarded
  // address; IPv6 as its /64 ("2001:db8:1:2::/64").
  std::string client_of(const std::string& peer, const std::string* forwarded,
                        const std::string* x_forwarded_for) const;

private:
  struct Block {
    std::array<uint8_t, 16> bytes{}; // IPv4 as IPv4-mapped IPv6
    int bits = 0;                    // of the 128
  };
  std::vector<Block> m_blocks;
};

// An address's one spelling for counting: IPv4 dotted, IPv6 as its /64;
// "" when `address` is not an IP address.
std::string client_key(std::string_view address);

} // namespace tributary::http
