#pragma once

// Room resourcesync/xml_chars: XML 1.0's rules for characters, as the
// scanner (xml_scanner.h) applies them: names, the characters a document
// may hold, references, the XML declaration. Pure functions over UTF-8
// (valid, as the reader's input decoder hands it). Internal to the reader.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tributary::rs::xml::chars {

// Per byte: 1 begins and continues a Name (ASCII), 2 only continues one,
// 4 begins a multi-byte character (decoded by name_end_slow), 0 neither.
struct NameTable {
  unsigned char kind[256] = {};
  constexpr NameTable() {
    for (int c = 'a'; c <= 'z'; ++c) {
      kind[c] = 1;
      kind[c - 'a' + 'A'] = 1;
    }
    kind[static_cast<unsigned char>('_')] = 1;
    kind[static_cast<unsigned char>(':')] = 1;
    for (int c = '0'; c <= '9'; ++c) {
      kind[c] = 2;
    }
    kind[static_cast<unsigned char>('-')] = 2;
    kind[static_cast<unsigned char>('.')] = 2;
    for (int c = 0x80; c < 0x100; ++c) {
      kind[c] = 4;
    }
  }
};
inline constexpr NameTable k_names;

// The end of the Name beginning at p (before end), or p when none begins
// there; for names with characters beyond ASCII.
const char* name_end_slow(const char* p, const char* end);

// The same, ASCII names without a call.
inline const char* name_end(const char* p, const char* end) {
  if (p == end) {
    return p;
  }
  unsigned char k = k_names.kind[static_cast<unsigned char>(*p)];
  if (k != 1) {
    return k == 4 ? name_end_slow(p, end) : p;
  }
  const char* q = p + 1;
  while (q < end) {
    k = k_names.kind[static_cast<unsigned char>(*q)];
    if (k == 0) {
      return q;
    }
    if (k == 4) {
      return name_end_slow(p, end);
    }
    ++q;
  }
  return q;
}

// XML's white space (S).
inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The message for a character XML does not allow, in `what`.
std::string forbidden_message(const char* what, uint32_t c);

// The first character in raw that XML does not allow (a control other than
// tab, line feed and carriage return; U+FFFE, U+FFFF), as a code point.
std::optional<uint32_t> forbidden_char(std::string_view raw);

// U+FFFE or U+FFFF at p (an 0xEF byte): not XML characters.
inline bool non_character(const char* p, const char* end) {
  return end - p >= 3 && static_cast<unsigned char>(p[1]) == 0xBF &&
         (static_cast<unsigned char>(p[2]) == 0xBE || static_cast<unsigned char>(p[2]) == 0xBF);
}

// raw's text as XML means it: character and the five predefined entity
// references decoded, line ends normalized to '\n', and in an attribute
// value (attribute = true) each literal tab, line feed and carriage return
// a space. On a broken or unknown reference: false, with its message.
bool decode(std::string_view raw, bool attribute, std::string& out, std::string& error);

// What follows "<?xml" in an XML declaration: version="1.x", then an
// optional encoding (not used: the bytes are UTF-8) and standalone. The
// message of what is wrong, or empty.
std::string check_declaration(std::string_view body);

} // namespace tributary::rs::xml::chars
