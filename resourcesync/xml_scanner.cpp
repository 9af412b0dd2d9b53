#include "resourcesync/xml_scanner.h"

#include "resourcesync/xml_chars.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace tributary::rs::xml {

using chars::forbidden_message;
using chars::is_space;
using chars::name_end;
using chars::non_character;

namespace {

constexpr std::string_view k_bom = "\xEF\xBB\xBF";
// A reference longer than this is broken: a cut one is not waited for.
constexpr size_t k_longest_reference = 32;
// How much of the next piece is copied at a time to finish a construct the
// previous one cut (the rest is scanned where it lies).
constexpr size_t k_join = 4096;

// Bytes that need a second look in character data: '&', ']', '\r', '\n'
// (counted), the controls XML forbids, and 0xEF (which begins U+FFFE and
// U+FFFF).
constexpr chars::StopBytes k_text("&]\xEF", "\t");

} // namespace

Scanner::Scanner(ScannerHandler& handler, size_t max_markup_bytes)
    : m_handler(handler), m_max_markup(max_markup_bytes) {}

void Scanner::feed(std::string_view bytes) {
  size_t off = 0;
  // A construct the previous piece cut: joined with as much of this one as
  // it takes (a few KiB at a time), then this one is scanned where it lies.
  while (!m_stopped && !m_pending.empty() && off < bytes.size()) {
    const size_t old = m_pending.size();
    const size_t take = std::min(bytes.size() - off, std::max(old, k_join));
    m_pending.append(bytes.substr(off, take));
    const size_t used = scan(m_pending.data(), m_pending.size(), false);
    if (used >= old) {
      off += used - old;
      m_pending.clear();
      break;
    }
    m_pending.erase(0, used);
    off += take;
  }
  if (m_stopped) {
    m_pending.clear();
    return;
  }
  if (m_pending.empty() && off < bytes.size()) {
    const size_t used = scan(bytes.data() + off, bytes.size() - off, false);
    if (!m_stopped && off + used < bytes.size()) {
      m_pending.assign(bytes.substr(off + used));
    }
  }
}

void Scanner::finish() {
  if (m_stopped) {
    return;
  }
  std::string rest = std::move(m_pending);
  m_pending.clear();
  const size_t used = scan(rest.data(), rest.size(), true);
  if (m_stopped) {
    return;
  }
  if (used < rest.size()) {
    fatal("the document ends inside a construct");
    return;
  }
  if (!m_open.empty()) {
    fatal("Premature end of data in tag " + std::string(open_name(m_open.back())) + " line " +
          std::to_string(m_open.back().line));
  } else if (m_where == Where::prolog) {
    fatal(m_at_start ? "Document is empty" : "Start tag expected, '<' not found");
  }
}

size_t Scanner::scan(const char* data, size_t size, bool final) {
  const char* p = data;
  const char* end = data + size;
  if (!m_started) {
    // A UTF-8 byte-order mark may begin the document.
    const size_t n = std::min(size, k_bom.size());
    if (std::string_view(data, n) == k_bom.substr(0, n)) {
      if (n < k_bom.size() && !final) {
        return 0;
      }
      if (n == k_bom.size()) {
        p += n;
      }
    }
    m_started = true;
  }
  while (p < end && !m_stopped) {
    const size_t n = *p == '<' ? markup(p, end, final) : text(p, end, final);
    if (n == 0) {
      break;
    }
    p += n;
    m_at_start = false;
  }
  return static_cast<size_t>(p - data);
}

// ---- character data -------------------------------------------------------

size_t Scanner::text(const char* p, const char* end, bool final) {
  // Where the leading white space ends, and its line ends: the searches
  // below start after it, which none of their stops can fall inside.
  const char* looked = p;
  uint64_t leading_lines = 0;
  if (m_where == Where::content) {
    // White space between tags (a pretty-printed document's line end and
    // indentation, several a entry) is reported without the searches below.
    while (looked < end && (*looked == ' ' || *looked == '\n' || *looked == '\t')) {
      leading_lines += *looked == '\n';
      ++looked;
    }
    if (looked < end && *looked == '<') {
      m_line += leading_lines;
      m_handler.characters(std::string_view(p, static_cast<size_t>(looked - p)));
      return static_cast<size_t>(looked - p);
    }
  }
  const void* lt = std::memchr(looked, '<', static_cast<size_t>(end - looked));
  const char* stop = lt ? static_cast<const char*>(lt) : end;
  if (m_where != Where::content) {
    for (const char* q = p; q < stop; ++q) {
      if (!is_space(*q)) {
        fatal(m_where == Where::prolog ? "Start tag expected, '<' not found"
                                       : "Extra content at the end of the document");
        return 0;
      }
      if (*q == '\n') {
        ++m_line;
      }
    }
    return static_cast<size_t>(stop - p);
  }
  if (!lt && !final) {
    // Keep what the next piece may complete: a reference, the ']]' of a
    // ']]>', a '\r' of a '\r\n'.
    const char* amp = nullptr;
    for (const char* q = stop; q > p && stop - q < static_cast<ptrdiff_t>(k_longest_reference); --q) {
      if (q[-1] == ';') {
        break;
      }
      if (q[-1] == '&') {
        amp = q - 1;
        break;
      }
    }
    if (amp) {
      stop = amp;
    }
    for (int kept = 0; kept < 2 && stop > p && (stop[-1] == ']' || stop[-1] == '\r'); ++kept) {
      --stop;
    }
    // And a character cut in two (U+FFFF must be seen whole to be refused;
    // the reader's input decoder never cuts one, a caller might).
    for (const char* q = stop; q > p && stop - q < 4; --q) {
      const auto c = static_cast<unsigned char>(q[-1]);
      if (c >= 0xC0) {
        const ptrdiff_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (stop - (q - 1) < len) {
          stop = q - 1;
        }
        break;
      }
      if (c < 0x80) {
        break;
      }
    }
    if (stop == p) {
      return 0;
    }
  }
  // Only ' ', '\n' and '\t' lie before `looked`: none moves `stop` back
  // past it, none makes the text other than plain.
  m_line += leading_lines;
  bool plain = true;
  for (const char* q = looked; (q = chars::find_stop(q, stop, k_text)) < stop; ++q) {
    const auto c = static_cast<unsigned char>(*q);
    if (c == '\n') {
      ++m_line;
    } else if (c == '&' || c == '\r') {
      plain = false;
    } else if (c == ']') {
      if (stop - q >= 3 && q[1] == ']' && q[2] == '>') {
        fatal("Sequence ']]>' not allowed in content");
        return 0;
      }
    } else if (c != 0xEF || non_character(q, stop)) {
      fatal(forbidden_message("PCDATA", *chars::forbidden_char(std::string_view(q, static_cast<size_t>(stop - q)))));
      return 0;
    }
  }
  const std::string_view raw(p, static_cast<size_t>(stop - p));
  if (plain) {
    m_handler.characters(raw);
  } else {
    std::string error;
    if (!chars::decode(raw, false, m_text, error)) {
      fatal(std::move(error));
      return 0;
    }
    m_handler.characters(m_text);
  }
  return raw.size();
}

bool Scanner::chars_ok(std::string_view raw, const char* what) {
  if (auto c = chars::forbidden_char(raw)) {
    fatal(forbidden_message(what, *c));
    return false;
  }
  return true;
}

// ---- markup ----------------------------------------------------------------

size_t Scanner::incomplete(const char* p, const char* end, bool final, const char* what) {
  if (final) {
    fatal(std::string(what) + ": the document ends inside it");
  } else if (static_cast<size_t>(end - p) > m_max_markup) {
    fatal(std::string(what) + " is longer than the limit of " + std::to_string(m_max_markup) + " bytes");
  }
  return 0;
}

size_t Scanner::markup(const char* p, const char* end, bool final) {
  if (end - p < 2) {
    return incomplete(p, end, final, "a tag");
  }
  switch (p[1]) {
  case '/':
    return end_tag(p, end, final);
  case '?':
    return pi(p, end, final);
  case '!': {
    const std::string_view have(p, static_cast<size_t>(end - p));
    for (std::string_view opener : {std::string_view("<!--"), std::string_view("<![CDATA["),
                                    std::string_view("<!DOCTYPE")}) {
      if (have.substr(0, opener.size()) == opener) {
        return opener[2] == '-'   ? comment(p, end, final)
               : opener[2] == '[' ? cdata(p, end, final)
                                  : doctype(p, end, final);
      }
      if (have.size() < opener.size() && opener.substr(0, have.size()) == have && !final) {
        return 0; // cut inside the opener
      }
    }
    fatal(m_where == Where::content ? "StartTag: invalid element name" : "Start tag expected, '<' not found");
    return 0;
  }
  default:
    return start_tag(p, end, final);
  }
}

size_t Scanner::start_tag(const char* p, const char* end, bool final) {
  if (m_where == Where::epilog) {
    fatal("Extra content at the end of the document");
    return 0;
  }
  if (m_resume == 0) {
    // Read in one pass where the tag is whole (all but the one a piece
    // cuts).
    if (auto n = read_start_tag(p, end)) {
      return *n;
    }
    m_resume = 1;
    m_quote = 0;
  }
  // Cut: its end is the first '>' outside a quoted value, searched for from
  // where the previous piece ended (a tag trickled in byte by byte is not
  // read again from its start each time).
  const char* gt = nullptr;
  char quote = m_quote;
  for (const char* q = p + m_resume; q < end; ++q) {
    if (quote) {
      const void* close = std::memchr(q, quote, static_cast<size_t>(end - q));
      if (!close) {
        break;
      }
      q = static_cast<const char*>(close);
      quote = 0;
    } else if (*q == '"' || *q == '\'') {
      quote = *q;
    } else if (*q == '>') {
      gt = q;
      break;
    }
  }
  if (!gt) {
    m_resume = static_cast<size_t>(end - p);
    m_quote = quote;
    return incomplete(p, end, final, "a start tag");
  }
  m_resume = 0;
  m_quote = 0;
  if (auto n = read_start_tag(p, gt + 1)) {
    return *n;
  }
  fatal("Couldn't find end of Start Tag");
  return 0;
}

std::optional<size_t> Scanner::read_start_tag(const char* p, const char* end) {
  switch (m_tag.parse(p, end)) {
  case StartTag::Parsed::cut:
    return std::nullopt;
  case StartTag::Parsed::failed:
    m_line += m_tag.lines;
    fatal(m_tag.error());
    return 0;
  case StartTag::Parsed::done:
    break;
  }
  m_line += m_tag.lines;
  const size_t mark = m_scope.mark();
  const bool resolved = m_tag.resolve(m_scope);
  for (const auto& e : m_tag.ns_errors()) {
    ns_error(e);
  }
  if (!resolved) {
    fatal(m_tag.error());
  }
  if (m_stopped) {
    return 0;
  }
  m_where = Where::content;
  m_open.push_back(Open{m_names.size(), m_tag.qname.size(), mark, m_line});
  m_names.append(m_tag.qname);
  m_handler.start_element(m_tag.name, m_tag.prefix, m_tag.ns, m_tag.declared(), m_tag.attributes());
  if (m_tag.empty && !m_stopped) {
    m_handler.end_element();
    close_element();
  }
  return m_stopped ? 0 : static_cast<size_t>(m_tag.after - p);
}

size_t Scanner::end_tag(const char* p, const char* end, bool final) {
  if (!m_open.empty()) {
    // The innermost element's name and '>' right after it, as nearly every
    // end tag is.
    const std::string_view open = open_name(m_open.back());
    const size_t n = open.size();
    if (static_cast<size_t>(end - p) > n + 2 && p[n + 2] == '>' && std::memcmp(p + 2, open.data(), n) == 0) {
      m_handler.end_element();
      close_element();
      return n + 3;
    }
  }
  const void* found = std::memchr(p + 2, '>', static_cast<size_t>(end - p - 2));
  if (!found) {
    return incomplete(p, end, final, "an end tag");
  }
  const char* gt = static_cast<const char*>(found);
  const char* q = name_end(p + 2, gt);
  const std::string_view name(p + 2, static_cast<size_t>(q - p - 2));
  while (q < gt && is_space(*q)) {
    m_line += *q == '\n';
    ++q;
  }
  if (m_open.empty()) {
    fatal(m_where == Where::prolog ? "Start tag expected, '<' not found" : "Extra content at the end of the document");
    return 0;
  }
  const Open& open = m_open.back();
  if (name != open_name(open)) {
    fatal("Opening and ending tag mismatch: " + std::string(open_name(open)) + " line " + std::to_string(open.line) +
          " and " + std::string(name));
    return 0;
  }
  if (q != gt) {
    fatal("expected '>'");
    return 0;
  }
  m_handler.end_element();
  close_element();
  return static_cast<size_t>(gt + 1 - p);
}

void Scanner::close_element() {
  m_scope.pop_to(m_open.back().bindings);
  m_names.resize(m_open.back().name_at);
  m_open.pop_back();
  if (m_open.empty()) {
    m_where = Where::epilog;
  }
}

size_t Scanner::comment(const char* p, const char* end, bool final) {
  // The first "--" after "<!--" must be the start of "-->".
  const char* from = p + std::max<size_t>(m_resume, 4);
  const void* dash = memmem(from, static_cast<size_t>(end - from), "--", 2);
  if (!dash || static_cast<const char*>(dash) + 2 == end) {
    m_resume = dash ? static_cast<size_t>(static_cast<const char*>(dash) - p)
                    : std::max<size_t>(4, static_cast<size_t>(end - p) - 1);
    return incomplete(p, end, final, "a comment");
  }
  m_resume = 0;
  const char* dd = static_cast<const char*>(dash);
  m_line += static_cast<uint64_t>(std::count(p, dd, '\n'));
  if (dd[2] != '>') {
    fatal("Double hyphen within comment");
    return 0;
  }
  if (!chars_ok(std::string_view(p + 4, static_cast<size_t>(dd - p - 4)), "xmlParseComment")) {
    return 0;
  }
  return static_cast<size_t>(dd + 3 - p);
}

const char* Scanner::find_close(const char* p, const char* end, size_t skip, std::string_view delimiter) {
  const char* from = p + std::max(m_resume, skip);
  const void* close = memmem(from, static_cast<size_t>(end - from), delimiter.data(), delimiter.size());
  if (!close) {
    // A delimiter cut by the end of the piece is found from here next time.
    m_resume = std::max(skip, static_cast<size_t>(end - p) - (delimiter.size() - 1));
    return nullptr;
  }
  m_resume = 0;
  return static_cast<const char*>(close);
}

size_t Scanner::pi(const char* p, const char* end, bool final) {
  const char* qe = find_close(p, end, 2, "?>");
  if (!qe) {
    return incomplete(p, end, final, "a processing instruction");
  }
  const std::string_view body(p + 2, static_cast<size_t>(qe - p - 2));
  m_line += static_cast<uint64_t>(std::count(body.begin(), body.end(), '\n'));
  const char* target_end = name_end(body.data(), body.data() + body.size());
  const std::string_view target(body.data(), static_cast<size_t>(target_end - body.data()));
  if (target.empty()) {
    fatal("xmlParsePI : no target name");
    return 0;
  }
  const std::string_view rest = body.substr(target.size());
  if (!rest.empty() && !is_space(rest.front())) {
    fatal("ParsePI: PI " + std::string(target) + " space expected");
    return 0;
  }
  if (target.find(':') != std::string_view::npos) {
    ns_error("colons are forbidden from PI names '" + std::string(target) + "'");
  }
  const bool xml = target.size() == 3 && (target[0] | 0x20) == 'x' && (target[1] | 0x20) == 'm' &&
                   (target[2] | 0x20) == 'l';
  if (!xml) {
    return chars_ok(rest, "xmlParsePI") ? static_cast<size_t>(qe + 2 - p) : 0;
  }
  if (!m_at_start || target != "xml") {
    fatal("XML declaration allowed only at the start of the document");
    return 0;
  }
  if (std::string error = chars::check_declaration(rest); !error.empty()) {
    fatal(std::move(error));
    return 0;
  }
  return static_cast<size_t>(qe + 2 - p);
}

size_t Scanner::cdata(const char* p, const char* end, bool final) {
  const char* ce = find_close(p, end, 9, "]]>");
  if (!ce) {
    return incomplete(p, end, final, "a CDATA section");
  }
  if (m_where != Where::content) {
    fatal(m_where == Where::prolog ? "Start tag expected, '<' not found" : "Extra content at the end of the document");
    return 0;
  }
  const std::string_view body(p + 9, static_cast<size_t>(ce - p - 9));
  m_line += static_cast<uint64_t>(std::count(body.begin(), body.end(), '\n'));
  if (!chars_ok(body, "CData section")) {
    return 0;
  }
  if (body.find('\r') == std::string_view::npos) {
    m_handler.characters(body);
  } else {
    m_text.clear();
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\r') {
        m_text += '\n';
        if (i + 1 < body.size() && body[i + 1] == '\n') {
          ++i;
        }
      } else {
        m_text += body[i];
      }
    }
    m_handler.characters(m_text);
  }
  return static_cast<size_t>(ce + 3 - p);
}

size_t Scanner::doctype(const char* p, const char* end, bool final) {
  const char* q = p + 9;
  while (q < end && is_space(*q)) {
    ++q;
  }
  const char* name_stop = name_end(q, end);
  if (name_stop == end) {
    return incomplete(p, end, final, "a DOCTYPE declaration");
  }
  if (m_where != Where::prolog) {
    fatal("StartTag: invalid element name");
    return 0;
  }
  m_handler.doctype(std::string_view(q, static_cast<size_t>(name_stop - q)));
  if (!m_stopped) {
    fatal("a DOCTYPE declaration is not supported");
  }
  return 0;
}

// ---- errors ----------------------------------------------------------------

void Scanner::fatal(std::string message) {
  if (m_stopped) {
    return;
  }
  m_stopped = true;
  m_handler.xml_error(m_line, std::move(message), true);
}

void Scanner::ns_error(std::string message) {
  if (!m_stopped) {
    m_handler.xml_error(m_line, std::move(message), false);
  }
}

} // namespace tributary::rs::xml
