#include "store/pg/copy_text.h"

// COPY's text format (see copy_text.h).
namespace tributary::store::pg_detail {

namespace {

// The escape letter of a byte COPY's text format escapes, or 0.
char escape_of(unsigned char c) {
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

} // namespace

void CopyText::field(std::string_view v) {
  sep();
  append_escaped(v);
}

void CopyText::field(const std::optional<std::string>& v) {
  if (v) {
    field(std::string_view(*v));
  } else {
    null();
  }
}

void CopyText::field(long long v) {
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

void CopyText::field(const std::optional<long long>& v) {
  if (v) {
    field(*v);
  } else {
    null();
  }
}

void CopyText::null() {
  sep();
  m_buf += "\\N";
}

void CopyText::end_row() {
  m_buf += '\n';
  m_first = true;
}

void CopyText::clear() {
  m_buf.clear();
  m_first = true;
}

void CopyText::sep() {
  if (!m_first) {
    m_buf += '\t';
  }
  m_first = false;
}

void CopyText::append_escaped(std::string_view v) {
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

} // namespace tributary::store::pg_detail
