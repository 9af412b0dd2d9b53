#pragma once

// Room resourcesync/xml_chars: XML 1.0's rules for characters, as the
// scanner (xml_scanner.h) applies them: names, the characters a document
// may hold, references, the XML declaration. Pure functions over UTF-8
// (valid, as the reader's input decoder hands it). Internal to the reader.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tributary::rs::xml::chars {

// Per byte: 1 begins and continues a Name (ASCII), 2 only continues one,
// 4 begins a multi-byte character (decoded by name_end_slow), 0 neither;
// 8 is added for ':' (which begins and continues one), so that a reader of
// a name learns whether it holds one without a second look.
struct NameTable {
  unsigned char kind[256] = {};
  constexpr NameTable() {
    for (int c = 'a'; c <= 'z'; ++c) {
      kind[c] = 1;
      kind[c - 'a' + 'A'] = 1;
    }
    kind[static_cast<unsigned char>('_')] = 1;
    kind[static_cast<unsigned char>(':')] = 1 | 8;
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

// The same, ASCII names without a call; `colon`: whether it holds a ':'.
inline const char* name_end(const char* p, const char* end, bool& colon) {
  colon = false;
  if (p == end) {
    return p;
  }
  unsigned acc = k_names.kind[static_cast<unsigned char>(*p)];
  if ((acc & 1) != 0) {
    // One test a byte: ASCII name bytes are 1, 2 or 9; anything else ends
    // the loop and is looked at once.
    const char* q = p + 1;
    unsigned k = 0;
    while (q < end && ((k = k_names.kind[static_cast<unsigned char>(*q)]) & 3) != 0) {
      acc |= k;
      ++q;
    }
    if (q == end || k != 4) {
      colon = (acc & 8) != 0;
      return q;
    }
  } else if (acc != 4) {
    return p;
  }
  // A character beyond ASCII: the name is decoded from its start.
  const char* q = name_end_slow(p, end);
  colon = std::char_traits<char>::find(p, static_cast<size_t>(q - p), ':') != nullptr;
  return q;
}

inline const char* name_end(const char* p, const char* end) {
  bool colon = false;
  return name_end(p, end, colon);
}

struct SpaceTable {
  bool is[256] = {};
  constexpr SpaceTable() {
    is[static_cast<unsigned char>(' ')] = true;
    is[static_cast<unsigned char>('\n')] = true;
    is[static_cast<unsigned char>('\t')] = true;
    is[static_cast<unsigned char>('\r')] = true;
  }
};
inline constexpr SpaceTable k_spaces;

// XML's white space (S).
inline bool is_space(char c) { return k_spaces.is[static_cast<unsigned char>(c)]; }

// The bytes a scan stops at: every byte below 0x20 but those in
// `controls_passed`, and up to four named bytes (0xEF among them where
// U+FFFE and U+FFFF matter). Built at compile time.
struct StopBytes {
  bool at[256] = {};
  char named[4] = {};
  constexpr StopBytes(std::string_view names, std::string_view controls_passed = {}) {
    for (int c = 0; c < 0x20; ++c) {
      at[c] = controls_passed.find(static_cast<char>(c)) == std::string_view::npos;
    }
    for (size_t i = 0; i < 4; ++i) {
      named[i] = names[i < names.size() ? i : 0]; // unused places repeat the first
      at[static_cast<unsigned char>(named[i])] = true;
    }
  }
};

// The first byte in [p, end) that `stops` holds, or end. Where the processor
// has SSE2 (every x86-64), sixteen bytes at a time are skipped while none of
// them is below 0x20 or named, and the rest is looked at a byte at a time. A
// Sitemap's values (URLs, hashes, datetimes) are mostly such runs: the
// scanner's text and attribute values and the writer's escaping all use it.
inline const char* find_stop(const char* p, const char* end, const StopBytes& stops) {
#if defined(__SSE2__)
  const __m128i low = _mm_set1_epi8(0x20);
  const __m128i n0 = _mm_set1_epi8(stops.named[0]);
  const __m128i n1 = _mm_set1_epi8(stops.named[1]);
  const __m128i n2 = _mm_set1_epi8(stops.named[2]);
  const __m128i n3 = _mm_set1_epi8(stops.named[3]);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i at_least_space = _mm_cmpeq_epi8(_mm_max_epu8(v, low), v);
    const __m128i named = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, n0), _mm_cmpeq_epi8(v, n1)),
                                       _mm_or_si128(_mm_cmpeq_epi8(v, n2), _mm_cmpeq_epi8(v, n3)));
    const unsigned mask = (~static_cast<unsigned>(_mm_movemask_epi8(at_least_space)) & 0xFFFFu) |
                          static_cast<unsigned>(_mm_movemask_epi8(named));
    if (mask != 0) {
      p += __builtin_ctz(mask);
      break;
    }
    p += 16;
  }
#endif
  while (p < end && !stops.at[static_cast<unsigned char>(*p)]) {
    ++p;
  }
  return p;
}

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
