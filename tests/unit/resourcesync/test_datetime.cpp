#include "resourcesync/datetime.h"

#include <doctest/doctest.h>

#include <cstdio>

using namespace tributary::rs;

namespace {

std::string canon(std::string_view in) {
  auto t = parse_w3c_datetime(in);
  return t ? format_w3c_datetime(*t) : std::string("INVALID");
}

} // namespace

TEST_CASE("W3C datetime: every granularity parses to its canonical UTC form") {
  struct Case {
    const char* in;
    const char* out;
  };
  const Case cases[] = {
      {"2013", "2013-01-01T00:00:00Z"},
      {"2013-07", "2013-07-01T00:00:00Z"},
      {"2013-07-16", "2013-07-16T00:00:00Z"},
      {"2013-07-16T19:20Z", "2013-07-16T19:20:00Z"},
      {"2013-07-16T19:20:30Z", "2013-07-16T19:20:30Z"},
      {"2013-07-16T19:20:30.45Z", "2013-07-16T19:20:30.450000Z"},
      {"2013-07-16T19:20:30.000001Z", "2013-07-16T19:20:30.000001Z"},
      {"2013-07-16T19:20:30.123456789Z", "2013-07-16T19:20:30.123456Z"}, // truncated to µs
      {"2013-07-16T19:20:30.0Z", "2013-07-16T19:20:30Z"},
      {"1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z"},
      {"1969-12-31T23:59:59.5Z", "1969-12-31T23:59:59.500000Z"},
      {"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
      {"9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(canon(c.in) == c.out);
  }
}

TEST_CASE("W3C datetime: offsets are applied") {
  CHECK(canon("2013-07-16T19:20+01:00") == "2013-07-16T18:20:00Z");
  CHECK(canon("2013-07-16T19:20:30-05:30") == "2013-07-17T00:50:30Z");
  CHECK(canon("2013-01-01T00:30:00+01:00") == "2012-12-31T23:30:00Z"); // crosses a year
  CHECK(canon("2012-06-13T17:13:47+00:00") == "2012-06-13T17:13:47Z");
  CHECK(canon("2013-03-01T00:00:00+00:01") == "2013-02-28T23:59:00Z");
}

TEST_CASE("W3C datetime: leap days") {
  CHECK(canon("2012-02-29") == "2012-02-29T00:00:00Z");
  CHECK(canon("2000-02-29T12:00:00Z") == "2000-02-29T12:00:00Z");
  CHECK(canon("2013-02-29") == "INVALID");
  CHECK(canon("1900-02-29") == "INVALID");
  CHECK(canon("2012-03-01T00:00:00+01:00") == "2012-02-29T23:00:00Z");
}

TEST_CASE("W3C datetime: bad inputs are refused with a reason") {
  const char* bad[] = {
      "",
      "13",
      "2013-7-16",
      "2013-07-16T19:20",          // time without zone
      "2013-07-16T19:20:30",       // time without zone
      "2013-07-16 19:20:30Z",      // space instead of T
      "2013-07-16t19:20:30z",      // lower case
      "2013-13-01",
      "2013-00-01",
      "2013-04-31",
      "2013-07-16T24:00:00Z",
      "2013-07-16T19:60:00Z",
      "2013-07-16T19:20:60Z",      // no leap seconds
      "2013-07-16T19:20:30.Z",
      "2013-07-16T19:20:30+0100",
      "2013-07-16T19:20:30+24:00",
      "2013-07-16T19:20:30ZZ",
      " 2013-07-16",
      "2013-07-16 ",
      "2013-07-16T19:20:30+01",
      "yesterday",
      "0000-01-01T00:00:00Z",      // PostgreSQL holds no year 0
      "0001-01-01T00:00:00+00:01", // year 0 in UTC
  };
  for (const char* b : bad) {
    CAPTURE(b);
    std::string why;
    CHECK_FALSE(parse_w3c_datetime(b, &why).has_value());
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("W3C datetime: ordering follows the instant, not the text") {
  auto a = parse_w3c_datetime("2013-01-03T12:00:00+02:00");
  auto b = parse_w3c_datetime("2013-01-03T11:00:00Z");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a < *b);
}

TEST_CASE("W3C datetime: the years 0001 to 9999 in UTC are the range") {
  CHECK(parse_w3c_datetime("0001-01-01T00:00:00Z").has_value());
  CHECK(parse_w3c_datetime("9999-12-31T23:59:59.999999Z").has_value());
  CHECK(parse_w3c_datetime("0001").has_value());
  std::string why;
  CHECK_FALSE(parse_w3c_datetime("9999-12-31T23:59:59-00:01", &why).has_value());
  CHECK(why == "outside the years 0001 to 9999 (UTC)");
}

TEST_CASE("W3C datetime: the canonical form's fast path reads every date as the general path does") {
  // "...Z" takes the fast path, the same instant written "+00:00" the
  // general one: every day of four years (a leap year, a century that is
  // not one) and the limits of each field agree, and what the fast path
  // must refuse it leaves to the general path's reason.
  for (int year : {1900, 2000, 2012, 2013}) {
    for (int month = 1; month <= 12; ++month) {
      for (int day = 1; day <= 31; ++day) {
        char fast[32];
        char general[32];
        std::snprintf(fast, sizeof fast, "%04d-%02d-%02dT23:59:59Z", year, month, day);
        std::snprintf(general, sizeof general, "%04d-%02d-%02dT23:59:59+00:00", year, month, day);
        CAPTURE(fast);
        CHECK(parse_w3c_datetime(fast) == parse_w3c_datetime(general));
      }
    }
  }
  std::string why;
  CHECK_FALSE(parse_w3c_datetime("2013-04-31T10:00:00Z", &why));
  CHECK(why == "day out of range for the month");
  CHECK_FALSE(parse_w3c_datetime("2013-01-01T24:00:00Z", &why));
  CHECK(why == "time of day out of range");
  CHECK_FALSE(parse_w3c_datetime("2013-01-0aT10:00:00Z", &why));
  CHECK_FALSE(parse_w3c_datetime("0000-01-01T00:00:00Z", &why));
  CHECK(parse_w3c_datetime("0001-01-01T00:00:00Z").has_value());
}
