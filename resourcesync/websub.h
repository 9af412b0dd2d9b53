#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

// The parts of W3C WebSub (Recommendation, 23 January 2018) that
// ResourceSync Change Notification 1.0.1 uses as its transport, without
// I/O: the form of a (un)subscription request, the content signature, and
// the Link header that names the hub and the topic.
namespace tributary::rs::websub {

// An application/x-www-form-urlencoded body ('+' is a space, %XX escapes):
// name -> value, the first of a repeated name. nullopt for a malformed
// escape.
std::optional<std::map<std::string, std::string>> parse_form(std::string_view body);
// The same encoding, for a request body or a query.
std::string encode_form(const std::map<std::string, std::string>& fields);

// The X-Hub-Signature value of a content distribution request:
// "sha256=<hex of HMAC-SHA256(secret, body)>" (WebSub 7: sha256 is what we
// send, any of sha1, sha256, sha384, sha512 is what we accept).
std::string signature(std::string_view secret, std::string_view body);

enum class SignatureCheck {
  valid,
  missing,   // no header although a secret was given
  malformed, // not "method=hex", or a method WebSub does not name
  mismatch,  // the HMAC differs: the content must be ignored
};
SignatureCheck check_signature(const std::string* header, std::string_view secret, std::string_view body);
std::string_view to_string(SignatureCheck c);

// `bytes` random bytes (OpenSSL's generator) as hex: challenges, callback
// tokens, secrets.
std::string random_hex(size_t bytes);

// `Link: <hub>; rel="hub", <topic>; rel="self"`.
std::string link_header(std::string_view hub, std::string_view topic);

// How a subscriber's callback is shown (status API, page, log): its origin
// and a short hash of the whole URL ("https://b.example.org #3fa2c1d0"),
// never its path or query, which may hold the subscriber's only credential
// (a Tributary's /push/<token>). Two subscriptions of one origin still tell
// apart by the hash.
std::string callback_label(std::string_view callback);

} // namespace tributary::rs::websub
