#pragma once

// The behaviour every Store must show, run against MemoryStore (unit tests)
// and PgStore (integration tests, real PostgreSQL).
#include "store/store.h"
#include "store/store_reader.h"

#include <doctest/doctest.h>

#include <functional>
#include <memory>

namespace tributary::test {

inline store::ResourceRecord contract_record(const std::string& uri, uint64_t length) {
  store::ResourceRecord r;
  r.uri = uri;
  r.length = length;
  r.lastmod = *rs::parse_w3c_datetime("2026-01-01T00:00:00.5Z");
  r.hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, uri)}};
  r.links = {rs::Link{.rel = "via", .href = "http://original.example.org/" + std::to_string(length)}};
  r.blob_sha256 = rs::hash_hex(rs::HashAlgorithm::sha256, uri);
  return r;
}

inline void store_contract(const std::function<std::unique_ptr<store::Store>()>& make) {
  using namespace store;
  std::unique_ptr<Store> s = make();
  REQUIRE(s);
  const int64_t source = *s->ensure_source("src", "http://e.org/");
  const int64_t feed = *s->ensure_feed(source, "http://e.org/caps.xml");
  const int64_t run = *s->begin_run(source, RunMode::baseline);

  SUBCASE("ensure_source and ensure_feed are idempotent; feeds are per capability list") {
    CHECK(*s->ensure_source("src", "http://e.org/moved/") == source);
    CHECK(*s->ensure_feed(source, "http://e.org/caps.xml") == feed);
    CHECK(*s->ensure_feed(source, "http://e.org/caps2.xml") != feed);
  }

  SUBCASE("a batch round-trips records and the watermark, and adds to the run's counters") {
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.upserts = {contract_record("http://e.org/a", 1), contract_record("http://e.org/b", 2)};
    b.changes = {ChangeRecord{rs::Change::created, std::nullopt, b.upserts[0]}};
    Watermark w;
    w.last_time = *rs::parse_w3c_datetime("2026-01-02T00:00:00Z");
    w.last_uri = "http://e.org/b";
    w.last_position = 4;
    b.watermark = w;
    b.counters.created = 2;
    b.counters.unchanged = 3;
    auto recorded = s->apply(b);
    REQUIRE(recorded);
    // Changes are counted as logged (one), the rest as the batch gives them.
    CHECK(recorded->created == 1);
    CHECK(recorded->unchanged == 3);
    auto got = s->resources(feed, {"http://e.org/a", "http://e.org/b", "http://e.org/none"});
    REQUIRE(got);
    CHECK(got->size() == 2);
    CHECK(got->at("http://e.org/a") == b.upserts[0]);
    CHECK(*s->watermark(feed) == w);
    CHECK(s->run(run)->counters.created == 1);
    CHECK(s->run(run)->counters.unchanged == 3);
    CHECK(s->watermark(feed + 1000)->last_time == std::nullopt);
  }

  SUBCASE("a batch that names a URI twice is refused whole") {
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.upserts = {contract_record("http://e.org/a", 1), contract_record("http://e.org/a", 2)};
    b.counters.created = 2;
    CHECK_FALSE(s->apply(b));
    CHECK(s->resources(feed, {"http://e.org/a"})->empty());
    CHECK(s->run(run)->counters.created == 0);
  }

  SUBCASE("delete_unseen deletes live resources the run did not see, and sets the watermark") {
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.upserts = {contract_record("http://e.org/a", 1), contract_record("http://e.org/b", 2)};
    b.seen = {"http://e.org/a"};
    REQUIRE(s->apply(b));
    Watermark w;
    w.baseline_at = *rs::parse_w3c_datetime("2026-01-03T00:00:00Z");
    auto n = s->delete_unseen(feed, run, w, 1.0);
    REQUIRE(n);
    CHECK(n->deleted == 1);
    CHECK_FALSE(n->held);
    auto got = s->resources(feed, {"http://e.org/a", "http://e.org/b"});
    CHECK(got->at("http://e.org/a").state == ResourceState::live);
    CHECK(got->at("http://e.org/b").state == ResourceState::deleted);
    CHECK(s->watermark(feed)->baseline_at == w.baseline_at);
    CHECK(s->run(run)->counters.deleted == 1);
  }

  SUBCASE("the mass-deletion guard holds deletions over the share until an operator confirms") {
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.upserts = {contract_record("http://e.org/a", 1), contract_record("http://e.org/b", 2),
                 contract_record("http://e.org/c", 3)};
    b.seen = {"http://e.org/a"};
    REQUIRE(s->apply(b));
    Watermark w;
    w.baseline_at = *rs::parse_w3c_datetime("2026-01-03T00:00:00Z");
    auto n = s->delete_unseen(feed, run, w, 0.5); // 2 of 3 unlisted: over half
    REQUIRE(n);
    CHECK(n->held);
    CHECK(n->deleted == 0);
    CHECK(n->unseen == 2);
    CHECK(n->live == 3);
    CHECK(s->resources(feed, {"http://e.org/b"})->at("http://e.org/b").state == ResourceState::live);
    CHECK(s->watermark(feed)->baseline_at == w.baseline_at); // the watermark moves all the same
    CHECK(s->run(run)->counters.deleted == 0);
    if (auto* reader = dynamic_cast<StoreReader*>(s.get())) {
      auto stats = reader->source_stats();
      REQUIRE(stats);
      for (const auto& st : *stats) {
        if (st.name == "src") {
          REQUIRE(st.deletion_holds.size() == 1);
          CHECK(st.deletion_holds[0].unseen == 2);
          CHECK(st.deletion_holds[0].live == 3);
          CHECK(st.deletion_holds[0].run_id == run);
          CHECK_FALSE(st.deletion_holds[0].confirmed);
        } else {
          CHECK(st.deletion_holds.empty());
        }
      }
    }
    CHECK(s->delete_unseen(feed, run, std::nullopt, 0.5)->held); // held again, still not confirmed
    auto confirmed = s->confirm_deletions(source);
    REQUIRE(confirmed);
    REQUIRE(confirmed->size() == 1);
    CHECK(confirmed->at(0).feed_id == feed);
    n = s->delete_unseen(feed, run, std::nullopt, 0.5);
    REQUIRE(n);
    CHECK_FALSE(n->held);
    CHECK(n->deleted == 2);
    CHECK(s->resources(feed, {"http://e.org/b"})->at("http://e.org/b").state == ResourceState::deleted);
    CHECK(s->confirm_deletions(source)->empty()); // the hold is gone, and so is the confirmation
    if (auto* reader = dynamic_cast<StoreReader*>(s.get())) {
      auto stats = reader->source_stats();
      REQUIRE(stats);
      for (const auto& st : *stats) {
        CHECK(st.deletion_holds.empty());
      }
    }
  }

  SUBCASE("retries: due in order, updated in place, cleared by an upsert, dropped when a listing no longer names them") {
    const Timestamp t0 = *rs::parse_w3c_datetime("2026-01-05T00:00:00Z");
    auto retry = [&](const std::string& uri, int minutes) {
      RetryRecord r;
      r.uri = uri;
      r.entry.loc = uri;
      r.entry.md = rs::Metadata{};
      r.entry.md->hash = {rs::HashValue{"sha-256", std::string(64, 'a')}};
      r.entry.md->length = 12;
      r.change = rs::Change::updated;
      r.change_datetime = *rs::parse_w3c_datetime("2026-01-04T00:00:00.25Z");
      r.reason = "hash mismatch";
      r.next_attempt_at = t0 + std::chrono::minutes(minutes);
      return r;
    };
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.seen = {"http://e.org/r1", "http://e.org/r2"}; // a listing names r1 and r2, not r3
    b.retries = {retry("http://e.org/r1", 2), retry("http://e.org/r2", 1), retry("http://e.org/r3", 30)};
    b.retries[0].change.reset();
    b.retries[0].change_datetime.reset();
    REQUIRE(s->apply(b));
    auto due = s->due_retries(feed, t0 + std::chrono::minutes(5), 10);
    REQUIRE(due);
    REQUIRE(due->size() == 2);
    CHECK(due->at(0) == b.retries[1]); // the earliest due first, every field round-trips
    CHECK(due->at(1) == b.retries[0]);
    CHECK(s->due_retries(feed, t0 + std::chrono::minutes(5), 1)->size() == 1);
    CHECK(s->due_retries(feed, t0, 10)->empty());

    Batch again; // another failure: attempts and time move on
    again.feed_id = feed;
    again.retries = {retry("http://e.org/r2", 60)};
    again.retries[0].attempts = 2;
    REQUIRE(s->apply(again));
    due = s->due_retries(feed, t0 + std::chrono::hours(2), 10);
    REQUIRE(due->size() == 3);
    CHECK(due->at(1).uri == "http://e.org/r3");
    CHECK(due->at(2).attempts == 2);

    Batch stored; // r1 fetched at last
    stored.feed_id = feed;
    stored.upserts = {contract_record("http://e.org/r1", 1)};
    REQUIRE(s->apply(stored));
    due = s->due_retries(feed, t0 + std::chrono::hours(2), 10);
    REQUIRE(due->size() == 2);
    CHECK(due->at(0).uri == "http://e.org/r3");
    if (auto* reader = dynamic_cast<StoreReader*>(s.get())) {
      auto stats = reader->source_stats();
      REQUIRE(stats);
      for (const auto& st : *stats) {
        CHECK(st.retrying == (st.name == "src" ? 2u : 0u));
      }
    }

    // The listing run ends: r3 (not listed by it) is dropped, r2 stays.
    REQUIRE(s->delete_unseen(feed, run, std::nullopt, 1.0));
    due = s->due_retries(feed, t0 + std::chrono::hours(2), 10);
    REQUIRE(due->size() == 1);
    CHECK(due->at(0).uri == "http://e.org/r2");
  }

  SUBCASE("another session sees committed batches") {
    auto other = s->open_session();
    REQUIRE(other);
    Batch b;
    b.feed_id = feed;
    b.upserts = {contract_record("http://e.org/c", 3)};
    REQUIRE((*other)->apply(b));
    CHECK(s->resources(feed, {"http://e.org/c"})->size() == 1);
  }

  SUBCASE("for_each_resource visits every resource of the feed once") {
    Batch b;
    b.feed_id = feed;
    for (int i = 0; i < 30; ++i) {
      b.upserts.push_back(contract_record("http://e.org/r" + std::to_string(i), static_cast<uint64_t>(i)));
    }
    REQUIRE(s->apply(b));
    size_t n = 0;
    REQUIRE(s->for_each_resource(feed, [&](const ResourceRecord&) { ++n; }));
    CHECK(n == 30);
  }

  SUBCASE("the read side: feeds, live resources in pages, one resource, the change log") {
    auto* reader = dynamic_cast<StoreReader*>(s.get());
    REQUIRE(reader);
    Batch b;
    b.feed_id = feed;
    b.upserts = {contract_record("http://e.org/a", 1), contract_record("http://e.org/b", 2),
                 contract_record("http://e.org/c", 3)};
    b.upserts[1].state = ResourceState::deleted;
    b.changes = {ChangeRecord{rs::Change::created, *rs::parse_w3c_datetime("2026-01-01T01:00:00Z"), b.upserts[0]},
                 ChangeRecord{rs::Change::deleted, std::nullopt, b.upserts[1]}};
    REQUIRE(s->apply(b));
    auto feeds = reader->feeds();
    REQUIRE(feeds);
    REQUIRE(feeds->size() == 1);
    CHECK(feeds->at(0).feed_id == feed);
    CHECK(feeds->at(0).source_name == "src");
    CHECK(feeds->at(0).capability_list_url == "http://e.org/caps.xml");
    auto page1 = reader->live_resources(feed, "", 1);
    REQUIRE(page1);
    REQUIRE(page1->size() == 1);
    CHECK(page1->at(0).uri == "http://e.org/a");
    auto page2 = reader->live_resources(feed, page1->at(0).uri, 10);
    REQUIRE(page2);
    REQUIRE(page2->size() == 1); // b is deleted
    CHECK(page2->at(0).uri == "http://e.org/c");
    auto one = reader->resource(feed, "http://e.org/b");
    REQUIRE(one);
    REQUIRE(one->has_value());
    CHECK((*one)->state == ResourceState::deleted);
    CHECK_FALSE(reader->resource(feed, "http://e.org/none")->has_value());
    auto log = reader->changes({feed}, 0, 10);
    REQUIRE(log);
    REQUIRE(log->size() == 2);
    CHECK(log->at(0).change == rs::Change::created);
    CHECK(log->at(0).resource.uri == "http://e.org/a");
    CHECK(log->at(0).resource.hashes == b.upserts[0].hashes);
    CHECK(log->at(0).upstream_datetime == rs::parse_w3c_datetime("2026-01-01T01:00:00Z"));
    CHECK(log->at(1).seq > log->at(0).seq);
    CHECK(log->at(1).recorded_at >= log->at(0).recorded_at);
    CHECK(reader->changes({feed}, log->at(0).seq, 10)->size() == 1);
    CHECK(reader->changes({feed + 1000}, 0, 10)->empty());
    CHECK(*reader->last_seq() == log->at(1).seq);
  }

  SUBCASE("the change log's rule: a change read again or older than the log's last entry is not logged") {
    auto* reader = dynamic_cast<StoreReader*>(s.get());
    REQUIRE(reader);
    auto t = [](const char* text) { return *rs::parse_w3c_datetime(text); };
    ResourceRecord v1 = contract_record("http://e.org/h", 1);
    v1.change_datetime = t("2026-01-01T01:00:00Z");
    ResourceRecord v2 = contract_record("http://e.org/h", 2);
    v2.hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, "v2")}};
    v2.blob_sha256 = rs::hash_hex(rs::HashAlgorithm::sha256, "v2");
    v2.change_datetime = t("2026-01-01T03:00:00Z");
    Batch first;
    first.feed_id = feed;
    first.run_id = run;
    first.upserts = {v2};
    first.changes = {ChangeRecord{rs::Change::created, v1.change_datetime, v1},
                     ChangeRecord{rs::Change::updated, v2.change_datetime, v2}};
    REQUIRE(s->apply(first));
    REQUIRE(reader->changes({feed}, 0, 10)->size() == 2);
    // The same changes read again (an overlap), and an older one between them.
    Batch again = first;
    again.changes.push_back(ChangeRecord{rs::Change::updated, t("2026-01-01T02:00:00Z"), v1});
    REQUIRE(s->apply(again));
    CHECK(reader->changes({feed}, 0, 10)->size() == 2);
    // A deletion by a listing that no longer names it: logged once, dated by
    // the list; the old update read again after it logs nothing.
    const int64_t listing = *s->begin_run(source, RunMode::baseline);
    Watermark w;
    w.baseline_at = t("2026-01-01T04:00:00Z");
    REQUIRE(s->delete_unseen(feed, listing, w, 1.0));
    auto log = reader->changes({feed}, 0, 10);
    REQUIRE(log->size() == 3);
    CHECK(log->at(2).change == rs::Change::deleted);
    CHECK(log->at(2).upstream_datetime == w.baseline_at);
    CHECK((*reader->resource(feed, "http://e.org/h"))->change_datetime == w.baseline_at);
    REQUIRE(s->apply(again));
    CHECK(reader->changes({feed}, 0, 10)->size() == 3);
  }

  SUBCASE("a run goes from running to its final status") {
    CHECK(s->run(run)->status == RunStatus::running);
    REQUIRE(s->record_error(run, "http://e.org/x", "HTTP 404"));
    REQUIRE(s->finish_run(run, RunStatus::partial, "1 failed", RunMode::baseline));
    auto info = s->run(run);
    REQUIRE(info);
    CHECK(info->status == RunStatus::partial);
    CHECK(info->message == "1 failed");
    CHECK(info->finished_at.has_value());
    CHECK_FALSE(s->run(run + 1000));
  }

  SUBCASE("a run is recorded as what it turned out to be (a first incremental run baselines)") {
    const int64_t first = *s->begin_run(source, RunMode::incremental);
    CHECK(s->run(first)->mode == RunMode::incremental);
    REQUIRE(s->finish_run(first, RunStatus::succeeded, "never synced: baseline first", RunMode::baseline));
    CHECK(s->run(first)->mode == RunMode::baseline);
  }

  SUBCASE("source statistics count live and deleted resources, bytes, the newest change and runs by status") {
    auto* reader = dynamic_cast<StoreReader*>(s.get());
    REQUIRE(reader);
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.upserts = {contract_record("http://e.org/a", 10), contract_record("http://e.org/b", 20),
                 contract_record("http://e.org/c", 40)};
    b.upserts[2].state = ResourceState::deleted;
    Watermark w;
    w.last_time = *rs::parse_w3c_datetime("2026-03-04T05:06:07Z");
    b.watermark = w;
    REQUIRE(s->apply(b));
    REQUIRE(s->finish_run(run, RunStatus::succeeded, "ok", RunMode::baseline));
    const int64_t failed = *s->begin_run(source, RunMode::incremental);
    REQUIRE(s->finish_run(failed, RunStatus::failed, "HTTP 503", RunMode::incremental));
    const int64_t running = *s->begin_run(source, RunMode::audit);
    const int64_t other = *s->ensure_source("another", "http://f.org/");
    auto stats = reader->source_stats();
    REQUIRE(stats);
    REQUIRE(stats->size() == 2);
    CHECK(stats->at(0).name == "another");
    CHECK(stats->at(0).source_id == other);
    CHECK(stats->at(0).live == 0);
    CHECK_FALSE(stats->at(0).last_run);
    const SourceStats& st = stats->at(1);
    CHECK(st.name == "src");
    CHECK(st.live == 2);
    CHECK(st.deleted == 1);
    CHECK(st.bytes == 30);
    CHECK(st.newest_change == w.last_time);
    REQUIRE(st.last_success);
    CHECK(st.last_success->id == run);
    REQUIRE(st.last_failure);
    CHECK(st.last_failure->id == failed);
    CHECK(st.last_failure->message == "HTTP 503");
    REQUIRE(st.last_run);
    CHECK(st.last_run->id == running);
    auto runs = reader->recent_runs("src", 2);
    REQUIRE(runs);
    REQUIRE(runs->size() == 2);
    CHECK(runs->at(0).id == running);
    CHECK(runs->at(1).id == failed);
    CHECK(runs->at(1).source_id == source);
    CHECK(reader->recent_runs("nobody", 5)->empty());
  }
}

} // namespace tributary::test
