#pragma once

#include "common/result.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace re2 {
class RE2;
}

namespace tributary::sync {

// Where a secret comes from: a file (first line) or an environment variable.
// Secrets are read when needed and never logged.
struct SecretRef {
  std::string file;
  std::string env;
};

// The secret's value (a file's first line, trailing blanks cut, or the
// variable's value); a permanent error naming `owner` (e.g. "source 'x'")
// when it cannot be read or is empty.
Result<std::string> read_secret(const SecretRef& s, const std::string& owner);

struct AuthConfig {
  enum class Type { none, bearer, basic };
  Type type = Type::none;
  std::string username;  // basic
  SecretRef secret;      // the token (bearer) or password (basic)
};

// A URI filter: a prefix, or a regular expression (RE2 syntax) matched
// against the whole URI. RE2 runs in time linear in the URI and does not
// recurse: std::regex recursed once per character and overflowed the stack
// on a 300 KB `loc` an upstream sent.
struct UriFilter {
  std::string text; // as configured: "prefix" or "re:<regex>"
  bool is_regex = false;
  std::string prefix;
  std::shared_ptr<const re2::RE2> regex;

  bool matches(const std::string& uri) const;
};

// Builds a filter from its configured text; an error text when the
// expression does not compile.
std::optional<std::string> make_uri_filter(const std::string& text, UriFilter& out);

// Another endpoint serving the same Source; lower pri is preferred.
struct MirrorEndpoint {
  std::string url;
  uint32_t pri = 999999;
};

// What a Source speaks: ResourceSync at every level, down to a plain
// sitemap (the default), or OAI-PMH 2.0 (#36), whose records are harvested
// into resources.
struct OaiConfig {
  // Each prefix is harvested as a feed of its own (so is each set).
  std::vector<std::string> metadata_prefixes{"oai_dc"};
  std::vector<std::string> sets; // empty: the whole repository
  // A record's URI: "{identifier}" and "{prefix}" are replaced (the
  // identifier percent-encoded); empty: the record's GetRecord URL, which
  // dereferences.
  std::string record_uri;
  // How far back each incremental harvest starts before the last one's
  // responseDate, for datestamps a repository writes late or rounds.
  std::chrono::seconds overlap{60};
};

// One upstream Source as configured.
struct SourceConfig {
  std::string name;
  std::string url; // any entry URL: site root, Source Description, Capability List, list, page
  // or "oai-pmh" (then `url` is the base URL), or "iiif-discovery" (then
  // `url` is the Change Discovery stream's OrderedCollection)
  std::string kind = "resourcesync";
  OaiConfig oai;
  std::vector<MirrorEndpoint> mirrors;
  std::vector<std::string> capability_lists; // empty: every set the Source Description lists
  std::vector<UriFilter> include;            // empty: everything
  std::vector<UriFilter> exclude;
  std::vector<std::string> media_types;      // "type/subtype" or "type/*"; empty: all
  AuthConfig auth;
  unsigned concurrency = 8;             // workers; also caps concurrent requests per host
  double max_requests_per_second = 0;  // a ceiling per host; 0 = none: the rate adapts (HostThrottle)
  // Hosts beyond the source's own and its configured mirrors that documents
  // may name (content, duplicates, documents); also what lets a private or
  // loopback address through the address policy.
  std::vector<std::string> allow_hosts;
  bool verify_tls = true;
  // Several small GETs in flight on one http connection (HTTP/1.1
  // pipelining) for a baseline's or audit's content; off for a server known
  // to mishandle it (one that does is noticed and turned off by itself).
  bool pipelining = true;
  std::chrono::milliseconds timeout{60000};
  uint64_t max_body_bytes = 1ull << 30;
  // A transfer slower than this over any `rate_window` is cut off (and
  // retried, then left to the retry table); 0 = never.
  uint64_t min_bytes_per_second = 1000;
  std::chrono::seconds rate_window{30};
  bool enabled = true;
  // For the daemon's scheduler: follow every `interval` (with jitter), audit
  // every `audit_interval` (zero: never). The daily audit repairs what a run
  // could not apply (a resource whose fetch failed is not retried by later
  // incremental runs unless it changes again).
  std::chrono::seconds interval{900};
  std::chrono::seconds audit_interval{86400};
  // How to baseline and catch up: "auto" (dumps when the Source offers
  // them, lists otherwise), "lists" or "dumps".
  std::string strategy = "auto";
  // The mass-deletion guard: a baseline or audit whose list lacks more than
  // this share of the live resources held deletes none of them until an
  // operator confirms (POST /api/v1/sources/{name}/confirm-deletions).
  // 1 = never hold.
  double max_deletion_share = 0.5;
  // How far in the future a change may be dated before the Source's clock
  // is taken to be ahead: such changes are applied, flagged, and the
  // watermark stays at the time they were read.
  std::chrono::seconds clock_tolerance{300};
  // A resource whose content has failed for longer than this (its retries
  // failing since) puts the source in state "attention": it needs a human
  // (a location gone for good, bytes that never verify). 0 = never.
  std::chrono::seconds retry_attention_after{86400};

  // Whether a resource passes the include/exclude/media type filters.
  bool selects(const std::string& uri, const std::optional<std::string>& type) const;
};

} // namespace tributary::sync
