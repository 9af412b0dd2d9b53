// Issue #16: ResourceSync Change Notification over WebSub, both ways, with
// real daemons over real PostgreSQL and HTTP: an upstream Source, Tributary
// A following it (polling), A's hub pushing to Tributary B, which polls only
// hourly. Also the hub's defences (a forged subscription, a callback on a
// private address) and the subscriber's (a bad signature, a foreign topic,
// an old change), a restart of the hub, lease renewal, and a missed
// notification caught by polling.
#include "chromium.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
#include "push_fixture.h"
#include "sync_fixture.h"

#include "tools/simulate/simulate.h"
#include "resourcesync/websub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

using namespace tributary;
using namespace tributary::test;

namespace {

// A upstream of `up`, polling every second, its hub allowed to call back
// on 127.0.0.1 (where B listens).
void configure_a(TestDaemon& a, const std::string& min_lease = "5m") {
  edit_config(a, [&](json& j) {
    j["push"] = {{"callback_allow_hosts", {"127.0.0.1"}}, {"min_lease", min_lease}};
  });
}

// B following A's set "up", polling every `interval` (and, subscribed, no
// more often than `poll`), asking for signed notifications.
void configure_b(TestDaemon& b, const std::string& interval, const std::string& poll, const std::string& lease = "7d") {
  edit_config(b, [&](json& j) {
    j["sources"][0]["interval"] = interval;
    j["push"] = {{"sign", true}, {"poll_interval", poll}, {"lease", lease}};
  });
}

bool b_active(const TestDaemon& b) {
  return scalar(b, "SELECT state FROM push_subscription WHERE source = 'a'") == "active";
}

} // namespace

TEST_CASE("Push: a change travels upstream -> Z -> (Z's hub) -> A -> (A's hub) -> B within about a second while A "
          "and B poll hourly, and a restart of A keeps both subscriptions") {
  OneResource source;
  Upstream& up = source.up;

  // Z: a Source with a hub (a Tributary polling the upstream every second).
  TestDaemon z({{"up", up.url("/")}});
  configure_a(z);
  start_in_sync(z, "up", 1);
  // Its Capability List offers the channel, the topic names the hub.
  auto caps = http_get(z.base + "/sets/up/capabilitylist.xml");
  CHECK(caps.body.find("changelist-notification") != std::string::npos);
  CHECK(caps.body.find(z.base + "/hub") != std::string::npos);
  auto topic = http_get(z.base + "/sets/up/notification/changelist");
  CHECK(topic.status == 200);

  // A follows Z, B follows A, both hourly: only pushes move changes fast.
  TestDaemon a({{"z", z.base + "/.well-known/resourcesync"}});
  configure_b(a, "1h", "1h");
  edit_config(a, [](json& j) { j["push"]["callback_allow_hosts"] = {"127.0.0.1"}; });
  start_in_sync(a, "z", 1);
  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  configure_b(b, "1h", "1h");
  start_in_sync(b, "a", 1);
  REQUIRE(eventually([&] { return scalar(a, "SELECT state FROM push_subscription") == "active"; }, 15));
  REQUIRE(eventually([&] { return b_active(b); }, 15));
  CHECK(eventually([&] { return scalar(a, "SELECT count(*) FROM hub_subscription WHERE secret IS NOT NULL") == "1"; }, 5));
  CHECK(eventually([&] { return scalar(z, "SELECT count(*) FROM hub_subscription WHERE secret IS NOT NULL") == "1"; }, 5));

  // Upstream -> Z by Z's polling (1 s), Z -> A -> B by push.
  for (int i = 1; i <= 3; ++i) {
    source.add("/res/" + std::to_string(i) + ".txt", "body " + std::to_string(i),
                 ("2026-01-02T00:00:0" + std::to_string(i) + "Z").c_str());
    REQUIRE(wait_for(z.base, [&](const json& st) { return in_sync(st, "up", 1 + i); }));
    const auto held_by_z = std::chrono::steady_clock::now();
    REQUIRE(wait_for(b.base, [&](const json& st) { return in_sync(st, "a", 1 + i); }, 10));
    MESSAGE("Z held change " << i << "; B held it " << since(held_by_z) << " s later");
    CHECK(since(held_by_z) < 5.0);
    // (A's status answers are read at most once a second: up to a second old.)
    CHECK(wait_for(a.base, [&](const json& st) {
      const json* z_at_a = find_source(st, "z");
      return z_at_a && (*z_at_a)["resources"]["live"] == 1 + i;
    }, 3));
  }
  // A verification nobody asked for, with B's token and topic, is refused:
  // no lease of a stranger's choosing, no denial with markup in it.
  {
    const std::string b_token = scalar(b, "SELECT token FROM push_subscription WHERE source = 'a'");
    const std::string b_topic = scalar(b, "SELECT topic FROM push_subscription WHERE source = 'a'");
    const std::string lease_before = scalar(b, "SELECT lease_seconds FROM push_subscription WHERE source = 'a'");
    httplib::Client c(b.base);
    auto forged = c.Get(("/push/" + b_token + "?" +
                         rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", b_topic},
                                                  {"hub.challenge", "x"}, {"hub.lease_seconds", "999999999"}}))
                            .c_str());
    REQUIRE(forged);
    CHECK(forged->status == 404);
    auto denied = c.Get(("/push/" + b_token + "?" +
                         rs::websub::encode_form({{"hub.mode", "denied"}, {"hub.topic", b_topic},
                                                  {"hub.reason", "<img src=x onerror=alert(1)>"}}))
                            .c_str());
    REQUIRE(denied);
    CHECK(denied->status == 404);
    CHECK(scalar(b, "SELECT lease_seconds FROM push_subscription WHERE source = 'a'") == lease_before);
    CHECK(b_active(b));
    CHECK(call(b.base, "GET", "/api/v1/push").body.find("<img") == std::string::npos);
  }
  CHECK(std::stoi(scalar(a, "SELECT notifications FROM push_subscription")) >= 3);
  CHECK(std::stoi(scalar(b, "SELECT notifications FROM push_subscription WHERE source = 'a'")) >= 3);
  CHECK(b.log_text().find("push: notification accepted") != std::string::npos);
  // Both ends in the status API and /metrics, without tokens or secrets.
  Answer api = call(b.base, "GET", "/api/v1/push");
  REQUIRE(api.status == 200);
  auto pj = json::parse(api.body);
  REQUIRE(pj["data"]["subscriptions"].size() == 1);
  CHECK(pj["data"]["subscriptions"][0]["state"] == "active");
  CHECK(pj["data"]["subscriptions"][0]["signed"] == true);
  CHECK(pj["data"]["subscriptions"][0]["notifications"].get<int>() >= 3);
  CHECK(api.body.find(scalar(b, "SELECT token FROM push_subscription")) == std::string::npos);
  CHECK(api.body.find(scalar(b, "SELECT secret FROM push_subscription")) == std::string::npos);
  const std::string hub_body = call(a.base, "GET", "/api/v1/status").body;
  auto hub_api = json::parse(hub_body);
  REQUIRE(hub_api["data"]["push"]["subscribers"].size() == 1);
  // B's callback is shown by its origin and a hash: its path holds B's token,
  // B's only credential when signing is off (#35). Nor is it in either log.
  const std::string b_token = scalar(b, "SELECT token FROM push_subscription WHERE source = 'a'");
  REQUIRE(b_token.size() >= 16);
  CHECK(hub_api["data"]["push"]["subscribers"][0]["callback"].get<std::string>().rfind(b.base + " #", 0) == 0);
  CHECK(hub_body.find(b_token) == std::string::npos);
  CHECK(a.log_text().find(b_token) == std::string::npos);
  CHECK(b.log_text().find(b_token) == std::string::npos);
  CHECK(hub_api["data"]["push"]["subscribers"][0]["deliveries"].get<int>() >= 3);
  CHECK(call(b.base, "GET", "/metrics").body.find("tributary_push_subscription_active{source=\"a\"") !=
        std::string::npos);
  CHECK(call(a.base, "GET", "/metrics").body.find("tributary_hub_subscribers 1") != std::string::npos);
  // And on A's status page, rendered by headless Chromium: its subscription
  // to Z, active, and its subscriber B.
  {
    const std::string dom = chromium_dom(a.base + "/status", a.dir / "dom.html", 4000);
    INFO(dom);
    CHECK(dom.find("<tr data-subscription=\"z\"><td>z</td><td>" + z.base + "/sets/up/notification/changelist</td>"
                   "<td><span class=\"state idle\">active</span></td>") != std::string::npos);
    CHECK(dom.find("<tr data-subscriber=\"" + b.base + " #") != std::string::npos);
    CHECK(dom.find(b_token) == std::string::npos);
    CHECK(dom.find("<div id=\"push\">") != std::string::npos); // shown
  }

  // A restarts: both its subscription (to Z) and its subscriber (B) are in
  // its database, so the next change is pushed through without anyone
  // subscribing again.
  const std::string verified_a = scalar(a, "SELECT verified_at FROM push_subscription");
  const std::string verified_b = scalar(b, "SELECT verified_at FROM push_subscription WHERE source = 'a'");
  CHECK(a.stop().second == 0);
  start_in_sync(a, "z", 4);
  source.add("/res/4.txt", "body 4", "2026-01-02T00:00:04Z");
  REQUIRE(wait_for(z.base, [&](const json& st) { return in_sync(st, "up", 5); }));
  const auto held_by_z = std::chrono::steady_clock::now();
  REQUIRE(wait_for(b.base, [&](const json& st) { return in_sync(st, "a", 5); }, 10));
  CHECK(since(held_by_z) < 5.0);
  CHECK(scalar(a, "SELECT verified_at FROM push_subscription") == verified_a);
  CHECK(scalar(b, "SELECT verified_at FROM push_subscription WHERE source = 'a'") == verified_b);
}

TEST_CASE("Push: the hub verifies intent (a forged subscription is refused) and never calls private addresses "
          "it was not allowed") {
  OneResource source;
  Upstream& up = source.up;
  TestDaemon a({{"up", up.url("/")}});
  configure_a(a);
  start_in_sync(a, "up", 1);

  // Two callbacks: one that echoes the challenge (it asked), one that does
  // not (someone subscribed it without asking).
  httplib::Server cb;
  std::atomic<int> asked{0};
  cb.Get("/willing", [&](const httplib::Request& req, httplib::Response& res) {
    ++asked;
    res.set_content(req.get_param_value("hub.challenge"), "text/plain");
  });
  // Deliveries to the willing one: the first two fail (503), then it takes them.
  std::mutex posts_mutex;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> posts;
  cb.Post("/willing", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(posts_mutex);
    posts.emplace_back(std::chrono::steady_clock::now(), req.body);
    res.status = posts.size() <= 2 ? 503 : 204;
  });
  // A subscriber of the framework channel: what it was sent.
  std::vector<std::string> framework_posts;
  cb.Get("/framework", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.get_param_value("hub.challenge"), "text/plain");
  });
  cb.Post("/framework", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(posts_mutex);
    framework_posts.push_back(req.get_header_value("Link") + "\n" + req.body);
    res.status = 204;
  });
  cb.Get("/unwilling", [&](const httplib::Request&, httplib::Response& res) {
    ++asked;
    res.status = 404;
  });
  cb.Get("/wrong", [&](const httplib::Request&, httplib::Response& res) {
    ++asked;
    res.set_content("not the challenge", "text/plain");
  });
  ServerThread running(cb);
  const std::string topic = a.base + "/sets/up/notification/changelist";
  auto form_post = [&](const std::string& body) {
    httplib::Client c(a.base);
    auto r = c.Post("/hub", body, "application/x-www-form-urlencoded");
    return r ? r->status : 0;
  };
  CHECK(form_post(rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                                           {"hub.callback", running.base() + "/unwilling"}})) == 202);
  CHECK(form_post(rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                                           {"hub.callback", running.base() + "/wrong"}})) == 202);
  CHECK(form_post(rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                                           {"hub.callback", running.base() + "/willing"}})) == 202);
  // Refused at once: a topic not ours, a callback that is no URL, no mode.
  CHECK(form_post(rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", "http://elsewhere/t"},
                                           {"hub.callback", running.base() + "/willing"}})) == 400);
  CHECK(form_post(rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                                           {"hub.callback", "javascript:alert(1)"}})) == 400);
  CHECK(form_post("hub.topic=x") == 400);
  REQUIRE(eventually([&] { return asked.load() >= 3; }, 10));
  REQUIRE(eventually([&] { return scalar(a, "SELECT count(*) FROM hub_subscription") == "1"; }, 5));
  CHECK(scalar(a, "SELECT callback FROM hub_subscription") == running.base() + "/willing");
  // The framework channel, as the Capability List names it.
  const std::string framework_topic = a.base + "/sets/up/notification/framework";
  CHECK(http_get(a.base + "/sets/up/capabilitylist.xml").body.find("<loc>" + framework_topic +
                                                                  "</loc><rs:md capability=\"framework-notification\"/>") !=
        std::string::npos);
  CHECK(form_post(rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", framework_topic},
                                           {"hub.callback", running.base() + "/framework"}})) == 202);
  REQUIRE(eventually([&] { return scalar(a, "SELECT count(*) FROM hub_subscription") == "2"; }, 10));

  // A change: delivered, refused twice, retried after 1 s and 2 s with the
  // same content, then taken; nothing more is sent.
  source.add("/res/1.txt", "one", "2026-01-02T00:00:01Z");
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "up", 2); }));
  REQUIRE(eventually([&] {
    std::lock_guard lock(posts_mutex);
    return posts.size() >= 3;
  }, 15));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  {
    std::lock_guard lock(posts_mutex);
    REQUIRE(posts.size() == 3);
    for (const auto& [at, body] : posts) {
      CHECK(body == posts[0].second);
      CHECK(body.find(up.url("/res/1.txt")) != std::string::npos);
    }
    CHECK(std::chrono::duration<double>(posts[1].first - posts[0].first).count() >= 0.9);
    CHECK(std::chrono::duration<double>(posts[2].first - posts[1].first).count() >= 1.9);
  }
  const std::string willing = "WHERE callback LIKE '%/willing'";
  CHECK(scalar(a, "SELECT failures_total FROM hub_subscription " + willing) == "2");
  CHECK(scalar(a, "SELECT failures FROM hub_subscription " + willing) == "0");
  CHECK(scalar(a, "SELECT deliveries FROM hub_subscription " + willing) == "1");
  // The framework subscriber heard that A's Resource List was published
  // again, as a framework-notification naming it.
  REQUIRE(eventually([&] {
    std::lock_guard lock(posts_mutex);
    for (const auto& p : framework_posts) {
      if (p.find("<loc>" + a.base + "/sets/up/resourcelist.xml</loc><rs:md capability=\"resourcelist\" "
                 "change=\"updated\"") != std::string::npos) {
        return true;
      }
    }
    return false;
  }, 10));
  {
    std::lock_guard lock(posts_mutex);
    CHECK(framework_posts[0].rfind(rs::websub::link_header(a.base + "/hub", framework_topic), 0) == 0);
    CHECK(framework_posts[0].find("<rs:md capability=\"framework-notification\"/>") != std::string::npos);
  }

  // A hub allowed no private callback host refuses to call 127.0.0.1 at all.
  TestDaemon strict({{"up", up.url("/")}});
  edit_config(strict, [](json& j) { j["push"] = {{"subscribe", false}}; });
  start_in_sync(strict, "up", 2);
  const int before = asked.load();
  httplib::Client c(strict.base);
  auto r = c.Post("/hub",
                  rs::websub::encode_form({{"hub.mode", "subscribe"},
                                           {"hub.topic", strict.base + "/sets/up/notification/changelist"},
                                           {"hub.callback", running.base() + "/willing"}}),
                  "application/x-www-form-urlencoded");
  REQUIRE(r);
  CHECK(r->status == 202);
  CHECK(eventually([&] { return strict.log_text().find("not verified") != std::string::npos; }, 10));
  CHECK(asked.load() == before);
  CHECK(scalar(strict, "SELECT count(*) FROM hub_subscription") == "0");
}

TEST_CASE("Push: B ignores a notification with a bad signature, a foreign topic or only old changes, renews its "
          "lease, and a notification that never came is caught by polling") {
  OneResource source;
  Upstream& up = source.up;
  TestDaemon a({{"up", up.url("/")}});
  configure_a(a, "1s");
  start_in_sync(a, "up", 1);
  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  // A lease of 4 s: renewed at four fifths of it, again and again.
  configure_b(b, "2s", "6s", "4s");
  start_in_sync(b, "a", 1);
  REQUIRE(eventually([&] { return b_active(b); }, 15));
  const std::string token = scalar(b, "SELECT token FROM push_subscription WHERE source = 'a'");
  const std::string secret = scalar(b, "SELECT secret FROM push_subscription WHERE source = 'a'");
  const std::string topic = scalar(b, "SELECT topic FROM push_subscription WHERE source = 'a'");
  REQUIRE(!secret.empty());

  // Forged notifications, each announcing a change from the future.
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
      "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"changelist-notification\"/>"
      "<url><loc>" + a.base + "/sets/up/resources/x</loc><rs:md change=\"created\" datetime=\"2099-01-01T00:00:00Z\"/>"
      "</url></urlset>";
  auto notify = [&](const std::string& payload, const std::string& signature, const std::string& self) {
    httplib::Client c(b.base);
    httplib::Headers h{{"Link", rs::websub::link_header(a.base + "/hub", self)}};
    if (!signature.empty()) {
      h.emplace("X-Hub-Signature", signature);
    }
    auto r = c.Post(("/push/" + token).c_str(), h, payload, "application/xml");
    return r ? r->status : 0;
  };
  const auto ignored = [&] { return std::stoi(scalar(b, "SELECT ignored FROM push_subscription WHERE source = 'a'")); };
  CHECK(notify(body, "sha256=" + std::string(64, '0'), topic) == 202);
  CHECK(ignored() == 1);
  CHECK(notify(body, "", topic) == 202);
  CHECK(ignored() == 2);
  CHECK(notify(body, rs::websub::signature(secret, body), "http://elsewhere/topic") == 202);
  CHECK(ignored() == 3);
  const std::string old = std::string(body).replace(body.find("2099"), 4, "2001");
  CHECK(notify(old, rs::websub::signature(secret, old), topic) == 202);
  CHECK(ignored() == 4);
  CHECK(b.log_text().find("X-Hub-Signature does not match") != std::string::npos);
  CHECK(b.log_text().find("foreign topic") != std::string::npos);
  CHECK(b.log_text().find("out of order") != std::string::npos);
  CHECK(b.log_text().find("push: notification accepted") == std::string::npos);
  // A request to a callback nobody made: the hub is told to go away.
  httplib::Client c(b.base);
  auto gone = c.Post("/push/0123456789abcdef0123456789abcdef", body, "application/xml");
  REQUIRE(gone);
  CHECK(gone->status == 410);
  auto forged_verify = c.Get(("/push/" + token + "?hub.mode=subscribe&hub.topic=http%3A%2F%2Felsewhere%2Ft&hub.challenge=x")
                                 .c_str());
  REQUIRE(forged_verify);
  CHECK(forged_verify->status == 404);

  // Renewal: after three leases the subscription is still active, verified
  // again, and A still holds it.
  const std::string first = scalar(b, "SELECT verified_at FROM push_subscription WHERE source = 'a'");
  std::this_thread::sleep_for(std::chrono::seconds(9));
  CHECK(b_active(b));
  CHECK(scalar(b, "SELECT verified_at FROM push_subscription WHERE source = 'a'") != first);
  CHECK(scalar(a, "SELECT count(*) FROM hub_subscription WHERE expires_at > now()") == "1");

  // A notification lost on the way (the hub believes it delivered it): the
  // change still reaches B, by its polling every 6 s.
  const std::string pushed = scalar(b, "SELECT notifications FROM push_subscription WHERE source = 'a'");
  {
    pqxx::connection conn(a.db.conninfo());
    pqxx::work tx(conn);
    tx.exec("UPDATE hub_subscription SET delivered_seq = delivered_seq + 1000000");
    tx.commit();
  }
  source.add("/res/1.txt", "one", "2026-01-02T00:00:01Z");
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "up", 2); }));
  CHECK(wait_for(b.base, [&](const json& st) { return in_sync(st, "a", 2); }, 20));
  CHECK(scalar(b, "SELECT notifications FROM push_subscription WHERE source = 'a'") == pushed);

  // The source goes from B's config: B unsubscribes, the hub confirms with
  // B (intent verified again) and drops it.
  edit_config(b, [](json& j) { j["sources"] = json::array(); });
  kill(b.pid, SIGHUP);
  CHECK(eventually([&] { return scalar(a, "SELECT count(*) FROM hub_subscription") == "0"; }, 15));
  CHECK(eventually([&] { return scalar(b, "SELECT count(*) FROM push_subscription") == "0"; }, 5));
  CHECK(b.log_text().find("push: unsubscribed") != std::string::npos);
}

TEST_CASE("Push: tributary simulate --hub pushes every change to A, which polls hourly, and A holds them") {
  agg::SimulateOptions o;
  o.port = 0;
  o.resources = 20;
  o.change_rate = 0; // changes only when the test makes them
  o.hub = true;
  agg::Simulator sim(o);
  REQUIRE(sim.start());
  TestDaemon a({{"sim", sim.base_url() + "/"}});
  configure_b(a, "1h", "1h"); // signed, hourly
  start_in_sync(a, "sim", 20);
  REQUIRE(eventually([&] { return scalar(a, "SELECT state FROM push_subscription") == "active"; }, 15));
  for (int round = 0; round < 3; ++round) {
    sim.change(5);
    const auto made = std::chrono::steady_clock::now();
    const uint64_t live = sim.live();
    REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "sim", live); }, 10));
    MESSAGE("round " << round << ": A held the changes " << since(made) << " s after they were made");
    CHECK(since(made) < 5.0);
  }
  // Every change reached A's change log: the Source's 15 changes after the
  // 20 baselined resources.
  CHECK(std::stoi(scalar(a, "SELECT count(*) FROM change_log")) >= 20 + 15);
  CHECK(std::stoi(scalar(a, "SELECT notifications FROM push_subscription")) >= 3);
  sim.stop();
}

TEST_CASE("Push: with push.external_hub our Capability Lists name that hub and every notification is POSTed to "
          "it, signed with its secret") {
  OneResource source;
  Upstream& up = source.up;
  // The external hub: records what it is sent.
  httplib::Server hub;
  std::mutex got_mutex;
  std::vector<std::pair<std::string, std::string>> got; // (Link, body), signature checked below
  std::vector<std::string> signatures;
  hub.Post("/hub", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(got_mutex);
    got.emplace_back(req.get_header_value("Link"), req.body);
    signatures.push_back(req.get_header_value("X-Hub-Signature"));
    res.status = 204;
  });
  ServerThread running(hub);
  const std::string hub_url = running.base() + "/hub";

  TestDaemon a({{"up", up.url("/")}});
  {
    std::ofstream(a.dir / "hub-secret") << "operator-secret\n";
  }
  edit_config(a, [&](json& j) {
    j["push"] = {{"external_hub", hub_url}, {"external_hub_secret_file", (a.dir / "hub-secret").string()}};
  });
  start_in_sync(a, "up", 1);
  auto caps = http_get(a.base + "/sets/up/capabilitylist.xml");
  CHECK(caps.body.find("<rs:ln rel=\"hub\" href=\"" + hub_url + "\"/>") != std::string::npos);
  CHECK(http_get(a.base + "/sets/up/notification/changelist").body.find(hub_url) != std::string::npos);
  REQUIRE(eventually([&] { return scalar(a, "SELECT count(*) FROM hub_subscription") == "1"; }, 10));

  source.add("/res/1.txt", "one", "2026-01-02T00:00:01Z");
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "up", 2); }));
  REQUIRE(eventually([&] {
    std::lock_guard lock(got_mutex);
    return !got.empty();
  }, 10));
  std::lock_guard lock(got_mutex);
  const std::string topic = a.base + "/sets/up/notification/changelist";
  // Our /hub takes no subscription: our documents send subscribers to the
  // external hub (a stranger's callback on its host is never called).
  httplib::Client c(a.base);
  auto refused = c.Post("/hub", rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                                                         {"hub.callback", running.base() + "/stranger"}}),
                        "application/x-www-form-urlencoded");
  REQUIRE(refused);
  CHECK(refused->status == 404);
  CHECK(refused->body.find(hub_url) != std::string::npos);
  CHECK(scalar(a, "SELECT count(*) FROM hub_subscription") == "1");
  CHECK(got[0].first == rs::websub::link_header(hub_url, topic));
  CHECK(got[0].second.find("changelist-notification") != std::string::npos);
  CHECK(got[0].second.find(up.url("/res/1.txt")) != std::string::npos);
  CHECK(rs::websub::check_signature(&signatures[0], "operator-secret", got[0].second) ==
        rs::websub::SignatureCheck::valid);
}

TEST_CASE("Push: a callback_allow_hosts entry with a port admits that port of the host only") {
  OneResource source;
  TestDaemon a({{"up", source.up.url("/")}});
  // Two callbacks on 127.0.0.1, on two ports; only the first is allowed.
  httplib::Server allowed_cb;
  httplib::Server other_cb;
  std::atomic<int> allowed_asked{0};
  std::atomic<int> other_asked{0};
  allowed_cb.Get("/cb", [&](const httplib::Request& req, httplib::Response& res) {
    ++allowed_asked;
    res.set_content(req.get_param_value("hub.challenge"), "text/plain");
  });
  other_cb.Get("/cb", [&](const httplib::Request& req, httplib::Response& res) {
    ++other_asked;
    res.set_content(req.get_param_value("hub.challenge"), "text/plain");
  });
  ServerThread allowed_running(allowed_cb);
  ServerThread other_running(other_cb);
  const std::string allowed = allowed_running.base();
  edit_config(a, [&](json& j) {
    j["push"] = {{"callback_allow_hosts", {"127.0.0.1:" + allowed.substr(allowed.rfind(':') + 1)}}};
  });
  start_in_sync(a, "up", 1);
  const std::string topic = a.base + "/sets/up/notification/changelist";
  httplib::Client c(a.base);
  for (const auto& base : {allowed, other_running.base()}) {
    auto r = c.Post("/hub", rs::websub::encode_form({{"hub.mode", "subscribe"}, {"hub.topic", topic},
                                                     {"hub.callback", base + "/cb"}}),
                    "application/x-www-form-urlencoded");
    REQUIRE(r);
    CHECK(r->status == 202);
  }
  REQUIRE(eventually([&] { return scalar(a, "SELECT count(*) FROM hub_subscription") == "1"; }, 10));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  CHECK(allowed_asked.load() == 1);
  CHECK(other_asked.load() == 0); // another port of the allowed host: never called
  CHECK(scalar(a, "SELECT callback FROM hub_subscription") == allowed + "/cb");
}

TEST_CASE("Push: tributary simulate --hub, a test tool, is bounded all the same: at most 100 intents wait, a "
          "private callback is never called") {
  agg::SimulateOptions o;
  o.port = 0;
  o.resources = 2;
  o.change_rate = 0;
  o.hub = true;
  agg::Simulator sim(o);
  REQUIRE(sim.start());
  // A callback that takes the connection and never answers: each
  // verification waits on it, so the intents queue up.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(silent, 1) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string callback = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/cb";
  httplib::Client c(sim.base_url());
  int accepted = 0;
  int refused = 0;
  for (int i = 0; i < 150; ++i) {
    auto r = c.Post("/hub",
                    rs::websub::encode_form({{"hub.mode", "subscribe"},
                                             {"hub.topic", sim.base_url() + "/notification/changelist"},
                                             {"hub.callback", callback + std::to_string(i)}}),
                    "application/x-www-form-urlencoded");
    REQUIRE(r);
    accepted += r->status == 202 ? 1 : 0;
    refused += r->status == 503 ? 1 : 0;
  }
  MESSAGE(accepted << " intents accepted, " << refused << " refused");
  CHECK(accepted <= 101); // at most 100 waiting, and the one being verified
  CHECK(refused >= 49);
  ::close(silent);
}
