#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace tributary::sync {

// Which network addresses a source's requests may connect to. Every URL a
// remote document names is untrusted: without this, a Resource List could
// point us at the metadata service (169.254.169.254), the database on
// localhost or a printer on the office network (SSRF).
//
// Refused: loopback, private (RFC 1918, fc00::/7), link-local, carrier-grade
// NAT, "this network", multicast, broadcast, documentation and reserved
// ranges, and IPv4 addresses mapped into IPv6 that are any of those; unless
// the address is in `permitted` (the addresses of the source's own
// configured URL, its configured mirrors and allow_hosts, resolved when the
// run starts).
class AddressPolicy {
public:
  explicit AddressPolicy(std::set<std::string> permitted = {});

  // Unique to this policy for the life of the process (for caches).
  uint64_t id() const { return m_id; }

  // True when `addr` may be connected to; otherwise `why` says what it is.
  bool allows(const sockaddr* addr, std::string& why) const;

  // The numeric text of an address ("10.0.0.1", "::1").
  static std::string numeric(const sockaddr* addr);
  // Why an address is not public ("loopback", "private", ...); empty if it is.
  static std::string special_range(const sockaddr* addr);

private:
  std::set<std::string> m_permitted;
  uint64_t m_id;
};

// The address to connect to for `host`: the first it resolves to that
// `policy` allows. Fails `transient` when the name does not resolve, and
// `permanent` (naming the address and its range) when every address is
// refused.
struct PickedAddress {
  std::string address; // numeric
  std::string error;   // set when none
  bool resolved = true;
};
PickedAddress pick_address(const std::string& host, const AddressPolicy& policy);

// A host as the resolver wants it: without the brackets of an IPv6 literal.
std::string bare_host(const std::string& host);

// The numeric addresses `host` resolves to (a literal resolves to itself;
// brackets around an IPv6 literal are fine); empty when it does not.
std::vector<std::string> resolve_host(const std::string& host);

} // namespace tributary::sync
