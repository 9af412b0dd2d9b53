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
//   /sets/<set>/notification/changelist             WebSub topic of the set's Change
//                                                  Notification channel
//   /sets/<set>/notification/framework              WebSub topic of its Framework
//                                                  Notification channel
//   /hub                                           our WebSub hub
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
  // The set whose Change or Framework Notification topic `url` is, if it
  // is one (`framework` says which).
  std::optional<std::string> notification_set(std::string_view url, bool* framework = nullptr) const;

  // The path part of our URLs (what the server sees), for routing.
  std::string path_of(const std::string& url) const;
  // The URL of ours whose path the server saw (path_of's inverse).
  std::string url_of(std::string_view path) const;
  // (set, original URI) for a resource path, nullopt for anything else.
  static std::optional<std::pair<std::string, std::string>> parse_resource_path(std::string_view path);

private:
  std::string m_base;
};

} // namespace tributary::pub
