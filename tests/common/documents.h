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

} // namespace tributary::test
