#pragma once

// Rows for COPY ... FROM STDIN in PostgreSQL's text format, written into one
// buffer: fields separated by tabs, rows ended by newlines, NULL as \N, and
// in a value the backslash, the tab, the newline, the carriage return and
// the other characters the format names (\b \f \v) escaped with a
// backslash. Everything else passes as it is (the connection is UTF-8 and
// values are checked before they are stored).
//
// libpqxx 6.4's stream_to made a string of every field, escaped it a
// character at a time and joined the row from the pieces: 16% of the
// committer's time in a first baseline (bench/RESULTS.md, session 40).
// Here a field is appended in place, and a run of ordinary bytes is copied
// at once. CopyRows (pg_store_internal.h) hands the buffer to the COPY a
// few tens of kilobytes at a time.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tributary::store::pg_detail {

class CopyText {
public:
  // A text field.
  void field(std::string_view v) {
    sep();
    append_escaped(v);
  }
  void field(const std::string& v) { field(std::string_view(v)); }
  void field(const char* v) { field(std::string_view(v)); }
  void field(const std::optional<std::string>& v) {
    if (v) {
      field(std::string_view(*v));
    } else {
      null();
    }
  }
  // An integer field.
  void field(long long v) {
    sep();
    char buf[24];
    char* end = buf + sizeof buf;
    char* p = end;
    unsigned long long u = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
    do {
      *--p = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) {
      *--p = '-';
    }
    m_buf.append(p, static_cast<size_t>(end - p));
  }
  void field(const std::optional<long long>& v) {
    if (v) {
      field(*v);
    } else {
      null();
    }
  }
  void null() {
    sep();
    m_buf += "\\N";
  }
  // Ends the row.
  void end_row() {
    m_buf += '\n';
    m_first = true;
  }

  const std::string& text() const { return m_buf; }
  std::string& buffer() { return m_buf; }
  size_t size() const { return m_buf.size(); }
  void clear() {
    m_buf.clear();
    m_first = true;
  }

private:
  void sep() {
    if (!m_first) {
      m_buf += '\t';
    }
    m_first = false;
  }

  static char escape_of(unsigned char c) {
    switch (c) {
    case '\\':
      return '\\';
    case '\t':
      return 't';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\v':
      return 'v';
    default:
      return 0;
    }
  }

  void append_escaped(std::string_view v) {
    size_t run = 0; // start of the ordinary bytes not yet copied
    for (size_t i = 0; i < v.size(); ++i) {
      const auto c = static_cast<unsigned char>(v[i]);
      // Every byte that needs an escape is a backslash or below 0x0e.
      if (c != '\\' && c >= 0x0e) {
        continue;
      }
      const char e = escape_of(c);
      if (e == 0) {
        continue;
      }
      m_buf.append(v.data() + run, i - run);
      m_buf += '\\';
      m_buf += e;
      run = i + 1;
    }
    m_buf.append(v.data() + run, v.size() - run);
  }

  std::string m_buf;
  bool m_first = true;
};

} // namespace tributary::store::pg_detail
