#include "resourcesync/datetime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tributary::rs {

namespace {

// Reads exactly `n` ASCII digits at `pos`; returns -1 if they are not there.
int digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) {
    return -1;
  }
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    char c = s[i];
    if (c < '0' || c > '9') {
      return -1;
    }
    v = v * 10 + (c - '0');
  }
  return v;
}

bool fail(std::string* why, const char* reason) {
  if (why) {
    *why = reason;
  }
  return false;
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
// (Howard Hinnant's days_from_civil; cheaper than going through
// std::chrono::year_month_day checks we already did by hand).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int y, int m) {
  static constexpr int k_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : k_days[m - 1];
}

} // namespace

namespace {

// The form nearly every document writes, "YYYY-MM-DDThh:mm:ssZ": read
// without the general path's branches (two of these in every Change List
// entry). Anything else, or a value out of range, goes the general way.
std::optional<Timestamp> parse_canonical(std::string_view s) {
  if (s.size() != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z') {
    return std::nullopt;
  }
  unsigned d[14];
  unsigned bad = 0;
  static constexpr size_t k_at[14] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18};
  for (size_t i = 0; i < 14; ++i) {
    d[i] = static_cast<unsigned>(static_cast<unsigned char>(s[k_at[i]])) - '0';
    bad |= d[i] > 9 ? 1u : 0u;
  }
  if (bad) {
    return std::nullopt;
  }
  const int year = static_cast<int>(d[0] * 1000 + d[1] * 100 + d[2] * 10 + d[3]);
  const int month = static_cast<int>(d[4] * 10 + d[5]);
  const int day = static_cast<int>(d[6] * 10 + d[7]);
  const int hour = static_cast<int>(d[8] * 10 + d[9]);
  const int minute = static_cast<int>(d[10] * 10 + d[11]);
  const int second = static_cast<int>(d[12] * 10 + d[13]);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return std::nullopt; // the general way says why
  }
  const int64_t days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second;
  return Timestamp(std::chrono::microseconds(secs * 1000000));
}

} // namespace

std::optional<Timestamp> parse_w3c_datetime(std::string_view s, std::string* why) {
  if (auto t = parse_canonical(s)) {
    return t;
  }
  int year = digits(s, 0, 4);
  if (year < 0) {
    fail(why, "expected a four-digit year");
    return std::nullopt;
  }
  int month = 1;
  int day = 1;
  int hour = 0;
  int minute = 0;
  int second = 0;
  int64_t micros = 0;
  int offset_minutes = 0;
  size_t pos = 4;

  if (pos < s.size()) {
    if (s[pos] != '-' || (month = digits(s, pos + 1, 2)) < 0) {
      fail(why, "expected -MM after the year");
      return std::nullopt;
    }
    pos += 3;
    if (pos < s.size()) {
      if (s[pos] != '-' || (day = digits(s, pos + 1, 2)) < 0) {
        fail(why, "expected -DD after the month");
        return std::nullopt;
      }
      pos += 3;
    }
  }
  if (month < 1 || month > 12) {
    fail(why, "month out of range");
    return std::nullopt;
  }
  if (day < 1 || day > days_in_month(year, month)) {
    fail(why, "day out of range for the month");
    return std::nullopt;
  }

  if (pos < s.size()) {
    if (s[pos] != 'T' || (hour = digits(s, pos + 1, 2)) < 0 || pos + 3 >= s.size() ||
        s[pos + 3] != ':' || (minute = digits(s, pos + 4, 2)) < 0) {
      fail(why, "expected Thh:mm after the date");
      return std::nullopt;
    }
    pos += 6;
    if (pos < s.size() && s[pos] == ':') {
      if ((second = digits(s, pos + 1, 2)) < 0) {
        fail(why, "expected two digits of seconds");
        return std::nullopt;
      }
      pos += 3;
      if (pos < s.size() && s[pos] == '.') {
        ++pos;
        size_t start = pos;
        int64_t scale = 100000;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
          micros += (s[pos] - '0') * scale;
          scale /= 10;
          ++pos;
        }
        if (pos == start) {
          fail(why, "expected digits after the decimal point");
          return std::nullopt;
        }
      }
    }
    if (hour > 23 || minute > 59 || second > 59) {
      fail(why, "time of day out of range");
      return std::nullopt;
    }
    // A time of day requires a time zone designator.
    if (pos >= s.size()) {
      fail(why, "a time of day needs a time zone (Z or +hh:mm)");
      return std::nullopt;
    }
    if (s[pos] == 'Z') {
      ++pos;
    } else if (s[pos] == '+' || s[pos] == '-') {
      int oh = digits(s, pos + 1, 2);
      int om = pos + 3 < s.size() && s[pos + 3] == ':' ? digits(s, pos + 4, 2) : -1;
      if (oh < 0 || om < 0 || oh > 23 || om > 59) {
        fail(why, "time zone offset must be +hh:mm or -hh:mm");
        return std::nullopt;
      }
      offset_minutes = (oh * 60 + om) * (s[pos] == '-' ? -1 : 1);
      pos += 6;
    } else {
      fail(why, "expected a time zone (Z or +hh:mm)");
      return std::nullopt;
    }
  }
  if (pos != s.size()) {
    fail(why, "unexpected characters at the end");
    return std::nullopt;
  }

  int64_t days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
  // Years 0001 to 9999 in UTC: what a four-digit year can write back, and
  // within what PostgreSQL's timestamptz holds (it refuses year 0000, and
  // an offset can carry 0001-01-01T00:00+01:00 into year 0).
  static const int64_t k_first = days_from_civil(1, 1, 1) * 86400;
  static const int64_t k_end = days_from_civil(10000, 1, 1) * 86400;
  if (secs < k_first || secs >= k_end) {
    fail(why, "outside the years 0001 to 9999 (UTC)");
    return std::nullopt;
  }
  return Timestamp(std::chrono::microseconds(secs * 1000000 + micros));
}

void append_w3c_datetime(std::string& out, Timestamp t) {
  using namespace std::chrono;
  const int64_t us = t.time_since_epoch().count();
  int64_t secs = us / 1000000;
  int64_t frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  int64_t days = secs / 86400;
  int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    days -= 1;
  }
  const year_month_day ymd{sys_days{std::chrono::days{days}}};
  char buf[40];
  char* p = buf;
  auto put = [&p](int64_t v, int width) {
    for (int i = width - 1; i >= 0; --i) {
      p[i] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    p += width;
  };
  put(static_cast<int>(ymd.year()), 4);
  *p++ = '-';
  put(static_cast<unsigned>(ymd.month()), 2);
  *p++ = '-';
  put(static_cast<unsigned>(ymd.day()), 2);
  *p++ = 'T';
  put(sod / 3600, 2);
  *p++ = ':';
  put(sod / 60 % 60, 2);
  *p++ = ':';
  put(sod % 60, 2);
  if (frac != 0) {
    *p++ = '.';
    put(frac, 6);
  }
  *p++ = 'Z';
  out.append(buf, static_cast<size_t>(p - buf));
}

std::string format_w3c_datetime(Timestamp t) {
  std::string out;
  append_w3c_datetime(out, t);
  return out;
}

std::optional<Timestamp> parse_datetime_lenient(std::string_view text, std::string* why, std::string* how) {
  if (auto t = parse_w3c_datetime(text, why)) {
    return t;
  }
  if (text.size() < 16 || text.size() > 40) {
    return std::nullopt;
  }
  std::string s(text);
  std::vector<std::string> assumed;
  if (s[10] == ' ' || s[10] == 't') {
    s[10] = 'T';
    assumed.emplace_back("'T' between date and time");
  }
  if (s.back() == 'z') {
    s.back() = 'Z';
    assumed.emplace_back("'Z' for 'z'");
  }
  // The zone: `Z`, `+hh:mm`, `+hhmm`, ` +hh:mm`, or none.
  const size_t zone = s.find_first_of("Z+-", 11);
  if (zone == std::string::npos) {
    s += 'Z';
    assumed.emplace_back("UTC for a time without a zone");
  } else if (s[zone] != 'Z' && s.size() - zone == 5) {
    s.insert(zone + 3, ":");
    assumed.emplace_back("'hh:mm' for a zone without its colon");
  }
  if (zone != std::string::npos && zone > 0 && s[zone - 1] == ' ') {
    s.erase(zone - 1, 1);
    assumed.emplace_back("no space before the zone");
  }
  if (assumed.empty()) {
    return std::nullopt;
  }
  auto t = parse_w3c_datetime(s);
  if (t && how) {
    how->clear();
    for (const auto& a : assumed) {
      *how += (how->empty() ? "" : ", ") + a;
    }
  }
  return t;
}

bool is_date_only(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return !text.empty() && text.size() <= 10 && text.find('T') == std::string_view::npos;
}

} // namespace tributary::rs
