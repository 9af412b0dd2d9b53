#pragma once

#include "sync_engine/fetcher.h"

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace tributary::agg {

struct ExploreOptions {
  std::string target; // a Source's base URL, any document's URL, a path or file:// URL
  // "resourcesync" (the default), "oai-pmh" (target: the base URL) or
  // "iiif-discovery" (target: the stream's OrderedCollection).
  std::string kind = "resourcesync";
  bool json = false;
  size_t max_documents = 1000; // documents read at most (a walk is bounded)
  // URL prefix -> replacement (a path or URL): reads a Source's documents
  // from a copy, e.g. "http://localhost/=/srv/mirror/".
  std::vector<std::pair<std::string, std::string>> map;
};

// `tributary explore`: walks a Source's tree from any entry point (Source
// Description, Capability Lists, indexes, lists, dumps and their manifests,
// archives; notification channels are shown, not followed), validating every
// document reached, and prints a tree with counts, time ranges, warnings and
// errors (or, with `json`, the same as one JSON object). An http(s) URL with
// no path starts at /.well-known/resourcesync. Links are followed only from
// http(s) to http(s) and from files to files: a remote document never makes
// us read a local file. Returns 0 when every document was reached and valid,
// 1 when any was unreachable, invalid or not what its parent said, 2 when the
// entry point could not be read.
int run_explore(const ExploreOptions& options, sync::Fetcher& fetcher, std::ostream& out, std::ostream& err);

// explore_kinds.cpp: an OAI-PMH endpoint (Identify, formats, sets, record
// counts by sampling), an IIIF Change Discovery stream (pages, activities
// by type, objects, time span). Same return codes.
int run_explore_oai(const ExploreOptions& options, sync::Fetcher& fetcher, std::ostream& out, std::ostream& err);
int run_explore_iiif(const ExploreOptions& options, sync::Fetcher& fetcher, std::ostream& out, std::ostream& err);
// What every request of explore may reach: public addresses, plus those of
// the hosts the operator named (the target, --map targets), checked at
// every redirect hop.
sync::FetchOptions explore_fetch_options(const ExploreOptions& o);

} // namespace tributary::agg
