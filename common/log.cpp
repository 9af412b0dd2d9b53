#include "common/log.h"

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

// The code point of the UTF-8 sequence at `p` and its length; length 0
// when the bytes there are not well-formed UTF-8 (a stray continuation
// byte, a sequence cut short, an overlong form, a surrogate).
std::pair<uint32_t, size_t> decode(std::string_view s, size_t p) {
  const auto c = static_cast<unsigned char>(s[p]);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) {
    return {c, 1};
  }
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return {0, 0};
  }
  if (p + n > s.size()) {
    return {0, 0};
  }
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[p + i]);
    if ((b & 0xC0) != 0x80) {
      return {0, 0};
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return {0, 0};
  }
  return {cp, n};
}

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
    const auto [cp, n] = decode(s, p);
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

} // namespace tributary::log
