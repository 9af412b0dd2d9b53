// `tributary explore --kind oai-pmh|iiif-discovery`: a look at a Source of
// another kind before adding it (#36). An OAI-PMH endpoint: Identify, its
// formats, its sets and record counts by sampling. An IIIF Change Discovery
// stream: its pages, activities by type, object types and time span.
#include "aggregator/cli/explore.h"

#include "resourcesync/datetime.h"
#include "sync_engine/iiif/change_discovery.h"
#include "sync_engine/oai/oai_pmh.h"

#include <nlohmann/json.hpp>

#include <map>
#include <ostream>
#include <set>

namespace tributary::agg {

namespace {

using nlohmann::json;

constexpr uint64_t k_max_page = 32ull * 1024 * 1024;
constexpr size_t k_sampled_sets = 5;

Result<std::string> get(sync::Fetcher& fetcher, const ExploreOptions& o, const std::string& url) {
  sync::FetchOptions f = explore_fetch_options(o);
  f.max_body_bytes = k_max_page;
  std::string body;
  auto r = fetcher.fetch(url, f, [&body](const char* d, size_t n) {
    body.append(d, n);
    return true;
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (r->status < 200 || r->status > 299) {
    return tl::unexpected(sync::status_error(url, r->status));
  }
  return body;
}

// How many records a list holds: completeListSize when the repository says,
// else counted over at most `pages` pages ("at least" past them).
struct Count {
  uint64_t records = 0;
  bool exact = true;
  std::string problem;
};

Count count_records(sync::Fetcher& fetcher, const ExploreOptions& o, const std::string& base,
                    const std::string& prefix, const std::optional<std::string>& set, size_t pages) {
  Count c;
  sync::oai::ListRequest q;
  q.verb = "ListIdentifiers";
  q.metadata_prefix = prefix;
  q.set = set;
  std::string url = sync::oai::list_url(base, q);
  for (size_t i = 0; i < pages && !url.empty(); ++i) {
    auto body = get(fetcher, o, url);
    if (!body) {
      c.problem = body.error().message;
      return c;
    }
    auto page = sync::oai::parse_list(*body);
    if (!page) {
      c.problem = page.error().message;
      return c;
    }
    if (page->has_error("noRecordsMatch")) {
      return c;
    }
    if (!page->errors.empty()) {
      c.problem = page->errors[0].code + ": " + page->errors[0].message;
      return c;
    }
    if (page->resumption.complete_list_size) {
      c.records = *page->resumption.complete_list_size;
      return c;
    }
    c.records += page->records.size();
    q.resumption_token = page->resumption.token;
    url = page->last() ? std::string() : sync::oai::list_url(base, q);
  }
  c.exact = url.empty();
  return c;
}

std::string count_text(const Count& c) {
  if (!c.problem.empty()) {
    return "? (" + c.problem + ")";
  }
  return (c.exact ? "" : "at least ") + std::to_string(c.records);
}

json count_json(const Count& c) {
  json j{{"records", c.records}, {"exact", c.exact}};
  if (!c.problem.empty()) {
    j["problem"] = c.problem;
  }
  return j;
}

} // namespace

int run_explore_oai(const ExploreOptions& o, sync::Fetcher& fetcher, std::ostream& out, std::ostream& err) {
  const std::string base = o.target;
  auto body = get(fetcher, o, sync::oai::identify_url(base));
  if (!body) {
    err << "tributary explore: " << base << ": Identify: " << body.error().message << '\n';
    return 2;
  }
  auto id = sync::oai::parse_identify(*body);
  if (!id) {
    err << "tributary explore: " << base << ": Identify: " << id.error().message << '\n';
    return 2;
  }
  int status = 0;
  std::vector<sync::oai::MetadataFormat> formats;
  if (auto f = get(fetcher, o, sync::oai::list_metadata_formats_url(base)); f) {
    if (auto parsed = sync::oai::parse_metadata_formats(*f)) {
      formats = *parsed;
    }
  }
  std::vector<sync::oai::Set> sets;
  bool more_sets = false;
  std::string sets_problem;
  {
    std::string token;
    for (size_t i = 0; i < 20; ++i) {
      auto s = get(fetcher, o, sync::oai::list_sets_url(base, token));
      if (!s) {
        sets_problem = s.error().message;
        break;
      }
      sync::oai::Resumption r;
      auto parsed = sync::oai::parse_sets(*s, &r);
      if (!parsed) {
        sets_problem = parsed.error().message;
        break;
      }
      sets.insert(sets.end(), parsed->begin(), parsed->end());
      token = r.token;
      if (token.empty()) {
        break;
      }
      more_sets = i == 19;
    }
  }
  const std::string prefix = formats.empty() ? "oai_dc" : formats.front().prefix;
  const Count all = count_records(fetcher, o, base, prefix, std::nullopt, 10);
  std::vector<std::pair<std::string, Count>> by_set;
  for (size_t i = 0; i < sets.size() && i < k_sampled_sets; ++i) {
    by_set.emplace_back(sets[i].spec, count_records(fetcher, o, base, prefix, sets[i].spec, 3));
  }
  if (!all.problem.empty()) {
    status = 1;
  }
  const char* granularity = id->granularity == sync::oai::Granularity::second ? "YYYY-MM-DDThh:mm:ssZ" : "YYYY-MM-DD";
  if (o.json) {
    json j{{"kind", "oai-pmh"},
           {"base_url", base},
           {"repository_name", id->repository_name},
           {"protocol_version", id->protocol_version},
           {"granularity", granularity},
           {"deleted_record", id->deleted_record},
           {"earliest_datestamp",
            id->earliest_datestamp ? json(rs::format_w3c_datetime(*id->earliest_datestamp)) : json(nullptr)},
           {"metadata_formats", json::array()},
           {"sets", sets.size()},
           {"more_sets", more_sets},
           {"records", count_json(all)},
           {"records_by_set", json::object()}};
    for (const auto& f : formats) {
      j["metadata_formats"].push_back({{"prefix", f.prefix}, {"namespace", f.namespace_uri}});
    }
    for (const auto& [spec, c] : by_set) {
      j["records_by_set"][spec] = count_json(c);
    }
    out << j.dump(2) << '\n';
    return status;
  }
  out << "OAI-PMH " << id->protocol_version << " repository \"" << id->repository_name << "\" at " << base << '\n'
      << "  granularity " << granularity << ", deletedRecord " << id->deleted_record << ", earliest datestamp "
      << (id->earliest_datestamp ? rs::format_w3c_datetime(*id->earliest_datestamp) : std::string("?")) << '\n'
      << "  metadata formats:";
  for (const auto& f : formats) {
    out << ' ' << f.prefix;
  }
  out << "\n  sets: " << sets.size() << (more_sets ? "+" : "")
      << (sets_problem.empty() ? "" : " (" + sets_problem + ")") << '\n'
      << "  records (" << prefix << "): " << count_text(all) << '\n';
  for (const auto& [spec, c] : by_set) {
    out << "    set " << spec << ": " << count_text(c) << '\n';
  }
  if (sets.size() > by_set.size()) {
    out << "    (" << sets.size() - by_set.size() << " more sets not sampled)\n";
  }
  return status;
}

int run_explore_iiif(const ExploreOptions& o, sync::Fetcher& fetcher, std::ostream& out, std::ostream& err) {
  auto body = get(fetcher, o, o.target);
  if (!body) {
    err << "tributary explore: " << o.target << ": " << body.error().message << '\n';
    return 2;
  }
  auto c = sync::iiif::parse_collection(*body);
  if (!c) {
    err << "tributary explore: " << o.target << ": " << c.error().message << '\n';
    return 2;
  }
  std::map<std::string, uint64_t> by_type;
  std::map<std::string, uint64_t> object_types;
  std::set<std::string> objects;
  std::optional<rs::Timestamp> earliest;
  std::optional<rs::Timestamp> latest;
  uint64_t activities = 0;
  uint64_t undated = 0;
  uint64_t warnings = 0;
  size_t pages = 0;
  std::string problem;
  std::set<std::string> seen;
  std::string url = c->last.empty() ? c->first : c->last;
  const bool backwards = !c->last.empty();
  while (!url.empty() && pages < o.max_documents && seen.insert(url).second) {
    auto page_body = get(fetcher, o, url);
    if (!page_body) {
      problem = url + ": " + page_body.error().message;
      break;
    }
    auto page = sync::iiif::parse_page(*page_body);
    if (!page) {
      problem = url + ": " + page.error().message;
      break;
    }
    ++pages;
    warnings += page->warnings.size();
    for (const auto& a : page->items) {
      ++activities;
      ++by_type[a.type];
      if (!a.object.empty()) {
        objects.insert(a.object);
        ++object_types[a.object_type.empty() ? "?" : a.object_type];
      }
      if (!a.end_time) {
        ++undated;
        continue;
      }
      earliest = earliest ? std::min(*earliest, *a.end_time) : *a.end_time;
      latest = latest ? std::max(*latest, *a.end_time) : *a.end_time;
    }
    url = backwards ? page->prev : page->next;
  }
  const bool limited = !url.empty() && problem.empty();
  auto iso = [](const std::optional<rs::Timestamp>& t) { return t ? rs::format_w3c_datetime(*t) : std::string(); };
  if (o.json) {
    json j{{"kind", "iiif-discovery"},
           {"collection", o.target},
           {"total_items", c->total_items ? json(*c->total_items) : json(nullptr)},
           {"pages_read", pages},
           {"limited", limited},
           {"activities", activities},
           {"by_type", by_type},
           {"object_types", object_types},
           {"objects", objects.size()},
           {"level0", activities > 0 && undated == activities},
           {"earliest", earliest ? json(iso(earliest)) : json(nullptr)},
           {"latest", latest ? json(iso(latest)) : json(nullptr)},
           {"warnings", warnings}};
    if (!problem.empty()) {
      j["problem"] = problem;
    }
    out << j.dump(2) << '\n';
  } else {
    out << "IIIF Change Discovery stream " << o.target << '\n'
        << "  " << (c->total_items ? std::to_string(*c->total_items) : std::string("?")) << " activities said, "
        << activities << " read in " << pages << " pages" << (limited ? " (stopped at --max-documents)" : "") << '\n'
        << "  by type:";
    for (const auto& [t, n] : by_type) {
      out << ' ' << t << ' ' << n;
    }
    out << "\n  objects: " << objects.size() << " (";
    bool first = true;
    for (const auto& [t, n] : object_types) {
      out << (first ? "" : ", ") << t << ' ' << n;
      first = false;
    }
    out << ")\n";
    if (undated == activities && activities > 0) {
      out << "  Level 0: no activity has an endTime (followed as a full listing)\n";
    } else {
      out << "  from " << iso(earliest) << " to " << iso(latest) << '\n';
    }
    out << "  " << warnings << " warnings" << (problem.empty() ? "" : "; " + problem) << '\n';
  }
  return problem.empty() && !limited ? 0 : 1;
}

} // namespace tributary::agg
