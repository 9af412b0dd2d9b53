#pragma once

// What the push tests share: an upstream Source to which changes are added,
// and a daemon started and waited on until it holds a source.

#include "daemon_client.h"
#include "sync_fixture.h"

#include <string>
#include <vector>

namespace tributary::test {

// The upstream publishes one more resource, created at `t`.
inline void add_resource(Site& site, Upstream& up, std::vector<rs::Entry>& changes, const std::string& path,
                         const std::string& body, rs::Timestamp t) {
  site.put(path, body);
  rs::Entry e = resource_entry(up.url(path), body);
  e.md->change = rs::Change::created;
  e.md->datetime = t;
  changes.push_back(e);
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
}

// An upstream Source holding one resource, to which changes are added.
struct OneResource {
  Upstream up;
  Site site{up};
  std::vector<rs::Entry> changes;
  OneResource() {
    site.put("/res/0.txt", "zero");
    site.publish_start(ts("2026-01-01T00:00:00Z"));
  }
  void add(const std::string& path, const std::string& body, const char* when) {
    add_resource(site, up, changes, path, body, ts(when));
  }
};

// Starts the daemon and waits until its source holds `live` resources.
inline void start_in_sync(TestDaemon& d, const std::string& source, uint64_t live) {
  d.start();
  REQUIRE(wait_for(d.base, [&](const json& st) { return in_sync(st, source, live); }));
}

} // namespace tributary::test
