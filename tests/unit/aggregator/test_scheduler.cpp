#include "aggregator/daemon/scheduler.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::agg;
using namespace std::chrono_literals;
using store::RunMode;

namespace {

sync::SourceConfig source(const std::string& name, std::chrono::seconds interval = 600s,
                          std::chrono::seconds audit = 0s) {
  sync::SourceConfig s;
  s.name = name;
  s.url = "http://" + name + ".example/";
  s.interval = interval;
  s.audit_interval = audit;
  return s;
}

const Time t0 = Time(std::chrono::hours(24 * 365 * 56));

std::vector<std::string> names(const std::vector<Job>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs) {
    out.push_back(j.source);
  }
  return out;
}

} // namespace

TEST_CASE("Scheduler: new sources are due at once, at most `slots` run, and none twice at once") {
  Scheduler s(1);
  s.configure({source("a"), source("b"), source("c")}, t0);
  auto first = s.due(t0, 2);
  CHECK(names(first) == std::vector<std::string>{"a", "b"});
  CHECK(first[0].mode == RunMode::incremental);
  CHECK(s.due(t0, 2).empty()); // both slots busy
  s.finished("a", RunMode::incremental, true, t0 + 1s);
  CHECK(names(s.due(t0 + 1s, 2)) == std::vector<std::string>{"c"}); // not a again
}

TEST_CASE("Scheduler: after a success a source is due again after its interval, with at most 10 percent jitter") {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Scheduler s(seed);
    s.configure({source("a", 600s)}, t0);
    REQUIRE(s.due(t0, 1).size() == 1);
    s.finished("a", RunMode::incremental, true, t0);
    CHECK(s.due(t0 + 539s, 1).empty());
    CHECK(s.due(t0 + 661s, 1).size() == 1);
  }
}

TEST_CASE("Scheduler: failures back off exponentially, capped, and a success recovers") {
  CHECK(Scheduler::backoff(1, 60s) == 30s);
  CHECK(Scheduler::backoff(2, 60s) == 60s);
  CHECK(Scheduler::backoff(3, 60s) == 120s);
  CHECK(Scheduler::backoff(8, 60s) == 3600s);
  CHECK(Scheduler::backoff(40, 60s) == 3600s);
  CHECK(Scheduler::backoff(40, 7200s) == 7200s);
  Scheduler s(2);
  s.configure({source("a", 60s)}, t0);
  Time now = t0;
  for (unsigned f = 1; f <= 4; ++f) {
    REQUIRE(s.due(now, 1).size() == 1);
    s.finished("a", RunMode::incremental, false, now);
    CHECK(s.view()[0].state == SourceState::backing_off);
    CHECK(s.view()[0].consecutive_failures == f);
    const auto wait = Scheduler::backoff(f, 60s);
    CHECK(s.due(now + wait * 9 / 10 - 1s, 1).empty());
    now += wait + wait / 10 + 1s;
  }
  REQUIRE(s.due(now, 1).size() == 1);
  s.finished("a", RunMode::incremental, true, now);
  CHECK(s.view()[0].state == SourceState::idle);
  CHECK(s.view()[0].consecutive_failures == 0);
}

TEST_CASE("Scheduler: audits come every audit_interval, requests jump the queue, disabled sources never run") {
  Scheduler s(3);
  auto off = source("off");
  off.enabled = false;
  s.configure({source("a", 60s, 3600s), source("b", 60s), off}, t0);
  CHECK(names(s.due(t0, 5)) == std::vector<std::string>{"a", "b"});
  s.finished("a", RunMode::incremental, true, t0);
  s.finished("b", RunMode::incremental, true, t0);
  for (const Job& j : s.due(t0 + 3601s, 5)) {
    CHECK(j.mode == (j.source == "a" ? RunMode::audit : RunMode::incremental));
    s.finished(j.source, j.mode, true, t0 + 3602s);
  }
  CHECK(s.request("b", RunMode::baseline) == Scheduler::Request::queued);
  CHECK(s.request("off", RunMode::baseline) == Scheduler::Request::disabled);
  CHECK(s.request("zzz", RunMode::baseline) == Scheduler::Request::unknown);
  auto jobs = s.due(t0 + 3602s, 1);
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].source == "b");
  CHECK(jobs[0].mode == RunMode::baseline);
  CHECK(jobs[0].requested);
  for (const auto& v : s.view()) {
    if (v.name == "off") {
      CHECK(v.state == SourceState::disabled);
    }
  }
}

TEST_CASE("Scheduler: reconfiguring adds, removes and keeps timing, and a removed source's running job is ignored") {
  Scheduler s(4);
  s.configure({source("a", 600s), source("b", 600s)}, t0);
  REQUIRE(s.due(t0, 5).size() == 2);
  s.finished("a", RunMode::incremental, true, t0);
  s.configure({source("a", 600s), source("c", 600s)}, t0 + 10s);
  CHECK(s.source("b") == nullptr);
  s.finished("b", RunMode::incremental, true, t0 + 11s); // ignored, no crash
  CHECK(names(s.due(t0 + 12s, 5)) == std::vector<std::string>{"c"}); // a keeps its timing
  REQUIRE(s.view().size() == 2);
}

TEST_CASE("Scheduler: a source removed and added back while it runs is not started again until that run ends") {
  // Two SIGHUPs in a row: the daemon used to start a second run of the
  // source and assign it over the first run's thread (std::terminate).
  Scheduler s(5);
  s.configure({source("a", 600s)}, t0);
  REQUIRE(names(s.due(t0, 5)) == std::vector<std::string>{"a"});
  s.configure({}, t0 + 1s);
  CHECK(s.view().empty());
  CHECK(s.source("a") == nullptr);
  CHECK(s.due(t0 + 2s, 5).empty());
  s.configure({source("a", 600s)}, t0 + 3s);
  CHECK(s.due(t0 + 4s, 5).empty()); // still running
  REQUIRE(s.view().size() == 1);
  CHECK(s.view()[0].state == SourceState::syncing);
  s.finished("a", RunMode::incremental, true, t0 + 5s);
  CHECK(s.due(t0 + 6s, 5).empty()); // due after its interval, as usual
  CHECK(names(s.due(t0 + 5s + 660s, 5)) == std::vector<std::string>{"a"});

  // Removed while running and never added back: gone once it finishes; the
  // slot it held is counted until then.
  s.configure({source("b", 600s)}, t0 + 700s);
  CHECK(names(s.due(t0 + 700s, 1)).empty()); // a still holds the only slot
  s.finished("a", RunMode::incremental, true, t0 + 701s);
  CHECK(names(s.due(t0 + 702s, 1)) == std::vector<std::string>{"b"});
  CHECK(s.view().size() == 1);
}

TEST_CASE("Scheduler: a source another process holds is shown busy and tried again soon, with no back-off") {
  Scheduler s(6);
  s.configure({source("a", 600s)}, t0);
  REQUIRE(s.due(t0, 5).size() == 1);
  s.busy("a", t0 + 1s);
  REQUIRE(s.view().size() == 1);
  CHECK(s.view()[0].state == SourceState::busy);
  CHECK(s.view()[0].consecutive_failures == 0);
  CHECK(s.due(t0 + 2s, 5).empty());
  REQUIRE(s.due(t0 + 1s + Scheduler::k_busy_retry, 5).size() == 1);
  s.finished("a", RunMode::incremental, true, t0 + 40s);
  CHECK(s.view()[0].state == SourceState::idle);
}

TEST_CASE("Scheduler: stalled runs leave one slot for the others, up to twice the slots in all") {
  Scheduler s(1);
  s.configure({source("s1"), source("s2"), source("s3"), source("s4"), source("healthy", 2s)}, t0);
  // Four Sources that never answer take the four slots first.
  CHECK(names(s.due(t0, 4)) == std::vector<std::string>{"healthy", "s1", "s2", "s3"});
  s.finished("healthy", RunMode::incremental, true, t0 + 1s);
  CHECK(names(s.due(t0 + 1s, 4)) == std::vector<std::string>{"s4"});
  // While their runs move, they hold every slot.
  CHECK(s.due(t0 + 3s, 4, 0).empty());
  // Once they look stalled, one slot is left for the rest.
  auto next = s.due(t0 + 3s, 4, 4);
  CHECK(names(next) == std::vector<std::string>{"healthy"});
  CHECK(s.due(t0 + 3s, 4, 4).empty()); // and only one
  s.finished("healthy", RunMode::incremental, true, t0 + 4s);
  CHECK(names(s.due(t0 + 6s, 4, 4)) == std::vector<std::string>{"healthy"});
  // Never more than twice the slots: 4 stalled + 4 more at most.
  Scheduler many(1);
  std::vector<sync::SourceConfig> all;
  for (int i = 0; i < 12; ++i) {
    all.push_back(source("x" + std::to_string(10 + i)));
  }
  many.configure(all, t0);
  size_t started = many.due(t0, 4).size();
  for (int round = 0; round < 10; ++round) {
    started += many.due(t0 + std::chrono::seconds(round + 1), 4, started).size();
  }
  CHECK(started == 8);
}

TEST_CASE("Scheduler: sources whose last run stalled count as stalled from their next start, so that four of them "
          "due together leave a slot for a healthy one") {
  Scheduler s(1);
  s.configure({source("s1"), source("s2"), source("s3"), source("s4")}, t0);
  CHECK(s.due(t0, 4).size() == 4);
  for (const char* n : {"s1", "s2", "s3", "s4"}) {
    s.stalled(n); // each seen stalled, then cut off and failed
    s.finished(n, RunMode::incremental, false, t0 + 60s);
  }
  // They come due again together: they start, but hold three slots, not
  // four, though none of them looks stalled yet.
  const auto later = t0 + 3600s;
  CHECK(s.due(later, 4).size() == 4);
  s.configure({source("s1"), source("s2"), source("s3"), source("s4"), source("healthy", 2s)}, later);
  CHECK(names(s.due(later, 4)) == std::vector<std::string>{"healthy"});
  s.finished("healthy", RunMode::incremental, true, later + 1s);
  CHECK(names(s.due(later + 4s, 4)) == std::vector<std::string>{"healthy"});
  // Runs that end without stalling: trusted again, they hold a slot each.
  for (const char* n : {"s1", "s2", "s3", "s4", "healthy"}) {
    s.finished(n, RunMode::incremental, true, later + 5s);
  }
  CHECK(s.due(later + 7200s, 4).size() == 4);
  CHECK(s.due(later + 7200s, 4).empty());
}

TEST_CASE("Scheduler: a job that could not reach the database is tried again within seconds, with no back-off, "
          "in its mode, and at once when the database answers") {
  Scheduler s(1);
  s.configure({source("a", 600s), source("b", 600s)}, t0);
  REQUIRE(s.due(t0, 2).size() == 2);
  s.finished("b", RunMode::incremental, true, t0);
  // a: a baseline asked for, failed for the database, three times over.
  for (int i = 0; i < 3; ++i) {
    const Time at = t0 + std::chrono::seconds(10 * i);
    s.wait_for_node("a", RunMode::baseline, at);
    CHECK(s.due(at + 1s, 2).empty());
    auto again = s.due(at + Scheduler::k_node_retry, 2);
    REQUIRE(names(again) == std::vector<std::string>{"a"});
    CHECK(again[0].mode == RunMode::baseline);
  }
  s.wait_for_node("a", RunMode::baseline, t0 + 30s);
  auto v = s.view();
  CHECK(v[0].state == SourceState::waiting);
  CHECK(v[0].consecutive_failures == 0); // no failure of the source's
  // The database answers: due now, not at the retry.
  s.node_back(t0 + 30s);
  CHECK(names(s.due(t0 + 30s, 2)) == std::vector<std::string>{"a"});
  s.finished("a", RunMode::baseline, true, t0 + 31s);
  CHECK(s.view()[0].state == SourceState::idle);
  CHECK(s.due(t0 + 100s, 2).empty()); // b keeps its interval; database_back moved no one else
}

TEST_CASE("Scheduler: each job says why it runs, and requests before a run starts make one run") {
  Scheduler s(3);
  s.configure({source("a", 60s)}, t0);
  auto first = s.due(t0, 1);
  REQUIRE(first.size() == 1);
  CHECK(first[0].trigger == tributary::store::RunTrigger::startup); // the first run since the process began
  // Three notifications and an operator's audit while it runs: one
  // follow-up run, an audit (the strongest asked), the operator's.
  CHECK(s.request("a", RunMode::incremental, tributary::store::RunTrigger::push) == Scheduler::Request::queued);
  CHECK(s.request("a", RunMode::audit, tributary::store::RunTrigger::operator_) == Scheduler::Request::queued);
  CHECK(s.request("a", RunMode::incremental, tributary::store::RunTrigger::push) == Scheduler::Request::queued);
  CHECK(s.due(t0 + 1s, 2).empty()); // never twice at once
  s.finished("a", RunMode::incremental, true, t0 + 2s);
  auto follow = s.due(t0 + 2s, 2);
  REQUIRE(follow.size() == 1);
  CHECK(follow[0].mode == RunMode::audit);
  CHECK(follow[0].trigger == tributary::store::RunTrigger::operator_);
  s.finished("a", RunMode::audit, true, t0 + 3s);
  CHECK(s.due(t0 + 4s, 2).empty()); // nothing more was asked
  // Notifications alone: one push run.
  s.request("a", RunMode::incremental, tributary::store::RunTrigger::push);
  s.request("a", RunMode::incremental, tributary::store::RunTrigger::push);
  auto pushed = s.due(t0 + 5s, 2);
  REQUIRE(pushed.size() == 1);
  CHECK(pushed[0].trigger == tributary::store::RunTrigger::push);
  s.finished("a", RunMode::incremental, true, t0 + 6s);
  auto scheduled = s.due(t0 + 200s, 2);
  REQUIRE(scheduled.size() == 1);
  CHECK(scheduled[0].trigger == tributary::store::RunTrigger::schedule);
}

TEST_CASE("Scheduler: a paused source starts nothing and refuses requests until resumed") {
  Scheduler s(4);
  s.set_paused("a", true); // before it is configured: held from its first sight
  s.configure({source("a", 60s), source("b", 60s)}, t0);
  CHECK(names(s.due(t0, 2)) == std::vector<std::string>{"b"});
  CHECK(s.request("a", RunMode::baseline) == Scheduler::Request::paused);
  CHECK(s.view()[0].state == SourceState::paused);
  CHECK(s.view()[0].paused);
  s.set_paused("a", false);
  auto jobs = s.due(t0 + 1s, 2);
  REQUIRE(names(jobs) == std::vector<std::string>{"a"});
  CHECK(jobs[0].trigger == tributary::store::RunTrigger::startup);
}
