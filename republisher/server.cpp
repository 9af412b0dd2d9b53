// Room republisher/server: the republisher's wiring. It owns the
// components (the shelf, the document renderer, the Resource List keeper,
// the dump builder, the archive keeper, the content server), starts and
// stops their threads, and answers a request: its path routed once
// (UrlScheme::route), then one handler per kind.
#include "republisher/server.h"

#include "republisher/archive_keeper.h"
#include "republisher/content_server.h"
#include "republisher/discovery.h"
#include "republisher/document_renderer.h"
#include "republisher/dump_builder.h"
#include "republisher/list_keeper.h"
#include "republisher/responses.h"
#include "republisher/shelf.h"

namespace tributary::pub {

struct Republisher::Impl {
  PublishOptions options;
  UrlScheme urls;
  Shelf shelf;
  ContentServer content;
  ArchiveKeeper archives;
  DocumentRenderer renderer;
  ListKeeper lists;
  DumpBuilder dumps;
  OaiProvider oai;
  ChangeDiscovery discovery;

  Impl(std::shared_ptr<store::StoreReader> reader, std::shared_ptr<store::BlobStore> blobs, PublishOptions o,
       std::shared_ptr<store::StoreReader> lookups)
      : options(std::move(o)), urls(options.public_url), content(lookups ? lookups : reader, blobs, urls),
        archives(options, blobs, urls, shelf),
        renderer(options, reader, urls, shelf, content, [this] { lists.wake(); }),
        lists(options, lookups ? lookups : reader, urls, shelf, archives, [this] { renderer.request(true); }),
        dumps(options, reader, blobs, urls, shelf, [this] { renderer.request(true); }),
        oai(options.oai, lookups ? lookups : reader, blobs, urls, options.named_sets),
        discovery(lookups ? lookups : reader, urls, shelf, options.change_list_part) {}

  // A request: its path routed once (UrlScheme::route), the hub's kinds to
  // the hub, the kinds that wait on the disk or the database to a worker at
  // once, then one handler per kind; a 404 under a removed set becomes 410.
  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block);
  http::Disposition serve_route(const http::Request& req, http::Response& res, const Route& route, bool can_block);
  // A document of the renderer's or the Resource List keeper's, by decoded
  // path; nullopt when there is none.
  std::optional<http::Disposition> serve_rendered(const http::Request& req, http::Response& res,
      const std::string& path, bool can_block);
};

namespace {


// Whether a kind's handler waits on the disk or the database whatever it
// finds: sent to a worker before anything else is done for it. (Documents
// and resources decide for themselves: most are answered from memory.)
// An archive or a document it names: read from the database.
bool is_archive(RouteKind kind) {
  switch (kind) {
  case RouteKind::change_list_archive:
  case RouteKind::resource_list_archive:
  case RouteKind::change_dump_archive:
  case RouteKind::archived_change_dump:
  case RouteKind::archived_resource_list:
  case RouteKind::archived_resource_list_part:
    return true;
  default:
    return false;
  }
}

// A dump package or manifest: a file opened, or a blob the database names.
bool is_dump_file(RouteKind kind) {
  return kind == RouteKind::resource_dump_package || kind == RouteKind::change_dump_package ||
         kind == RouteKind::change_dump_manifest;
}

bool needs_worker(RouteKind kind) {
  return is_archive(kind) || is_dump_file(kind) || kind == RouteKind::oai || kind == RouteKind::activity_collection ||
         kind == RouteKind::activity_page;
}

http::Disposition not_found(http::Response& res) {
  res.status = 404;
  return http::Disposition::done;
}

// What a handler that may find nothing answered, or 404.
http::Disposition or_not_found(std::optional<http::Disposition> d, http::Response& res) {
  return d ? *d : not_found(res);
}

} // namespace

auto Republisher::Impl::handle(const http::Request& req, http::Response& res, bool can_block) -> http::Disposition {
  const Route route = urls.route(req.path);
  // The hub and its topics (subscription requests are queued: nothing
  // here waits).
  if ((route.kind == RouteKind::hub || route.kind == RouteKind::change_notification ||
       route.kind == RouteKind::framework_notification) &&
      options.hub && options.hub->handle(req, res)) {
    return http::Disposition::done;
  }
  if (route.kind == RouteKind::oai && options.oai.enabled) {
    // OAI-PMH takes a POST too; every answer reads the database.
    if (!can_block) {
      return http::Disposition::blocking;
    }
    oai.serve(req, res);
    return http::Disposition::done;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    return http::Disposition::done;
  }
  if (route.kind == RouteKind::malformed) {
    res.status = 400;
    return http::Disposition::done;
  }
  if (!can_block && needs_worker(route.kind)) {
    return http::Disposition::blocking;
  }
  const http::Disposition d = serve_route(req, res, route, can_block);
  if (d == http::Disposition::done && res.status == 404 && !route.set.empty() && shelf.removed_set(route.set)) {
    // The source was removed from this aggregator: a follower is told it
    // is gone for good, not that it is missing for now.
    res.status = 410;
    res.set_body("This source was removed from the aggregator; its documents are gone.\n",
                 "text/plain; charset=utf-8");
  }
  return d;
}

auto Republisher::Impl::serve_route(const http::Request& req, http::Response& res, const Route& route,
    bool can_block) -> http::Disposition {
  if (is_archive(route.kind)) {
    return or_not_found(archives.serve(req, res, route, can_block), res);
  }
  switch (route.kind) {
  case RouteKind::resource:
    return content.serve(req, res, route.set, route.part, can_block);
  case RouteKind::source_description:
  case RouteKind::robots:
  case RouteKind::api_catalog:
  case RouteKind::capability_list:
  case RouteKind::resource_list:
  case RouteKind::resource_list_part:
  case RouteKind::change_list:
  case RouteKind::change_list_index:
    return or_not_found(serve_rendered(req, res, route.path, can_block), res);
  case RouteKind::change_list_part:
    // Live, or archived once retention compacted it: the same URL.
    if (auto d = serve_rendered(req, res, route.path, can_block)) {
      return *d;
    }
    return or_not_found(archives.serve(req, res, route, can_block), res);
  case RouteKind::resource_dump:
  case RouteKind::change_dump:
    if (auto d = serve_rendered(req, res, route.path, can_block)) {
      return *d;
    }
    if (options.shared_dumps) {
      return or_not_found(dumps.serve_shared_document(res, route, can_block), res);
    }
    return not_found(res);
  case RouteKind::change_dump_package:
  case RouteKind::change_dump_manifest:
    // A compacted part's package is archived, at the same URL.
    if (auto d = archives.serve(req, res, route, can_block)) {
      return *d;
    }
    return dumps.serve_file(res, route, can_block);
  case RouteKind::resource_dump_package:
    return dumps.serve_file(res, route, can_block);
  case RouteKind::activity_collection:
  case RouteKind::activity_page:
    return discovery.serve(req, res, route);
  default: // the archives (above), the hub's kinds (answered by the hub), not ours
    break;
  }
  return not_found(res);
}

auto Republisher::Impl::serve_rendered(const http::Request& req, http::Response& res, const std::string& path,
    bool can_block) -> std::optional<http::Disposition> {
  if (auto doc = shelf.document(path)) {
    return serve_document(req, res, doc, can_block);
  }
  return std::nullopt;
}

Republisher::Republisher(std::shared_ptr<store::StoreReader> reader, std::shared_ptr<store::BlobStore> blobs,
                         PublishOptions options, std::shared_ptr<store::StoreReader> lookups)
    : m_impl(std::make_unique<Impl>(std::move(reader), std::move(blobs), std::move(options), std::move(lookups))) {}

Republisher::~Republisher() { stop(); }

Result<void> Republisher::start() {
  Impl& m = *m_impl;
  if (auto r = m.renderer.refresh(true); !r) {
    return r;
  }
  m.lists.pass(); // every set has its Resource List before the first request
  if (auto r = m.renderer.refresh(true); !r) { // and is shown with it
    return r;
  }
  m.lists.start();
  m.renderer.start(); // what the first pass asked for is done
  m.dumps.start();
  return {};
}

http::Handler Republisher::handler() {
  Impl* m = m_impl.get();
  return [m](const http::Request& req, http::Response& res, bool can_block) { return m->handle(req, res, can_block); };
}

Result<void> Republisher::archive(const std::vector<store::Compaction>& plan) {
  return m_impl->archives.archive_parts(plan);
}

Republisher::Compactable Republisher::compactable(rs::Timestamp cutoff) { return m_impl->renderer.compactable(cutoff); }

void Republisher::sources_changed() {
  m_impl->renderer.request(true); // every set rendered again: the Source Description lists one less
  m_impl->lists.wake();
}

void Republisher::refresh_soon() {
  m_impl->renderer.request(false);
  m_impl->lists.wake();
}

void Republisher::stop() {
  // The renderer first: it wakes the list keeper, which asks it for a
  // refresh (and the dump builder too); each stop is final.
  m_impl->renderer.stop();
  m_impl->lists.stop();
  m_impl->dumps.stop();
}

} // namespace tributary::pub
