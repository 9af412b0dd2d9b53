#pragma once

#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The in-memory model of every ResourceSync document (ANSI/NISO Z39.99-2014
// and the 1.1 additions): Source Description, Capability List, Resource List
// and Index, Resource Dump and Index and Manifest, Change List and Index,
// Change Dump and Index and Manifest, the four archive kinds and change
// notification payloads. All of them are Sitemap `<urlset>` or
// `<sitemapindex>` documents with `<rs:md>`/`<rs:ln>` extensions, so one
// model serves them all; `Capability` says which document it is.
//
// The model holds only values that parsed: a datetime, hash or change value
// that is malformed is reported by the reader and left out. Attributes and
// elements the model does not name are kept as extensions so that a document
// round-trips.
namespace tributary::rs {

inline constexpr std::string_view k_sitemap_ns = "http://www.sitemaps.org/schemas/sitemap/0.9";
inline constexpr std::string_view k_rs_ns = "http://www.openarchives.org/rs/terms/";

enum class RootElement { urlset, sitemapindex };
std::string_view to_string(RootElement r);

enum class Capability {
  description,
  capabilitylist,
  resourcelist,
  resourcedump,
  resourcedump_manifest,
  changelist,
  changedump,
  changedump_manifest,
  resourcelist_archive,
  resourcedump_archive,
  changelist_archive,
  changedump_archive,
  changelist_notification,
  changedump_notification,
  framework_notification, // ResourceSync Framework Notification 1.0.1
};
// The attribute value, e.g. "resourcedump-manifest".
std::string_view to_string(Capability c);
std::optional<Capability> capability_from_string(std::string_view s);

// Resource List, Resource Dump and their manifest: snapshot documents that
// carry `at`/`completed`.
bool is_snapshot_capability(Capability c);
// Change List, Change Dump and their manifest (and notifications): documents
// that carry `from`/`until` and whose entries are changes.
bool is_change_capability(Capability c);
// The manifests inside dump packages (entries carry `path`).
bool is_manifest_capability(Capability c);
bool is_archive_capability(Capability c);

// A media type as RFC 9110 8.3.1 writes one: type "/" subtype, then
// parameters (token "=" token or quoted-string), at most 255 bytes. Nothing
// else passes: no control characters, no CR or LF, no bytes past ASCII, so
// a value that passes is safe to send as a Content-Type header.
bool is_media_type(std::string_view s, std::string* why = nullptr);

// Whether `s` begins with a URI scheme (RFC 3986 section 3.1: ALPHA
// *( ALPHA / DIGIT / "+" / "-" / "." ) ":"), i.e. is not a relative reference.
bool has_uri_scheme(std::string_view s);

enum class Change { created, updated, deleted };
std::string_view to_string(Change c);
std::optional<Change> change_from_string(std::string_view s);

// An attribute outside the ResourceSync vocabulary, kept for round trips.
// `ns` is empty for an unprefixed attribute we do not know.
struct ExtensionAttribute {
  std::string ns;
  std::string prefix;
  std::string name;
  std::string value;
  bool operator==(const ExtensionAttribute& o) const {
    return ns == o.ns && name == o.name && value == o.value; // prefixes are not meaningful
  }
};

// An element we do not know (any namespace), kept as a small tree. Text is
// the concatenation of its character data; mixed content is not preserved
// in position.
struct XmlNode {
  std::string ns;
  std::string prefix;
  std::string name;
  std::vector<ExtensionAttribute> attributes;
  std::string text;
  std::vector<XmlNode> children;
  bool operator==(const XmlNode& o) const {
    return ns == o.ns && name == o.name && attributes == o.attributes && text == o.text &&
           children == o.children;
  }
};

// `<rs:md>`: metadata about the document (at its root) or about a resource
// (in an entry). Every attribute the specification defines has a field.
struct Metadata {
  std::optional<std::string> capability; // as written; see capability_kind()
  std::optional<Timestamp> at;
  std::optional<Timestamp> completed;
  std::optional<Timestamp> from;
  std::optional<Timestamp> until;
  std::optional<Timestamp> datetime; // 1.1: when the change happened
  std::optional<Change> change;
  std::vector<HashValue> hash;
  std::optional<uint64_t> length;
  std::optional<std::string> type;
  std::optional<std::string> encoding;
  std::optional<std::string> path;
  std::vector<ExtensionAttribute> extensions;

  std::optional<Capability> capability_kind() const {
    return capability ? capability_from_string(*capability) : std::nullopt;
  }
  bool operator==(const Metadata&) const = default;
};

// `<rs:ln>`: a link from the document or from a resource.
struct Link {
  std::string rel;
  std::string href;
  std::vector<HashValue> hash;
  std::optional<uint64_t> length;
  std::optional<Timestamp> modified;
  std::optional<std::string> path;
  std::optional<uint32_t> pri; // absent means 999,999
  std::optional<std::string> type;
  std::optional<std::string> encoding;
  std::vector<ExtensionAttribute> extensions;

  uint32_t effective_pri() const { return pri.value_or(999999); }
  bool operator==(const Link&) const = default;
};

// A `<url>` (in `<urlset>`) or `<sitemap>` (in `<sitemapindex>`).
struct Entry {
  std::string loc;
  std::optional<Timestamp> lastmod;
  std::optional<std::string> changefreq;
  std::optional<std::string> priority; // Sitemap <priority>, kept as written
  std::optional<Metadata> md;
  std::vector<Link> links;
  std::vector<XmlNode> extensions;
  // `<lastmod>` gave a date without a time of day (plain sitemaps often
  // do): two changes on that day have the same lastmod, so it alone cannot
  // tell that what we hold is current.
  bool lastmod_date_only = false;
  // A change without a time of its own (neither `datetime` nor `lastmod`):
  // the reader gave it the document's `until`, or the time it was read.
  bool time_inferred = false;

  // When the change happened: `rs:md/@datetime` (1.1), else `<lastmod>` (1.0).
  std::optional<Timestamp> change_time() const {
    if (md && md->datetime) {
      return md->datetime;
    }
    return lastmod;
  }
  std::optional<Change> change() const { return md ? md->change : std::nullopt; }
  // The first link with this relation, or nullptr.
  const Link* find_link(std::string_view rel) const;
  // Links with this relation, highest priority (lowest pri) first; ties keep
  // document order.
  std::vector<const Link*> links_by_priority(std::string_view rel) const;
  bool operator==(const Entry&) const = default;
};

// Everything about a document except its entries: the root element, the
// document-level `<rs:md>` and `<rs:ln>`s, other root children and namespace
// declarations beyond the Sitemap and ResourceSync ones.
struct DocumentHeader {
  RootElement root = RootElement::urlset;
  // A sitemaps.org document without `<rs:md>`: the reader reads it as a
  // Resource List (or, as a `<sitemapindex>`, a Resource List Index) and
  // gives it that capability.
  bool plain_sitemap = false;
  std::optional<Metadata> md;
  std::vector<Link> links;
  std::vector<XmlNode> extensions;
  std::vector<std::pair<std::string, std::string>> namespaces; // prefix -> URI

  std::optional<Capability> capability() const { return md ? md->capability_kind() : std::nullopt; }
  const Link* find_link(std::string_view rel) const;
  bool operator==(const DocumentHeader&) const = default;
};

struct Document {
  DocumentHeader header;
  std::vector<Entry> entries;
  bool operator==(const Document&) const = default;
};

enum class Severity { warning, error };

// A finding of the reader or validator, with the line it was found on
// (0 when the document as a whole is meant).
struct Diagnostic {
  Severity severity = Severity::error;
  uint64_t line = 0;
  std::string message;
};

// Community limits every Sitemap-based document must respect (spec section 7).
inline constexpr uint64_t k_max_entries = 50000;
inline constexpr uint64_t k_max_document_bytes = 50ull * 1024 * 1024;

} // namespace tributary::rs
