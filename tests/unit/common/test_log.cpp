#include "common/log.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <sstream>
#include <string>

using namespace tributary;

namespace {

// What log::write puts on stderr for `f` (stderr goes to a file meanwhile).
std::string captured(const std::function<void()>& f) {
  const auto path = std::filesystem::temp_directory_path() / ("tributary-log-" + std::to_string(::getpid()));
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::close(fd);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  return ss.str();
}

} // namespace

TEST_CASE("log: nothing a client or an upstream said can forge a line of the text log, or reach a terminal raw") {
  log::configure(log::Level::debug, log::Format::text);
  // A hub.callback with CR/LF and a whole forged line, an ESC sequence, in
  // the message, the source and a field without a space.
  const std::string forged = "x\r\n2026-01-01T00:00:00.000Z error forged\x1b[2J";
  const std::string out = captured([&] {
    log::warn(forged, "hub: refused " + forged, {{"callback", "http://a/\nb"}, {"mode", forged}});
  });
  log::configure(log::Level::info, log::Format::text);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1); // one line, its own end
  CHECK(out.find('\r') == std::string::npos);
  CHECK(out.find('\x1b') == std::string::npos);
  CHECK(out.find("refused x\\r\\n2026-01-01T00:00:00.000Z error forged\\x1b[2J") != std::string::npos);
  CHECK(out.find("callback=\"http://a/\\nb\"") != std::string::npos);
}

TEST_CASE("log: bytes that are not UTF-8, C1 controls, DEL and bidirectional overrides are escaped, in text and JSON") {
  // U+202E (RIGHT-TO-LEFT OVERRIDE) would show "gnp.exe" as "exe.png";
  // U+0085 (NEL, a C1 control) ends a line in some viewers; 0xff is no UTF-8.
  const std::string sly = "evil\xe2\x80\xae" "gnp.exe \xc2\x85 next\x7f \xff\xfe caf\xc3\xa9";
  for (const auto format : {log::Format::text, log::Format::json}) {
    log::configure(log::Level::debug, format);
    const std::string out = captured([&] { log::warn(sly, "fetched " + sly, {{"uri", sly}}); });
    log::configure(log::Level::info, log::Format::text);
    CAPTURE(out);
    CHECK(out.find("\xe2\x80\xae") == std::string::npos);
    CHECK(out.find("\xc2\x85") == std::string::npos);
    CHECK(out.find('\x7f') == std::string::npos);
    CHECK(out.find('\xff') == std::string::npos);
    CHECK(out.find("u202e") != std::string::npos);
    CHECK(out.find("u0085") != std::string::npos);
    CHECK(out.find("caf\xc3\xa9") != std::string::npos); // well-formed text stays as it is
    if (format == log::Format::json) {
      CHECK(nlohmann::json::accept(out));
    }
  }
}

TEST_CASE("log: a Limiter lets a repeated warning out once a minute per condition, saying how many it held back") {
  log::configure(log::Level::info, log::Format::text);
  log::Limiter limiter(std::chrono::seconds(1));
  const std::string out = captured([&] {
    for (int i = 0; i < 30; ++i) {
      limiter.warn("", "Resource Dump of set 'a' not built: No space left on device (pass " + std::to_string(i) + ")");
      limiter.warn("", "Resource Dump of set 'b' not built: No space left on device");
    }
  });
  auto lines = [](const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) {
      ++n;
    }
    return n;
  };
  CHECK(lines(out, "set 'a' not built") == 1); // one condition, whatever its detail
  CHECK(lines(out, "set 'b' not built") == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string later = captured([&] {
    limiter.warn("", "Resource Dump of set 'a' not built: No space left on device (pass 31)");
  });
  CHECK(later.find("(29 more like it in the last minute)") != std::string::npos);
}
