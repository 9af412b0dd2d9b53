#include "resourcesync/xml_chars.h"

#include "common/text.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace tributary::rs::xml::chars {

namespace {

// XML 1.0 (fifth edition) NameStartChar and NameChar.
bool name_start(uint32_t c) {
  if (c < 0x80) {
    return (k_names.kind[c] & 1) != 0;
  }
  return (c >= 0xC0 && c <= 0xD6) || (c >= 0xD8 && c <= 0xF6) || (c >= 0xF8 && c <= 0x2FF) ||
         (c >= 0x370 && c <= 0x37D) || (c >= 0x37F && c <= 0x1FFF) || (c >= 0x200C && c <= 0x200D) ||
         (c >= 0x2070 && c <= 0x218F) || (c >= 0x2C00 && c <= 0x2FEF) || (c >= 0x3001 && c <= 0xD7FF) ||
         (c >= 0xF900 && c <= 0xFDCF) || (c >= 0xFDF0 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0xEFFFF);
}

bool name_char(uint32_t c) {
  if (c < 0x80) {
    return k_names.kind[c] != 0;
  }
  return name_start(c) || c == 0xB7 || (c >= 0x300 && c <= 0x36F) || (c >= 0x203F && c <= 0x2040);
}

// XML's Char: what a document may hold, literally or by reference.
bool xml_char(uint32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
         (c >= 0x10000 && c <= 0x10FFFF);
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// A character reference after "&#" at p: its value, and p past the ';'.
std::optional<uint32_t> char_ref(const char*& p, const char* end, std::string& error) {
  const bool hex = p < end && *p == 'x';
  if (hex) {
    ++p;
  }
  uint32_t value = 0;
  const char* digits = p;
  for (; p < end && *p != ';'; ++p) {
    int d = -1;
    if (*p >= '0' && *p <= '9') {
      d = *p - '0';
    } else if (hex && *p >= 'a' && *p <= 'f') {
      d = *p - 'a' + 10;
    } else if (hex && *p >= 'A' && *p <= 'F') {
      d = *p - 'A' + 10;
    }
    if (d < 0) {
      break;
    }
    value = std::min<uint32_t>(value * (hex ? 16 : 10) + static_cast<uint32_t>(d), 0x110000);
  }
  if (p == digits || p == end || *p != ';') {
    error = hex ? "xmlParseCharRef: invalid hexadecimal value" : "xmlParseCharRef: invalid decimal value";
    return std::nullopt;
  }
  ++p;
  if (!xml_char(value)) {
    error = "xmlParseCharRef: invalid xmlChar value " + std::to_string(value);
    return std::nullopt;
  }
  return value;
}

} // namespace

const char* name_end_slow(const char* p, const char* end) {
  const std::string_view s(p, static_cast<size_t>(end - p));
  size_t at = 0;
  while (at < s.size()) {
    const CodePoint c = decode_utf8(s, at);
    if (c.length == 0) {
      // A character cut by end (the input decoder hands nothing else that
      // does not decode): the name may go on, so it reaches end, and the
      // scanner waits for the rest before it decides.
      return end;
    }
    if (!(at == 0 ? name_start(c.value) : name_char(c.value))) {
      break;
    }
    at += c.length;
  }
  return p + at;
}

std::string forbidden_message(const char* what, uint32_t c) {
  return std::string(what) + ": invalid xmlChar value " + std::to_string(c);
}

std::optional<uint32_t> forbidden_char(std::string_view raw) {
  const char* end = raw.data() + raw.size();
  for (const char* q = raw.data(); q < end; ++q) {
    const auto c = static_cast<unsigned char>(*q);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      return c;
    }
    if (c == 0xEF && non_character(q, end)) {
      return static_cast<unsigned char>(q[2]) == 0xBE ? 0xFFFE : 0xFFFF;
    }
  }
  return std::nullopt;
}

bool decode(std::string_view raw, bool attribute, std::string& out, std::string& error) {
  out.clear();
  const char* p = raw.data();
  const char* end = p + raw.size();
  while (p < end) {
    const char* q = p;
    while (q < end && *q != '&' && *q != '\r' && !(attribute && (*q == '\n' || *q == '\t'))) {
      ++q;
    }
    out.append(p, static_cast<size_t>(q - p));
    if (q == end) {
      break;
    }
    if (*q == '\r') {
      out += attribute ? ' ' : '\n';
      p = q + 1 < end && q[1] == '\n' ? q + 2 : q + 1;
      continue;
    }
    if (*q != '&') {
      out += ' ';
      p = q + 1;
      continue;
    }
    const char* r = q + 1;
    if (r < end && *r == '#') {
      ++r;
      auto value = char_ref(r, end, error);
      if (!value) {
        return false;
      }
      append_utf8(out, *value);
      p = r;
      continue;
    }
    const char* name = name_end(r, end);
    if (name == r) {
      error = "xmlParseEntityRef: no name";
      return false;
    }
    if (name == end || *name != ';') {
      error = "EntityRef: expecting ';'";
      return false;
    }
    const std::string_view entity(r, static_cast<size_t>(name - r));
    if (entity == "amp") {
      out += '&';
    } else if (entity == "lt") {
      out += '<';
    } else if (entity == "gt") {
      out += '>';
    } else if (entity == "quot") {
      out += '"';
    } else if (entity == "apos") {
      out += '\'';
    } else {
      error = "Entity '" + std::string(entity) + "' not defined";
      return false;
    }
    p = name + 1;
  }
  return true;
}

std::string check_declaration(std::string_view body) {
  size_t i = 0;
  // One pseudo-attribute `name = "value"` after whitespace, or nothing
  // consumed.
  auto pseudo = [&](std::string_view name, std::string_view& value) {
    const size_t start = i;
    size_t j = i;
    while (j < body.size() && is_space(body[j])) {
      ++j;
    }
    if (j == start || body.substr(j, name.size()) != name) {
      return false;
    }
    j += name.size();
    while (j < body.size() && is_space(body[j])) {
      ++j;
    }
    if (j >= body.size() || body[j] != '=') {
      return false;
    }
    ++j;
    while (j < body.size() && is_space(body[j])) {
      ++j;
    }
    if (j >= body.size() || (body[j] != '"' && body[j] != '\'')) {
      return false;
    }
    const size_t close = body.find(body[j], j + 1);
    if (close == std::string_view::npos) {
      return false;
    }
    value = body.substr(j + 1, close - j - 1);
    i = close + 1;
    return true;
  };
  std::string_view version;
  if (!pseudo("version", version)) {
    return "Malformed declaration expecting version";
  }
  if (version.size() < 3 || version.substr(0, 2) != "1." ||
      !std::all_of(version.begin() + 2, version.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "Unsupported version '" + std::string(version) + "'";
  }
  std::string_view encoding;
  if (pseudo("encoding", encoding)) {
    const bool ok = !encoding.empty() && (encoding[0] | 0x20) >= 'a' && (encoding[0] | 0x20) <= 'z' &&
                    std::all_of(encoding.begin(), encoding.end(), [](char c) {
                      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                             c == '.' || c == '_' || c == '-';
                    });
    if (!ok) {
      return "Invalid XML encoding name";
    }
  }
  std::string_view standalone;
  if (pseudo("standalone", standalone) && standalone != "yes" && standalone != "no") {
    return "standalone accepts only 'yes' or 'no'";
  }
  while (i < body.size() && is_space(body[i])) {
    ++i;
  }
  return i == body.size() ? std::string() : "parsing XML declaration: '?>' expected";
}

} // namespace tributary::rs::xml::chars
