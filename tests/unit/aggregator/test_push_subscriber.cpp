// The push subscriber without PostgreSQL: its subscriptions in
// MemoryAuxStore, what was applied in MemoryStore, its requests to the hub
// through a recording fetcher (the integration tests run it over HTTP
// against real hubs and the database).
#include "aggregator/push/subscriber.h"

#include "resourcesync/websub.h"
#include "resourcesync/writer.h"
#include "store/memory_aux_store.h"
#include "store/memory_store.h"
#include "../../common/documents.h"

#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace tributary;
using test::ts;

namespace {

// Answers every request 202 and keeps it.
class RecordingFetcher : public sync::Fetcher {
public:
  struct Sent {
    std::string url;
    std::string method;
    std::string body;
  };
  Result<sync::FetchResponse> fetch(const std::string& url, const sync::FetchOptions& options,
                                    const sync::BodySink&) override {
    std::lock_guard lock(mutex);
    sent.push_back({url, options.method, options.body});
    cv.notify_all();
    sync::FetchResponse r;
    r.status = 202;
    r.final_url = url;
    return r;
  }
  std::optional<Sent> wait_post() {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return !sent.empty(); });
    for (const auto& s : sent) {
      if (s.method == "POST") {
        return s;
      }
    }
    return std::nullopt;
  }
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Sent> sent;
};

const std::string k_topic = "http://up.example/notification/changelist";
const std::string k_hub = "http://up.example/hub";

struct SubscriberRig {
  std::shared_ptr<store::MemoryAuxStore> aux = std::make_shared<store::MemoryAuxStore>();
  std::shared_ptr<store::MemoryStore> st = std::make_shared<store::MemoryStore>();
  std::shared_ptr<RecordingFetcher> fetcher = std::make_shared<RecordingFetcher>();
  std::atomic<int> notified{0};
  // Each notified run reports at once, as the daemon does when it ends:
  // whether it applied something (unset: no report).
  std::optional<bool> applies;
  std::unique_ptr<agg::PushSubscriber> sub;
  int64_t feed = 0;

  explicit SubscriberRig(bool sign = false, const std::string& hub = k_hub) {
    const int64_t src = *st->ensure_source("up", "http://up.example/");
    feed = *st->ensure_feed(src, "http://up.example/caps.xml");
    agg::PushOptions o;
    o.public_url = "http://us.example/";
    o.sign = sign ? "always" : "https";
    agg::PushSubscriber::Hooks hooks;
    hooks.source = [](const std::string& name) -> std::optional<sync::SourceConfig> {
      if (name != "up") {
        return std::nullopt;
      }
      sync::SourceConfig c;
      c.name = "up";
      c.url = "http://up.example/";
      return c;
    };
    hooks.notified = [this](const std::string& source) {
      ++notified;
      if (applies) {
        sub->ran(source, *applies);
      }
    };
    hooks.active = [](const std::string&, bool) {};
    sub = std::make_unique<agg::PushSubscriber>(aux, st, st, fetcher, o, hooks);
    sub->start();
    sub->configured({"up"});
    sub->discovered("up", {sync::NotificationChannel{"http://up.example/caps.xml", k_topic, hub}});
  }
  ~SubscriberRig() { sub->stop(); }

  http::Response call(const std::string& method, const std::string& target, const std::string& body = "",
                      std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::Request req;
    req.method = method;
    req.target = target;
    const auto q = target.find('?');
    req.path = target.substr(0, q);
    req.query = q == std::string::npos ? "" : target.substr(q + 1);
    req.body = body;
    req.headers = std::move(headers);
    http::Response res;
    sub->handle(req, res, true);
    return res;
  }

  // The hub was asked; the subscription is confirmed as a hub would.
  std::string subscribe() {
    auto post = fetcher->wait_post();
    REQUIRE(post);
    CHECK(post->url == k_hub);
    auto form = rs::websub::parse_form(post->body);
    REQUIRE(form);
    CHECK(form->at("hub.mode") == "subscribe");
    CHECK(form->at("hub.topic") == k_topic);
    const std::string callback = form->at("hub.callback");
    REQUIRE(callback.rfind("http://us.example/push/", 0) == 0);
    const std::string path = callback.substr(std::string("http://us.example").size());
    auto res = call("GET", path + "?" + rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", k_topic},
                                                                 {"hub.challenge", "c-42"},
                                                                 {"hub.lease_seconds", "999999999"}}));
    CHECK(res.status == 200);
    CHECK(res.body == "c-42");
    auto subs = *aux->push_subscriptions();
    REQUIRE(subs.size() == 1);
    CHECK(subs[0].state == "active");
    CHECK(subs[0].lease_seconds == 7 * 86400); // never longer than asked
    return path;
  }

  static std::string notification(const char* at) {
    rs::Document d;
    d.header.md = rs::Metadata{};
    d.header.md->capability = "changelist-notification";
    rs::Entry e;
    e.loc = "http://up.example/res/1";
    e.md = rs::Metadata{};
    e.md->change = rs::Change::updated;
    e.md->datetime = ts(at);
    d.entries.push_back(e);
    return rs::write_document(d);
  }

  std::vector<std::pair<std::string, std::string>> link() const {
    return {{"link", "<" + k_hub + ">; rel=\"hub\", <" + k_topic + ">; rel=\"self\""}};
  }
};

} // namespace

TEST_CASE("Push subscriber (no database): it asks the hub, confirms only its own intent, and a notification runs the "
          "source") {
  SubscriberRig rig;
  const std::string path = rig.subscribe();
  // A verification of an intent not pending (asked again, unasked) is refused.
  auto again = rig.call("GET", path + "?" + rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", k_topic},
                                                                     {"hub.challenge", "c-43"}}));
  CHECK(again.status == 404);
  auto foreign = rig.call("GET", "/push/not-a-token?" + rs::websub::encode_form({{"hub.mode", "subscribe"},
                                                                                {"hub.topic", k_topic},
                                                                                {"hub.challenge", "x"}}));
  CHECK(foreign.status == 404);

  auto res = rig.call("POST", path, SubscriberRig::notification("2026-01-02T00:00:00Z"), rig.link());
  CHECK(res.status == 202);
  CHECK(rig.notified == 1);
  CHECK(rig.aux->push_subscriptions()->at(0).notifications == 1);
}

TEST_CASE("Push subscriber (no database): a notification no newer than what was applied, or of a foreign topic, is "
          "acknowledged and ignored") {
  SubscriberRig rig;
  const std::string path = rig.subscribe();
  store::Batch b;
  b.feed_id = rig.feed;
  b.watermark = store::Watermark{};
  b.watermark->last_time = ts("2026-01-05T00:00:00Z");
  REQUIRE(rig.st->apply(b));
  auto old = rig.call("POST", path, SubscriberRig::notification("2026-01-04T00:00:00Z"), rig.link());
  CHECK(old.status == 202);
  CHECK(rig.notified == 0);
  auto other = rig.call("POST", path, SubscriberRig::notification("2026-01-06T00:00:00Z"),
                        {{"link", "<http://elsewhere.example/topic>; rel=\"self\""}});
  CHECK(other.status == 202);
  CHECK(rig.notified == 0);
  const auto s = rig.aux->push_subscriptions()->at(0);
  CHECK(s.ignored == 2);
  CHECK(s.last_note.find("foreign topic") != std::string::npos);
  auto fresh = rig.call("POST", path, SubscriberRig::notification("2026-01-06T00:00:00Z"), rig.link());
  CHECK(fresh.status == 202);
  CHECK(rig.notified == 1);
}

TEST_CASE("Push subscriber (no database): with signing, an unsigned or forged notification is ignored") {
  SubscriberRig rig(true);
  auto post = rig.fetcher->wait_post();
  REQUIRE(post);
  auto form = rs::websub::parse_form(post->body);
  REQUIRE(form);
  REQUIRE(form->count("hub.secret"));
  const std::string secret = form->at("hub.secret");
  CHECK(secret.size() >= 32);
  const std::string path = rig.subscribe();
  const std::string body = SubscriberRig::notification("2026-01-02T00:00:00Z");
  rig.call("POST", path, body, rig.link());
  auto forged = rig.link();
  forged.emplace_back("x-hub-signature", rs::websub::signature("wrong", body));
  rig.call("POST", path, body, forged);
  CHECK(rig.notified == 0);
  auto good = rig.link();
  good.emplace_back("x-hub-signature", rs::websub::signature(secret, body));
  CHECK(rig.call("POST", path, body, good).status == 202);
  CHECK(rig.notified == 1);
}

TEST_CASE("Push subscriber (no database): notified runs that apply nothing widen the gap, so a flood starts a handful "
          "of runs, and a run that applies something closes it") {
  SubscriberRig rig;
  rig.applies = false;
  const std::string path = rig.subscribe();
  const auto start = std::chrono::steady_clock::now();
  int posts = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(3500)) {
    rig.call("POST", path, SubscriberRig::notification("2026-01-02T00:00:00Z"), rig.link());
    ++posts;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // About 35 notifications in 3.5 s: runs at 0 s, then after gaps of 1 s
  // and 2 s (a held notification starts one when its gap ends).
  CHECK(posts >= 30);
  CHECK(rig.notified >= 2);
  CHECK(rig.notified <= 3);
  // A run that applies something: the next notification runs at once.
  const int before = rig.notified;
  rig.applies = true;
  rig.call("POST", path, SubscriberRig::notification("2026-01-02T00:00:00Z"), rig.link());
  for (int i = 0; i < 100 && rig.notified == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // held until the gap (at most 4 s) ends
  }
  REQUIRE(rig.notified == before + 1);
  rig.call("POST", path, SubscriberRig::notification("2026-01-02T00:00:00Z"), rig.link());
  CHECK(rig.notified == before + 2);
  rig.call("POST", path, SubscriberRig::notification("2026-01-02T00:00:00Z"), rig.link());
  CHECK(rig.notified == before + 3);
}

TEST_CASE("Push subscriber (no database): by default a hub reached over https is given a secret, one over http none") {
  {
    SubscriberRig rig(false, "https://up.example/hub");
    auto post = rig.fetcher->wait_post();
    REQUIRE(post);
    CHECK(post->url == "https://up.example/hub");
    CHECK(rs::websub::parse_form(post->body)->count("hub.secret") == 1);
  }
  {
    SubscriberRig rig;
    auto post = rig.fetcher->wait_post();
    REQUIRE(post);
    CHECK(rs::websub::parse_form(post->body)->count("hub.secret") == 0);
  }
}
