// Our WebSub hub without PostgreSQL: subscriptions kept in MemoryAuxStore,
// the change log in MemoryStore, every request to a callback through a
// recording transport (the integration tests run it over HTTP and the
// database).
#include "republisher/hub.h"
#include "republisher/hub_common.h"

#include "records.h"

#include "resourcesync/reader.h"
#include "resourcesync/websub.h"
#include "store/memory_aux_store.h"
#include "store/memory_store.h"

#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>

using namespace tributary;
using namespace tributary::pub;
using test::record;
using test::ts;

namespace {

struct HubRig {
  std::shared_ptr<store::MemoryStore> st = std::make_shared<store::MemoryStore>();
  std::shared_ptr<store::MemoryAuxStore> aux = std::make_shared<store::MemoryAuxStore>();
  UrlScheme urls{"http://us.example/"};
  int64_t feed = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<HubRequest> sent;
  std::vector<std::chrono::steady_clock::time_point> sent_at;
  int delivery_status = 202;
  bool echo = true; // the callback confirms by echoing the challenge
  // Verifications of callbacks on slow.example never answer until released.
  bool released = false;
  std::unique_ptr<Hub> hub;

  explicit HubRig(HubOptions o = {}) {
    const int64_t src = *st->ensure_source("up", "http://up.example/");
    feed = *st->ensure_feed(src, "http://up.example/caps.xml");
    hub = std::make_unique<Hub>(aux, st, urls, [this](const HubRequest& r) { return answer(r); }, o);
    hub->start();
    hub->published({PublishedSet{"up", {feed}}}, *st->last_seq());
  }
  ~HubRig() {
    release();
    hub->stop();
  }

  void release() {
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    cv.notify_all();
  }

  Result<HubReply> answer(const HubRequest& r) {
    std::unique_lock lock(mutex);
    sent.push_back(r);
    sent_at.push_back(std::chrono::steady_clock::now());
    cv.notify_all();
    if (r.method == "POST" && r.url.find(".slow.example/") != std::string::npos) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(400)); // answers, late
      return HubReply{200, ""};
    }
    if (r.method == "GET" && r.url.rfind("http://slow.example/", 0) == 0) {
      cv.wait(lock, [&] { return released; });
      return make_error(ErrorKind::transient, "timed out");
    }
    if (r.method == "GET") {
      const auto q = rs::websub::parse_form(r.url.substr(r.url.find('?') + 1));
      const bool has = q && q->count("hub.challenge");
      return HubReply{200, echo && has ? q->at("hub.challenge") : "no"};
    }
    return HubReply{delivery_status, ""};
  }

  // A change upstream, applied; the hub is told the seq is shown.
  void change(const std::string& uri, const std::string& content, const char* at) {
    store::Batch b;
    b.feed_id = feed;
    b.upserts = {record(uri, content)};
    b.changes = {store::ChangeRecord{rs::Change::updated, ts(at), b.upserts[0]}};
    REQUIRE(st->apply(b));
    hub->published({PublishedSet{"up", {feed}}}, *st->last_seq());
  }

  http::Response request(const std::map<std::string, std::string>& form, const std::string& client = "192.0.2.1") {
    http::Request req;
    req.peer = client;
    req.method = "POST";
    req.path = req.target = urls.path_of(urls.hub());
    req.headers = {{"content-type", "application/x-www-form-urlencoded"}};
    req.body = rs::websub::encode_form(form);
    http::Response res;
    REQUIRE(hub->handle(req, res));
    return res;
  }

  // Waits up to 5 s for a request matching `pred`; returns it.
  std::optional<HubRequest> wait_sent(const std::function<bool(const HubRequest&)>& pred) {
    std::unique_lock lock(mutex);
    std::optional<HubRequest> found;
    cv.wait_for(lock, std::chrono::seconds(5), [&] {
      for (const auto& r : sent) {
        if (pred(r)) {
          found = r;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  bool subscribed(size_t n) {
    for (int i = 0; i < 100; ++i) {
      if (aux->hub_subscriptions()->size() == n) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

const std::string k_callback = "http://subscriber.example/cb?id=1";

} // namespace

TEST_CASE("Hub (no database): a subscription is verified with a challenge, kept, and each change is delivered, signed") {
  HubRig rig;
  const std::string topic = rig.urls.change_notification("up");
  auto res = rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback},
                          {"hub.secret", "s3cret"}, {"hub.lease_seconds", "3600"}});
  CHECK(res.status == 202);
  auto verify = rig.wait_sent([](const HubRequest& r) { return r.method == "GET"; });
  REQUIRE(verify);
  CHECK(verify->url.rfind(k_callback + "&", 0) == 0);
  CHECK(verify->url.find("hub.lease_seconds=3600") != std::string::npos);
  REQUIRE(rig.subscribed(1));
  auto subs = *rig.aux->hub_subscriptions();
  CHECK(subs[0].topic == topic);
  CHECK(subs[0].lease_seconds == 3600);

  rig.change("http://up.example/a", "alpha v2", "2026-01-03T00:00:00Z");
  auto post = rig.wait_sent([](const HubRequest& r) { return r.method == "POST"; });
  REQUIRE(post);
  CHECK(post->url == k_callback);
  auto doc = rs::parse_document(post->body);
  REQUIRE(doc.document.entries.size() == 1);
  CHECK(doc.document.entries[0].loc == rig.urls.resource("up", "http://up.example/a"));
  CHECK(doc.document.header.md->capability_kind() == rs::Capability::changelist_notification);
  bool signed_ok = false;
  for (const auto& [name, value] : post->headers) {
    if (name == "X-Hub-Signature") {
      signed_ok = value == rs::websub::signature("s3cret", post->body);
    }
  }
  CHECK(signed_ok);
  // The cursor moved past what was delivered: nothing is sent again.
  for (int i = 0; i < 100 && rig.aux->hub_subscriptions()->at(0).delivered_seq < *rig.st->last_seq(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(rig.aux->hub_subscriptions()->at(0).delivered_seq == *rig.st->last_seq());
}

TEST_CASE("Hub (no database): a callback that does not echo the challenge, or a foreign topic, subscribes nothing") {
  HubRig rig;
  rig.echo = false;
  CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", rig.urls.change_notification("up")},
                     {"hub.callback", k_callback}})
            .status == 202);
  REQUIRE(rig.wait_sent([](const HubRequest& r) { return r.method == "GET"; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(rig.aux->hub_subscriptions()->empty());

  const size_t asked = rig.sent.size();
  auto foreign = rig.request(
      {{"hub.mode", "subscribe"}, {"hub.topic", "http://elsewhere.example/topic"}, {"hub.callback", k_callback}});
  CHECK(foreign.status == 400);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::lock_guard lock(rig.mutex);
  CHECK(rig.sent.size() == asked); // the callback was not even asked
}

TEST_CASE("Hub (no database): a callback answering 410 Gone is unsubscribed, and an unsubscribe request is verified") {
  HubRig rig;
  const std::string topic = rig.urls.change_notification("up");
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback}});
  REQUIRE(rig.subscribed(1));
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback + "2"}});
  REQUIRE(rig.subscribed(2));
  rig.delivery_status = 410;
  rig.change("http://up.example/b", "bravo v2", "2026-01-03T00:00:00Z");
  REQUIRE(rig.subscribed(0)); // both answered 410
  rig.delivery_status = 202;
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback}});
  REQUIRE(rig.subscribed(1));
  rig.request({{"hub.mode", "unsubscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback}});
  CHECK(rig.subscribed(0));
}

TEST_CASE("Hub (no database): callbacks that never answer hold one verifier, are capped per host and per client, and "
          "a genuine subscriber is verified at once meanwhile") {
  HubRig rig;
  const std::string topic = rig.urls.change_notification("up");
  // One client asks for 15 callbacks on a host that never answers: 10 wait,
  // the rest are refused (429), not queued for hours.
  int accepted = 0, refused = 0;
  for (int i = 0; i < 15; ++i) {
    auto res = rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                            {"hub.callback", "http://slow.example/cb/" + std::to_string(i)}},
                           "198.51.100.7");
    accepted += res.status == 202;
    refused += res.status == 429;
  }
  CHECK(accepted == 10);
  CHECK(refused == 5);
  // The same client, other hosts: its own cap (10 waiting) refuses them too.
  CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", "http://other.example/cb"}},
                    "198.51.100.7")
            .status == 429);
  // Another client's genuine subscription is verified and kept within a
  // second: slow.example holds one verifier, the others are free.
  CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback}}).status == 202);
  CHECK(rig.subscribed(1));
  // slow.example had one verification under way, never two.
  {
    std::lock_guard lock(rig.mutex);
    size_t slow = 0;
    for (const auto& r : rig.sent) {
      slow += r.url.rfind("http://slow.example/", 0) == 0;
    }
    CHECK(slow == 1);
  }
  // Once it answers (here: fails), its intents take their turns and go.
  rig.release();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard lock(rig.mutex);
    size_t slow = 0;
    for (const auto& r : rig.sent) {
      slow += r.url.rfind("http://slow.example/", 0) == 0;
    }
    if (slow == 10) {
      break;
    }
  }
  // Its slots are free again.
  CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", "http://other.example/cb"}},
                    "198.51.100.7")
            .status == 202);
}

TEST_CASE("Hub (no database): one callback host holds at most its quota of subscriptions") {
  HubOptions o;
  o.max_subscriptions_per_host = 3;
  HubRig rig(o);
  const std::string topic = rig.urls.change_notification("up");
  for (int i = 0; i < 5; ++i) {
    CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                       {"hub.callback", "http://q.example/cb/" + std::to_string(i)}},
                      "203.0.113." + std::to_string(i))
              .status == 202);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(rig.aux->hub_subscriptions()->size() == 3);
  // Another host is not held by q.example's quota.
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback}});
  CHECK(rig.subscribed(4));
}

TEST_CASE("Hub (no database): names that resolve to one address count as one host against its quota") {
  HubOptions o;
  o.max_subscriptions_per_host = 3;
  // Five names under five domains, all pointing at one machine; a sixth
  // elsewhere. (The daemon resolves with the system's resolver.)
  o.resolve = [](const std::string& host) {
    return host == "cb.elsewhere.org" ? std::vector<std::string>{"198.51.100.9"}
                                      : std::vector<std::string>{"192.0.2.7", "2001:db8::7"};
  };
  HubRig rig(o);
  const std::string topic = rig.urls.change_notification("up");
  for (int i = 0; i < 5; ++i) {
    CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                       {"hub.callback", "http://cb.domain" + std::to_string(i) + ".example/x"}},
                      "203.0.113." + std::to_string(i))
              .status == 202);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(rig.aux->hub_subscriptions()->size() == 3);
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", "http://cb.elsewhere.org/x"}});
  CHECK(rig.subscribed(4));
}

TEST_CASE("Hub (no database): callbacks under one registrable domain hold at most its quota, whatever their hosts") {
  HubOptions o;
  o.max_subscriptions_per_domain = 3;
  HubRig rig(o);
  const std::string topic = rig.urls.change_notification("up");
  // Five hosts under example.co.uk (a public suffix of two labels): one
  // domain, so three are kept.
  for (int i = 0; i < 5; ++i) {
    CHECK(rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                       {"hub.callback", "http://h" + std::to_string(i) + ".wild.example.co.uk/cb"}},
                      "203.0.113." + std::to_string(i))
              .status == 202);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(rig.aux->hub_subscriptions()->size() == 3);
  // A sibling domain under the same public suffix is not held by it.
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", "http://cb.other.co.uk/x"}});
  CHECK(rig.subscribed(4));
}

TEST_CASE("Hub (no database): callbacks that answer late are served by the slow pool, and a prompt subscriber's "
          "notifications are not held behind them") {
  HubOptions o;
  o.delivery_threads = 1;
  o.slow_delivery_threads = 1;
  o.slow_delivery = std::chrono::milliseconds(100);
  HubRig rig(o);
  const std::string topic = rig.urls.change_notification("up");
  for (int i = 0; i < 4; ++i) {
    rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                 {"hub.callback", "http://h" + std::to_string(i) + ".slow.example/cb"}},
                "203.0.113." + std::to_string(i));
  }
  rig.request({{"hub.mode", "subscribe"}, {"hub.topic", topic}, {"hub.callback", k_callback}});
  REQUIRE(rig.subscribed(5));
  auto posts_to = [&](const std::string& prefix) {
    std::lock_guard lock(rig.mutex);
    size_t n = 0;
    for (const auto& r : rig.sent) {
      n += r.method == "POST" && r.url.rfind(prefix, 0) == 0;
    }
    return n;
  };
  // The first change: nobody is known slow yet; every callback gets it.
  rig.change("http://up.example/a", "alpha v2", "2026-01-03T00:00:00Z");
  for (int i = 0; i < 100 && (posts_to(k_callback) < 1 || posts_to("http://h") < 4); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(posts_to("http://h") == 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(500)); // the last slow answers come
  // The second: the late ones go to the slow pool; the prompt subscriber
  // has it at once, not after four late answers (1.6 s).
  const auto changed = std::chrono::steady_clock::now();
  rig.change("http://up.example/b", "bravo v2", "2026-01-04T00:00:00Z");
  for (int i = 0; i < 100 && posts_to(k_callback) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Two at least: a delivery that timed out on a loaded machine is sent
  // again (at least once is the hub's promise); what counts is when the
  // second change first reached it.
  REQUIRE(posts_to(k_callback) >= 2);
  std::chrono::steady_clock::time_point got;
  {
    std::lock_guard lock(rig.mutex);
    for (size_t k = 0; k < rig.sent.size(); ++k) {
      if (rig.sent[k].method == "POST" && rig.sent[k].url == k_callback && rig.sent_at[k] >= changed) {
        got = rig.sent_at[k];
        break;
      }
    }
  }
  CHECK(got - changed < std::chrono::milliseconds(350));
}

TEST_CASE("Hub: a callback's secret path is scrubbed however the text spells its origin") {
  using tributary::pub::hub_detail::scrubbed;
  const std::string callback = "http://Sub.Example:80/push/s3cr3t-t0ken?k=v";
  for (const std::string& text :
       {std::string("read failed for http://sub.example/push/s3cr3t-t0ken?k=v"),
        std::string("HTTP 500 from http://Sub.Example:80/push/s3cr3t-t0ken?k=v"),
        std::string("connection refused: sub.example:80 (http://sub.example:80/push/s3cr3t-t0ken?k=v)")}) {
    const std::string out = scrubbed(text, callback);
    CHECK_MESSAGE(out.find("s3cr3t") == std::string::npos, out);
    CHECK_MESSAGE(out.find(" #") != std::string::npos, out);
  }
  const std::string with_user = "https://user:pw@sub.example/p/abcdef";
  const std::string out = scrubbed("GET https://user:pw@sub.example/p/abcdef failed", with_user);
  CHECK(out.find("pw") == std::string::npos);
  CHECK(out.find("abcdef") == std::string::npos);
}
