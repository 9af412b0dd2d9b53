// The OAI-PMH protocol's arguments, datestamps and resumption tokens.
#include "republisher/oai_protocol.h"

#include "common/percent.h"

#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>

namespace tributary::pub::oai {

namespace {

struct VerbRule {
  std::string_view name;
  Verb verb;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
  bool resumable;
};

const std::array<VerbRule, 6>& verb_rules() {
  static const std::array<VerbRule, 6> rules{{
      {"Identify", Verb::identify, {}, {}, false},
      {"ListMetadataFormats", Verb::list_metadata_formats, {}, {"identifier"}, false},
      {"ListSets", Verb::list_sets, {}, {}, true},
      {"GetRecord", Verb::get_record, {"identifier", "metadataPrefix"}, {}, false},
      {"ListIdentifiers", Verb::list_identifiers, {"metadataPrefix"}, {"from", "until", "set"}, true},
      {"ListRecords", Verb::list_records, {"metadataPrefix"}, {"from", "until", "set"}, true},
  }};
  return rules;
}

bool contains(const std::vector<std::string_view>& v, std::string_view s) {
  for (auto x : v) {
    if (x == s) {
      return true;
    }
  }
  return false;
}

std::optional<std::string>* slot(Arguments& a, std::string_view name) {
  if (name == "identifier") {
    return &a.identifier;
  }
  if (name == "metadataPrefix") {
    return &a.metadata_prefix;
  }
  if (name == "from") {
    return &a.from;
  }
  if (name == "until") {
    return &a.until;
  }
  if (name == "set") {
    return &a.set;
  }
  if (name == "resumptionToken") {
    return &a.resumption_token;
  }
  return nullptr;
}

ProtocolError bad_argument(std::string message) { return ProtocolError{"badArgument", std::move(message)}; }

} // namespace

std::variant<Arguments, ProtocolError> parse_arguments(std::string_view form) {
  auto parsed = form_pairs(form);
  if (!parsed) {
    return bad_argument("an argument is not percent-encoded correctly");
  }
  const auto& pairs = *parsed;
  const std::string* verb = nullptr;
  for (const auto& [n, v] : pairs) {
    if (n == "verb") {
      if (verb) {
        return ProtocolError{"badVerb", "the verb is given more than once"};
      }
      verb = &v;
    }
  }
  if (!verb) {
    return ProtocolError{"badVerb", "no verb was given"};
  }
  const VerbRule* rule = nullptr;
  for (const auto& r : verb_rules()) {
    if (r.name == *verb) {
      rule = &r;
    }
  }
  if (!rule) {
    return ProtocolError{"badVerb", "'" + *verb + "' is not an OAI-PMH verb"};
  }
  Arguments a;
  a.verb = rule->verb;
  a.verb_name = std::string(rule->name);
  for (const auto& [n, v] : pairs) {
    if (n == "verb") {
      continue;
    }
    const bool allowed = contains(rule->required, n) || contains(rule->optional, n) ||
                         (rule->resumable && n == "resumptionToken");
    std::optional<std::string>* s = slot(a, n);
    if (!allowed || !s) {
      return bad_argument("'" + n + "' is not an argument of " + a.verb_name);
    }
    if (*s) {
      return bad_argument("'" + n + "' is given more than once");
    }
    *s = v;
    a.given.emplace_back(n, v);
  }
  if (a.resumption_token) {
    if (a.given.size() != 1) {
      return bad_argument("resumptionToken is an exclusive argument");
    }
    return a;
  }
  for (auto r : rule->required) {
    if (!*slot(a, r)) {
      return bad_argument(a.verb_name + " requires '" + std::string(r) + "'");
    }
  }
  return a;
}

rs::Timestamp Datestamp::end() const { return at + (day ? std::chrono::microseconds(86400000000LL) : std::chrono::microseconds(1000000)); }

std::optional<Datestamp> parse_datestamp(std::string_view s) {
  auto number = [&](size_t at, size_t n, int& out) {
    if (at + n > s.size()) {
      return false;
    }
    for (size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') {
        return false;
      }
    }
    return std::from_chars(s.data() + at, s.data() + at + n, out).ec == std::errc();
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (!(s.size() == 10 || s.size() == 20) || !number(0, 4, y) || s[4] != '-' || !number(5, 2, mo) || s[7] != '-' ||
      !number(8, 2, d)) {
    return std::nullopt;
  }
  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(mo)),
                                        std::chrono::day(static_cast<unsigned>(d))};
  if (!ymd.ok()) {
    return std::nullopt;
  }
  Datestamp out;
  out.at = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::sys_days(ymd));
  if (s.size() == 10) {
    out.day = true;
    return out;
  }
  if (s[10] != 'T' || !number(11, 2, h) || s[13] != ':' || !number(14, 2, mi) || s[16] != ':' ||
      !number(17, 2, se) || s[19] != 'Z' || h > 23 || mi > 59 || se > 59) {
    return std::nullopt;
  }
  out.at += std::chrono::hours(h) + std::chrono::minutes(mi) + std::chrono::seconds(se);
  return out;
}

std::string format_datestamp(rs::Timestamp t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const auto days = std::chrono::floor<std::chrono::days>(secs);
  const std::chrono::year_month_day ymd{days};
  const std::chrono::hh_mm_ss hms{secs - days};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

namespace {

constexpr std::string_view k_b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64url(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += k_b64[(acc >> bits) & 63];
    }
  }
  if (bits > 0) {
    out += k_b64[(acc << (6 - bits)) & 63];
  }
  return out;
}

std::optional<std::string> unbase64url(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const size_t v = k_b64.find(c);
    if (v == std::string_view::npos) {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 255);
    }
  }
  return out;
}

// FNV-1a: tells a token we wrote from one cut short or edited.
uint32_t check_of(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h = (h ^ c) * 16777619u;
  }
  return h;
}

long long micros(rs::Timestamp t) { return static_cast<long long>(t.time_since_epoch().count()); }

std::string opt_micros(const std::optional<rs::Timestamp>& t) { return t ? std::to_string(micros(*t)) : ""; }

} // namespace

// "1|check|R or I|prefix|from|until_end|key datestamp|key feed|cursor|set size|set key uri":
// the set and the URI last, the set's length given, so that neither needs
// escaping.
std::string encode_token(const Token& t) {
  const std::string body = std::string(t.records ? "R" : "I") + "|" + t.metadata_prefix + "|" + opt_micros(t.from) + "|" +
                     opt_micros(t.until_end) + "|" + std::to_string(micros(t.key_datestamp)) + "|" +
                     std::to_string(t.key_feed) + "|" + std::to_string(t.cursor) + "|" +
                     std::to_string(t.set.size()) + "|" + t.set + t.key_uri;
  return base64url("1|" + std::to_string(check_of(body)) + "|" + body);
}

std::optional<Token> decode_token(std::string_view s) {
  auto raw = unbase64url(s);
  if (!raw) {
    return std::nullopt;
  }
  // 1|check|kind|prefix|from|until_end|key|feed|cursor|set size|set+uri
  std::vector<std::string> f;
  size_t at = 0;
  for (int i = 0; i < 10; ++i) {
    const size_t bar = raw->find('|', at);
    if (bar == std::string::npos) {
      return std::nullopt;
    }
    f.push_back(raw->substr(at, bar - at));
    at = bar + 1;
  }
  const std::string rest = raw->substr(at);
  auto integer = [](const std::string& text, long long& out) {
    return !text.empty() && std::from_chars(text.data(), text.data() + text.size(), out).ec == std::errc() &&
           std::to_string(out) == text;
  };
  auto time = [&](const std::string& text, std::optional<rs::Timestamp>& out) {
    long long v = 0;
    if (text.empty()) {
      return true;
    }
    if (!integer(text, v)) {
      return false;
    }
    out = rs::Timestamp(std::chrono::microseconds(v));
    return true;
  };
  long long check = 0, key = 0, feed = 0, cursor = 0, set_size = 0;
  Token t;
  if (f[0] != "1" || !integer(f[1], check) || check < 0 ||
      static_cast<uint32_t>(check) != check_of(raw->substr(f[0].size() + f[1].size() + 2)) ||
      (f[2] != "R" && f[2] != "I") || f[3].empty() || !time(f[4], t.from) || !time(f[5], t.until_end) ||
      !integer(f[6], key) || !integer(f[7], feed) || !integer(f[8], cursor) || cursor < 0 ||
      !integer(f[9], set_size) || set_size < 0 || static_cast<size_t>(set_size) > rest.size()) {
    return std::nullopt;
  }
  t.records = f[2] == "R";
  t.metadata_prefix = f[3];
  t.key_datestamp = rs::Timestamp(std::chrono::microseconds(key));
  t.key_feed = feed;
  t.cursor = static_cast<uint64_t>(cursor);
  t.set = rest.substr(0, static_cast<size_t>(set_size));
  t.key_uri = rest.substr(static_cast<size_t>(set_size));
  return t;
}

} // namespace tributary::pub::oai
