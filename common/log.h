#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// One line per event on stderr, as text or JSON, each naming its source when
// it has one:
//   2026-11-22T01:02:03.456Z info  [arxiv] run finished: incremental succeeded ...
//   {"time":"2026-11-22T01:02:03.456Z","level":"info","source":"arxiv","message":"run finished: ..."}
// Thread-safe; lines are never interleaved.
namespace tributary::log {

enum class Level { debug, info, warn, error };
enum class Format { text, json };

// Sets the minimum level and format for every later line.
void configure(Level min_level, Format format);
// "debug", "info", "warn", "error"; nullopt otherwise.
std::optional<Level> parse_level(std::string_view s);
std::optional<Format> parse_format(std::string_view s);

// Extra key/value pairs, rendered as key=value (text) or members (JSON).
using Fields = std::vector<std::pair<std::string, std::string>>;

void write(Level level, std::string_view source, std::string_view message, const Fields& fields = {});

inline void debug(std::string_view source, std::string_view message, const Fields& f = {}) {
  write(Level::debug, source, message, f);
}
inline void info(std::string_view source, std::string_view message, const Fields& f = {}) {
  write(Level::info, source, message, f);
}
inline void warn(std::string_view source, std::string_view message, const Fields& f = {}) {
  write(Level::warn, source, message, f);
}
inline void error(std::string_view source, std::string_view message, const Fields& f = {}) {
  write(Level::error, source, message, f);
}

// Logs `failures` once per distinct state: an error line, `error` then the
// failures, when they differ from `last` (what was logged last, updated
// here); `recovered` when they are gone. A job that fails the same way at
// every pass says so once, not every second.
void failures_once(const std::vector<std::string>& failures, std::string& last, std::string_view error,
                   std::string_view recovered);

// A warning that repeats (a pass every few seconds meeting the same
// failure: a full disk) goes out once a minute per condition, with how many
// were held back since. The condition is the message up to its first ": "
// (what failed, before why). Thread-safe.
class Limiter {
public:
  explicit Limiter(std::chrono::seconds every = std::chrono::seconds(60)) : m_every(every) {}
  void warn(std::string_view source, const std::string& message);

private:
  std::chrono::seconds m_every;
  std::mutex m_mutex;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, uint64_t>> m_last; // when, held back
};

// A JSON string literal for `s` (quotes included), escaping what RFC 8259 requires.
std::string json_quote(std::string_view s);

} // namespace tributary::log
