#include "common/log.h"

#include "common/text.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace tributary::log {

namespace {

std::atomic<Level> g_level{Level::info};
std::atomic<Format> g_format{Format::text};
std::mutex g_mutex;

std::string_view name_of(Level l) {
  switch (l) {
  case Level::debug: return "debug";
  case Level::info: return "info";
  case Level::warn: return "warn";
  case Level::error: return "error";
  }
  return "info";
}

std::string now_utc() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96]; // room for any int the format could print (-Wformat-truncation)
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

} // namespace

void configure(Level min_level, Format format) {
  g_level = min_level;
  g_format = format;
}

std::optional<Level> parse_level(std::string_view s) {
  for (Level l : {Level::debug, Level::info, Level::warn, Level::error}) {
    if (s == name_of(l)) {
      return l;
    }
  }
  return std::nullopt;
}

std::optional<Format> parse_format(std::string_view s) {
  if (s == "text") {
    return Format::text;
  }
  if (s == "json") {
    return Format::json;
  }
  return std::nullopt;
}

namespace {

// Characters a log line must not carry raw: C0 and C1 controls, DEL, the
// bidirectional overrides and isolates (which reorder what a terminal or
// viewer shows), and the Unicode line and paragraph separators.
bool unsafe(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029;
}

// `s` escaped for a log: CR, LF and tab by name; other unsafe characters as
// \u followed by four hex digits; a byte that is not UTF-8 as \x and two
// hex digits (in JSON, with its backslash escaped: the line stays valid
// JSON). `quote`: '"' and '\\' escaped too, for a JSON string.
void escape_into(std::string& out, std::string_view s, bool json) {
  char buf[16];
  for (size_t p = 0; p < s.size();) {
    const auto [cp, n] = decode_utf8(s, p);
    if (n == 0) {
      std::snprintf(buf, sizeof buf, json ? "\\\\x%02x" : "\\x%02x", static_cast<unsigned char>(s[p]));
      out += buf;
      p += 1;
      continue;
    }
    if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (json && cp == '"') {
      out += "\\\"";
    } else if (json && cp == '\\') {
      out += "\\\\";
    } else if (unsafe(cp)) {
      std::snprintf(buf, sizeof buf, (json || cp > 0x7f) ? "\\u%04x" : "\\x%02x", cp);
      out += buf;
    } else {
      out.append(s.substr(p, n));
    }
    p += n;
  }
}

} // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  escape_into(out, s, true);
  out.push_back('"');
  return out;
}

// Text as one line of a text log: control characters (CR, LF, ESC, C1,
// DEL), bidirectional overrides and bytes that are not UTF-8 escaped, so
// that nothing an upstream or a client said (a hub.callback, a document's
// value) can forge a line, move a terminal's cursor or reorder what a
// reader sees (#35, #50).
std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  escape_into(out, s, false);
  return out;
}

// A field's value as written: bare when it is one plain word, else quoted.
bool bare(std::string_view v) {
  if (v.empty()) {
    return false;
  }
  for (unsigned char c : v) {
    if (c <= 0x20 || c == '"' || c == 0x7f) {
      return false;
    }
  }
  return true;
}

void write(Level level, std::string_view source, std::string_view message, const Fields& fields) {
  if (level < g_level.load()) {
    return;
  }
  std::string line;
  if (g_format.load() == Format::json) {
    line = "{\"time\":\"" + now_utc() + "\",\"level\":\"" + std::string(name_of(level)) + "\"";
    if (!source.empty()) {
      line += ",\"source\":" + json_quote(source);
    }
    line += ",\"message\":" + json_quote(message);
    for (const auto& [k, v] : fields) {
      line += ',';
      line += json_quote(k);
      line += ':';
      line += json_quote(v);
    }
    line += "}\n";
  } else {
    line = now_utc() + " " + std::string(name_of(level));
    line.append(6 - name_of(level).size(), ' ');
    if (!source.empty()) {
      line += '[';
      line += one_line(source);
      line += "] ";
    }
    line += one_line(message);
    for (const auto& [k, v] : fields) {
      line += " " + one_line(k) + "=" + (bare(v) ? std::string(v) : json_quote(v));
    }
    line += "\n";
  }
  std::lock_guard lock(g_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void failures_once(const std::vector<std::string>& failures, std::string& last, std::string_view error,
                   std::string_view recovered) {
  std::string all;
  for (const auto& f : failures) {
    all += (all.empty() ? "" : "; ") + f;
  }
  if (all == last) {
    return;
  }
  if (!all.empty()) {
    write(Level::error, "", std::string(error) + all);
  } else {
    write(Level::info, "", recovered);
  }
  last = std::move(all);
}

void Limiter::warn(std::string_view source, const std::string& message) {
  const std::string condition = std::string(source) + "\n" + message.substr(0, message.find(": "));
  const auto now = std::chrono::steady_clock::now();
  uint64_t held = 0;
  {
    std::lock_guard lock(m_mutex);
    auto [it, first] = m_last.try_emplace(condition, now, 0);
    if (!first && now - it->second.first < m_every) {
      ++it->second.second;
      return;
    }
    held = it->second.second;
    it->second = {now, 0};
  }
  write(Level::warn, source, held ? message + " (" + std::to_string(held) + " more like it in the last minute)"
                                  : message);
}

} // namespace tributary::log
