// https: certificate verification is on by default; a source can turn it
// off (verify_tls: false) for a self-signed test endpoint.
#include "sync_engine/fetcher.h"

#include <httplib.h>
#include <doctest/doctest.h>

#include <filesystem>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace tributary;

TEST_CASE("Fetcher: https verifies certificates unless the source says not to") {
  const fs::path dir = fs::temp_directory_path() / ("tributary-tls-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout " +
                          (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  httplib::SSLServer server((dir / "cert.pem").c_str(), (dir / "key.pem").c_str());
  REQUIRE(server.is_valid());
  server.Get("/x.xml", [](const httplib::Request&, httplib::Response& res) { res.set_content("hello", "text/plain"); });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/x.xml";
  auto fetcher = sync::make_default_fetcher();
  std::string body;
  auto sink = [&](const char* d, size_t n) {
    body.append(d, n);
    return true;
  };

  auto refused = fetcher->fetch(url, {}, sink);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().kind == ErrorKind::permanent);
  CHECK(refused.error().message == "TLS certificate not trusted: 127.0.0.1:" + std::to_string(port));

  sync::FetchOptions insecure;
  insecure.verify_tls = false;
  auto ok = fetcher->fetch(url, insecure, sink);
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(body == "hello");

  server.stop();
  t.join();
  fs::remove_all(dir);
}
