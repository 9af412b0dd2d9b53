#pragma once

// What the history tests (#49) share: every entry of a published list, and
// our change log held against the Source's changes, URI by URI.
#include "http_get.h"

#include "resourcesync/datetime.h"
#include "resourcesync/reader.h"

#include <doctest/doctest.h>
#include <pqxx/pqxx>

#include <map>
#include <string>
#include <vector>

namespace tributary::test {

// Every entry of a list, or of the lists its index names.
inline std::vector<rs::Entry> entries_of(const std::string& url) {
  Got f = http_get(url);
  REQUIRE_MESSAGE(f.status == 200, url);
  auto doc = rs::parse_document(f.body);
  if (doc.document.header.root == rs::RootElement::urlset) {
    return doc.document.entries;
  }
  std::vector<rs::Entry> all;
  for (const auto& part : doc.document.entries) {
    auto p = entries_of(part.loc);
    all.insert(all.end(), p.begin(), p.end());
  }
  return all;
}

// Per URI of the change log at `conninfo`: whether the entries after its
// first are the Source's `upstream` changes after that one's time, as the
// states they leave ("deleted", or the md5 of the bytes). Empty when every
// URI holds; else how the first that does not differs, and how many do.
inline std::string log_against_source(const std::string& conninfo, const std::vector<rs::Entry>& upstream) {
  std::map<std::string, std::vector<std::pair<rs::Timestamp, std::string>>> up, ours;
  for (const auto& e : upstream) {
    up[e.loc].emplace_back(*e.change_time(), *e.md->change == rs::Change::deleted ? "deleted" : e.md->hash[0].hex);
  }
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  for (const auto& row : tx.exec("SELECT uri, change, (extract(epoch from coalesce(upstream_datetime, recorded_at)) "
                                 "* 1000000)::bigint, coalesce(md5, '-') FROM change_log ORDER BY seq")) {
    ours[row[0].as<std::string>()].emplace_back(
        rs::Timestamp(std::chrono::microseconds(row[2].as<long long>())),
        row[1].as<std::string>() == "deleted" ? "deleted" : row[3].as<std::string>());
  }
  std::string first;
  size_t differ = 0;
  for (const auto& [uri, log] : ours) {
    std::vector<std::string> want, got;
    for (const auto& [t, s] : up[uri]) {
      if (t > log.front().first) {
        want.push_back(s);
      }
    }
    for (size_t i = 1; i < log.size(); ++i) {
      got.push_back(log[i].second);
    }
    if (want == got) {
      continue;
    }
    if (++differ == 1) {
      first = uri + ": logged";
      for (const auto& [t, s] : log) {
        first += " " + s.substr(0, 7) + "@" + rs::format_w3c_datetime(t);
      }
      first += "; the Source:";
      for (const auto& [t, s] : up[uri]) {
        first += " " + s.substr(0, 7) + "@" + rs::format_w3c_datetime(t);
      }
    }
  }
  return differ == 0 ? "" : std::to_string(differ) + " URI(s) differ; first: " + first;
}

} // namespace tributary::test
