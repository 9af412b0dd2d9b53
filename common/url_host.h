#pragma once

#include <string>
#include <string_view>

namespace tributary {

// The host of an absolute URL, lower-cased, without brackets for an IPv6
// literal ("" when the URL does not parse or names no host). Parsed by
// liburiparser, as resolve_reference is, so "HTTP://A.example:80@b/" and
// the like mean what RFC 3986 says, not what a hand-written split guesses.
std::string url_host(std::string_view url);

// One spelling for every way of writing a host, for counting by host: case
// and trailing dots dropped, percent-escapes decoded, an IPv4 address in
// any form inet_aton reads ("127.0.0.02", "2130706434", "0x7f000002",
// "127.2") written as a dotted quad, an IPv6 address in its canonical form
// (an IPv4-mapped one as the IPv4 address), and a name through IDNA
// (UTS 46) as its ASCII form. A host that is none of these comes back
// lower-cased.
std::string canonical_host(std::string_view host);

// The registrable domain of a host (the public suffix plus one label, from
// the Public Suffix List through libpsl): "a.b.example.co.uk" ->
// "example.co.uk". An IP address, a single label, or a host that is itself
// a public suffix is its own registrable domain. Used for quotas a stranger
// must not escape by naming many subdomains of one domain it holds.
std::string registrable_domain(std::string_view host);

} // namespace tributary
