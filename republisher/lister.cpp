// The lister's job: each set's Resource List, kept up to date in files.
#include "republisher/server_impl.h"

namespace tributary::pub {

using namespace server_detail;

auto Republisher::Impl::lists_pass() -> ListsPass {
  // Read before the seq: a list brought to that seq shows the store as it
  // was at this time at the latest.
  const rs::Timestamp at = now();
  auto seq = lookups->last_seq();
  std::vector<PublishedSet> sets; // as the refresher last published them
  {
    std::shared_lock lock(cache_mutex);
    for (const auto& [name, feeds] : set_feeds) {
      sets.push_back(PublishedSet{name, feeds});
    }
  }
  std::vector<std::string> failures;
  ListsPass pass;
  if (!seq) {
    failures.push_back(seq.error().message);
  } else {
    const bool quiet = *seq == lists_last_seq;
    pass.settled = quiet;
    lists_last_seq = *seq;
    std::set<std::string> names;
    for (const auto& s : sets) {
      names.insert(s.name);
      ListState& list = resource_lists[s.name];
      const bool fresh = !list.files || list.files->set().feeds != s.feeds;
      const bool due =
          fresh || (list.files->seq() != *seq &&
                    (quiet || std::chrono::steady_clock::now() - list.at >=
                                  std::max<std::chrono::steady_clock::duration>(
                                      4 * list.took, options.resource_list_min_interval)));
      if (!due) {
        continue;
      }
      if (auto r = update_list(s, *seq, at); !r) {
        failures.push_back("set '" + s.name + "': " + r.error().message); // the previous list stays published
        pass.settled = false;
        continue;
      }
      pass.rendered = true;
      snapshot_if_due(s.name, list.files->documents(), at);
      const bool first = publish_list(s.name, list.files->documents());
      notify_framework(s.name, urls.resource_list(s.name), "resourcelist", first ? "created" : "updated");
      if (first) {
        {
          std::lock_guard lock(stop_mutex);
          sets_listed = true;
          refresh_requested = true;
        }
        stop_cv.notify_all();
      }
    }
    for (auto it = resource_lists.begin(); it != resource_lists.end();) {
      if (names.count(it->first)) {
        ++it;
        continue;
      }
      publish_list(it->first, {}); // a set no longer published
      it = resource_lists.erase(it);
    }
  }
  report_failures(failures, list_failures,
                  "Resource Lists not brought up to date (the previous ones are served): ",
                  "every Resource List is up to date again");
  return pass;
}

auto Republisher::Impl::update_list(const PublishedSet& s, int64_t seq, rs::Timestamp at) -> Result<void> {
  const auto start = std::chrono::steady_clock::now();
  ListState& list = resource_lists[s.name];
  if (!list.files || list.files->set().feeds != s.feeds) {
    ResourceListFiles::Options o;
    o.dir = list_root / s.name;
    list.files = std::make_unique<ResourceListFiles>(urls, s, o);
  }
  auto r = list.files->update(*lookups, seq, at);
  if (!r) {
    return tl::unexpected(r.error());
  }
  list.at = start;
  list.took = std::chrono::steady_clock::now() - start;
  log::debug("", "Resource List of set '" + s.name + "' brought to change " + std::to_string(seq) + " in " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(list.took).count()) +
                     " ms (" + std::to_string(r->parts_rendered) + " parts, " + std::to_string(r->entries_rendered) +
                     " entries rendered" + (r->full ? ", all of it" : "") + "; " +
                     std::to_string(list.files->parts()) + " parts)");
  return {};
}

auto Republisher::Impl::publish_list(const std::string& set,
    std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> docs) -> bool {
  std::lock_guard lists(lists_mutex);
  const bool first = !list_docs.count(set);
  auto& old = list_docs[set];
  std::unique_lock lock(cache_mutex);
  auto updated = std::make_shared<DocumentMap>(*documents);
  for (const auto& [path, doc] : old) {
    updated->erase(path);
  }
  for (const auto& [path, doc] : docs) {
    (*updated)[path] = doc;
  }
  documents = std::move(updated);
  if (docs.empty()) {
    list_docs.erase(set);
  } else {
    old = std::move(docs);
  }
  return first && !list_docs.empty() && list_docs.count(set);
}

} // namespace tributary::pub
