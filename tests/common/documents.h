#pragma once

// Upstream documents for tests, built with our own writer's model: shared by
// the unit tests (file:// upstreams) and the integration tests (HTTP).
#include "resourcesync/datetime.h"
#include "resourcesync/model.h"

#include <string>

namespace tributary::test {

inline rs::Timestamp ts(const char* s) { return *rs::parse_w3c_datetime(s); }

inline rs::Document make_doc(const char* capability, rs::RootElement root = rs::RootElement::urlset) {
  rs::Document d;
  d.header.root = root;
  d.header.md = rs::Metadata{};
  d.header.md->capability = capability;
  return d;
}

inline rs::Entry cap_entry(const std::string& loc, const char* capability) {
  rs::Entry e{.loc = loc};
  e.md = rs::Metadata{};
  e.md->capability = capability;
  return e;
}

// A Source Description at `up`'s /.well-known/resourcesync naming /caps.xml,
// and a Capability List there offering a Resource List at /rl.xml and
// nothing else, as most ResourceSync Sources in the field do. `Up`: any
// test upstream with url(path) and set_document(path, document).
template <class Up>
void publish_list_only_caps(Up& up) {
  rs::Document sd = make_doc("description");
  sd.entries.push_back(cap_entry(up.url("/caps.xml"), "capabilitylist"));
  up.set_document("/.well-known/resourcesync", sd);
  rs::Document caps = make_doc("capabilitylist");
  caps.entries.push_back(cap_entry(up.url("/rl.xml"), "resourcelist"));
  up.set_document("/caps.xml", caps);
}

} // namespace tributary::test
