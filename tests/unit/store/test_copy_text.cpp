#include "store/pg/copy_text.h"

#include <doctest/doctest.h>

#include <limits>

// COPY's text format as store/pg/copy_text.h writes it.
using tributary::store::pg_detail::CopyText;

TEST_CASE("COPY text: fields are tab-separated, rows end in a newline, NULL is \\N") {
  CopyText t;
  t.field("a");
  t.field(std::optional<std::string>());
  t.field(std::optional<std::string>("b"));
  t.field(42LL);
  t.field(std::optional<long long>());
  t.end_row();
  t.field("");
  t.end_row();
  CHECK(t.text() == "a\t\\N\tb\t42\t\\N\n\n");
}

TEST_CASE("COPY text: the characters the format names are escaped, everything else passes as it is") {
  CopyText t;
  t.field(std::string("back\\slash\ttab\nnew\rcr\bb\ff\vv"));
  t.field(std::string("\\N"));                  // a value, not NULL
  t.field(std::string("\\."));                  // never read as the end of the data
  t.field(std::string("caf\xc3\xa9 \x01\x1f\x7f")); // UTF-8 and other control bytes
  t.field(std::string("\t\\"));                 // escapes at both ends
  t.end_row();
  CHECK(t.text() == "back\\\\slash\\ttab\\nnew\\rcr\\bb\\ff\\vv\t\\\\N\t\\\\.\tcaf\xc3\xa9 \x01\x1f\x7f\t\\t\\\\\n");
}

TEST_CASE("COPY text: integers at their limits") {
  CopyText t;
  t.field(0LL);
  t.field(-7LL);
  t.field(std::numeric_limits<long long>::max());
  t.field(std::numeric_limits<long long>::min());
  t.end_row();
  CHECK(t.text() == "0\t-7\t9223372036854775807\t-9223372036854775808\n");
  t.clear();
  t.field("x");
  t.end_row();
  CHECK(t.text() == "x\n");
}
