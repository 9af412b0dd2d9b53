#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tributary::pub {

// How Tributary names its own documents and copies under the public base URL
// (configurable, so it works behind a reverse proxy):
//   /.well-known/resourcesync                       Source Description
//   /sets/<set>/capabilitylist.xml                  one per set
//   /sets/<set>/resourcelist.xml, resourcelist-<n>.xml
//   /sets/<set>/changelist.xml                     the open Change List (what the
//                                                  Capability List names)
//   /sets/<set>/changelist-<n>.xml                 closed parts, immutable
//   /sets/<set>/changelist-index.xml               Change List Index: the closed
//                                                  parts, then changelist.xml
//   /sets/<set>/resourcedump.xml                   Resource Dump (its packages:
//   /sets/<set>/resourcedump/<generation>/<n>.zip    immutable, one folder per build)
//   /sets/<set>/changedump.xml                     Change Dump: one package per closed
//   /sets/<set>/changedump/<n>.zip, <n>-manifest.xml   Change List part, immutable
//   /sets/<set>/resources/<percent-encoded original URI>
//   /sets/<set>/changelist-archive.xml             Change List Archive: every closed
//                                                  part, those retention compacted too
//   /sets/<set>/resourcelist-archive.xml           Resource List Archive: snapshots
//   /sets/<set>/archive/<snapshot>/resourcelist.xml, resourcelist-<n>.xml
//   /sets/<set>/changedump-archive.xml             Change Dump Archive: a Change Dump
//                                                  per compacted part, then the live one
//   /sets/<set>/archive/changedump-<n>.xml         archived Change Dump of part n's
//                                                  package (which keeps its URL)
//   /sets/<set>/activity/collection.json            IIIF Change Discovery stream of the
//   /sets/<set>/activity/page-<n>.json                set: page n holds Change List part n
//   /activity/collection.json, page-<n>.json         the stream of everything (pages of
//                                                  change-log seqs), republisher/discovery.h
//   /sets/<set>/notification/changelist             WebSub topic of the set's Change
//                                                  Notification channel
//   /sets/<set>/notification/framework              WebSub topic of its Framework
//                                                  Notification channel
//   /hub                                           our WebSub hub
//   /oai                                           our OAI-PMH data provider
//   /.well-known/api-catalog                       what we serve (RFC 9727)
// What a path of ours names: one kind a document or file we publish.
enum class RouteKind {
  unknown,            // not ours (a set's path is still named in Route::set)
  malformed,          // a percent-encoding that does not decode
  source_description,
  robots,             // /robots.txt, at the origin's root
  hub,
  oai,                // our OAI-PMH data provider
  api_catalog,        // /.well-known/api-catalog (RFC 9727)
  activity_collection, // an IIIF Change Discovery stream (set empty: everything)
  activity_page,       // part: n
  capability_list,
  resource_list,
  resource_list_part,     // part: n
  change_list,
  change_list_part,       // part: n (live, or archived once compacted: same URL)
  change_list_index,
  resource_dump,
  resource_dump_package,  // part: "<generation>/<n>"
  change_dump,
  change_dump_package,    // part: n
  change_dump_manifest,   // part: n
  change_list_archive,
  resource_list_archive,
  change_dump_archive,
  archived_change_dump,         // part: n
  archived_resource_list,       // part: snapshot
  archived_resource_list_part,  // part: "<snapshot>/<n>"
  change_notification,
  framework_notification,
  resource,                     // part: the original URI, decoded
};

// A path parsed once (UrlScheme::route): its kind, its set (empty outside
// /sets/), the part that varies, and the path percent-decoded (what the
// document cache is keyed by).
struct Route {
  RouteKind kind = RouteKind::unknown;
  std::string set;
  std::string part;
  std::string path;
};

// The kind's name, for tests and logs ("change_list_part").
std::string_view route_kind_name(RouteKind kind);

class UrlScheme {
public:
  // `public_url` like "https://agg.example.org/mirror" (a trailing slash is
  // ignored).
  explicit UrlScheme(std::string public_url);

  const std::string& base() const { return m_base; }
  std::string source_description() const;
  std::string capability_list(std::string_view set) const;
  std::string resource_list(std::string_view set) const;
  std::string resource_list_part(std::string_view set, size_t n) const;
  std::string change_list(std::string_view set) const;
  std::string change_list_part(std::string_view set, size_t n) const;
  std::string change_list_index(std::string_view set) const;
  std::string resource(std::string_view set, std::string_view original_uri) const;
  std::string resource_dump(std::string_view set) const;
  std::string resource_dump_package(std::string_view set, std::string_view generation, size_t n) const;
  std::string change_dump(std::string_view set) const;
  std::string change_dump_package(std::string_view set, size_t n) const;
  std::string change_dump_manifest(std::string_view set, size_t n) const;
  std::string change_list_archive(std::string_view set) const;
  std::string resource_list_archive(std::string_view set) const;
  std::string change_dump_archive(std::string_view set) const;
  std::string archived_change_dump(std::string_view set, size_t n) const;
  // A snapshot of the Resource List as archived: its list (or index) and
  // parts.
  std::string archived_resource_list(std::string_view set, std::string_view snapshot) const;
  std::string archived_resource_list_part(std::string_view set, std::string_view snapshot, size_t n) const;
  std::string change_notification(std::string_view set) const;
  std::string framework_notification(std::string_view set) const;
  std::string hub() const;
  // Our OAI-PMH data provider's base URL.
  std::string oai() const;
  // Our API catalog (RFC 9727): the Source Description, /oai and the
  // Change Discovery streams.
  std::string api_catalog() const;
  // The IIIF Change Discovery stream of a set, or of everything (`set`
  // empty), and its pages.
  std::string activity_collection(std::string_view set) const;
  std::string activity_page(std::string_view set, size_t n) const;
  // The set whose Change or Framework Notification topic `url` is, if it
  // is one (`framework` says which).
  std::optional<std::string> notification_set(std::string_view url, bool* framework = nullptr) const;

  // The path part of our URLs (what the server sees), for routing.
  std::string path_of(const std::string& url) const;
  // The URL of ours whose path the server saw (path_of's inverse).
  std::string url_of(std::string_view path) const;
  // What the server path `raw_path` (as requested, percent-encoded) names,
  // under this scheme's base path. Never fails: kind unknown or malformed.
  Route route(std::string_view raw_path) const;

  // (set, original URI) for a resource path, nullopt for anything else.
  static std::optional<std::pair<std::string, std::string>> parse_resource_path(std::string_view path);

private:
  std::string activity_folder(std::string_view set) const;

  std::string m_base;
  std::string m_prefix; // the base's path ("/mirror"; empty at the root)
};

} // namespace tributary::pub
