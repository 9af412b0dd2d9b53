#include "republisher/shelf.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

using namespace tributary;
using pub::CachedDocument;
using pub::ListsView;
using pub::RenderedView;
using pub::Shelf;

namespace {

std::shared_ptr<const CachedDocument> doc(const std::string& body) { return pub::cached(body, "application/xml"); }

std::shared_ptr<const RenderedView> rendered(std::initializer_list<std::string> sets,
                                             std::initializer_list<std::pair<std::string, std::string>> docs) {
  auto v = std::make_shared<RenderedView>();
  auto feeds = std::make_shared<pub::SetFeeds>();
  for (const auto& s : sets) {
    (*feeds)[s] = {1};
  }
  v->set_feeds = feeds;
  for (const auto& [path, body] : docs) {
    v->documents[path] = doc(body);
  }
  return v;
}

std::shared_ptr<const ListsView> lists(std::initializer_list<std::pair<std::string, std::string>> set_and_path) {
  auto v = std::make_shared<ListsView>();
  for (const auto& [set, path] : set_and_path) {
    v->sets.insert(set);
    v->documents[path] = ListsView::Listed{set, doc("list of " + set)};
  }
  return v;
}

} // namespace

TEST_CASE("Shelf: a path is answered from the renderer's view, else the list keeper's, whole views swapped") {
  Shelf shelf;
  CHECK(shelf.document("/.well-known/resourcesync") == nullptr);
  shelf.put(rendered({"a"}, {{"/.well-known/resourcesync", "one"}, {"/sets/a/capabilitylist.xml", "cap a"}}));
  shelf.put(lists({{"a", "/sets/a/resourcelist.xml"}}));
  REQUIRE(shelf.document("/sets/a/capabilitylist.xml"));
  CHECK(shelf.document("/sets/a/capabilitylist.xml")->body == "cap a");
  REQUIRE(shelf.document("/sets/a/resourcelist.xml"));
  CHECK(shelf.document("/sets/a/resourcelist.xml")->body == "list of a");
  CHECK(shelf.document("/sets/b/capabilitylist.xml") == nullptr);

  // A reader holding the old view keeps it whole while a new one is put.
  const auto before = shelf.rendered();
  shelf.put(rendered({"a"}, {{"/.well-known/resourcesync", "two"}}));
  CHECK(before->documents.at("/.well-known/resourcesync")->body == "one");
  CHECK(shelf.document("/.well-known/resourcesync")->body == "two");
  CHECK(shelf.document("/sets/a/capabilitylist.xml") == nullptr); // the new view has none
}

TEST_CASE("Shelf: a Resource List goes with its set, when the renderer stops publishing it, not at the keeper's next pass") {
  Shelf shelf;
  shelf.put(rendered({"a", "b"}, {}));
  shelf.put(lists({{"a", "/sets/a/resourcelist.xml"}, {"b", "/sets/b/resourcelist.xml"}}));
  CHECK(shelf.document("/sets/b/resourcelist.xml") != nullptr);
  shelf.put(rendered({"a"}, {})); // b removed from the configuration
  CHECK(shelf.document("/sets/b/resourcelist.xml") == nullptr);
  CHECK(shelf.document("/sets/a/resourcelist.xml") != nullptr);
  // A set waiting to be shown (the renderer publishes its feeds, the
  // Source Description not yet) has its list served as soon as it is kept.
  shelf.put(rendered({"a", "c"}, {}));
  shelf.put(lists({{"a", "/sets/a/resourcelist.xml"}, {"c", "/sets/c/resourcelist.xml"}}));
  CHECK(shelf.document("/sets/c/resourcelist.xml") != nullptr);
}

TEST_CASE("Shelf: a removed source's sets are gone, its first set and its NAME-<n> ones, not another source's") {
  Shelf shelf;
  CHECK_FALSE(shelf.removed_set("arxiv"));
  shelf.put_removed_sources({"arxiv"});
  CHECK(shelf.removed_set("arxiv"));
  CHECK(shelf.removed_set("arxiv-2"));
  CHECK(shelf.removed_set("arxiv-17"));
  CHECK_FALSE(shelf.removed_set("arxiv-x"));
  CHECK_FALSE(shelf.removed_set("arxiv-"));
  CHECK_FALSE(shelf.removed_set("zenodo"));
  CHECK_FALSE(shelf.removed_set("arx"));
}

TEST_CASE("Shelf: views put on one thread while another reads are read whole") {
  Shelf shelf;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) {
      auto v = std::make_shared<RenderedView>();
      for (int j = 0; j < 5; ++j) {
        v->documents["/d" + std::to_string(j)] = doc(std::to_string(i));
      }
      shelf.put(std::shared_ptr<const RenderedView>(std::move(v)));
    }
    stop = true;
  });
  size_t torn = 0;
  while (!stop) {
    const auto v = shelf.rendered();
    if (v->documents.empty()) {
      continue;
    }
    const std::string first = v->documents.begin()->second->body;
    for (const auto& [path, d] : v->documents) {
      torn += d->body != first;
    }
  }
  writer.join();
  CHECK(torn == 0);
}
