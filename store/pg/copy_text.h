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
  void field(std::string_view v);
  void field(const std::string& v) { field(std::string_view(v)); }
  void field(const char* v) { field(std::string_view(v)); }
  void field(const std::optional<std::string>& v);
  // An integer field.
  void field(long long v);
  void field(const std::optional<long long>& v);
  void null();
  // Ends the row.
  void end_row();

  const std::string& text() const { return m_buf; }
  size_t size() const { return m_buf.size(); }
  void clear();

private:
  void sep();
  void append_escaped(std::string_view v);

  std::string m_buf;
  bool m_first = true;
};

} // namespace tributary::store::pg_detail
