// Room resourcesync/xml_start_tag: the scanner's start tags (xml_scanner.h):
// read in one pass where a piece holds them whole, resumed where one is cut;
// their values decoded, their namespaces bound and their names resolved,
// then reported.
#include "resourcesync/xml_scanner.h"

#include "resourcesync/xml_chars.h"

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

namespace tributary::rs::xml {

using chars::forbidden_message;
using chars::is_space;
using chars::name_end;
using chars::non_character;

namespace {

// Up to this many attributes, duplicates are found by comparing each pair.
constexpr size_t k_few_attributes = 32;
// At most this many namespace declarations in scope (a Sitemap has two or
// three; libxml2 looked them up one by one as well).
constexpr size_t k_most_bindings = 256;

constexpr std::string_view k_xml_ns = "http://www.w3.org/XML/1998/namespace";
constexpr std::string_view k_xmlns_ns = "http://www.w3.org/2000/xmlns/";

// Bytes that need a second look in attribute values: '<' (an error), '&',
// whitespace other than the space (normalized), the forbidden controls,
// 0xEF (which begins U+FFFE and U+FFFF).
struct ValueTable {
  bool special[256] = {};
  constexpr ValueTable() {
    for (int c = 0; c < 0x20; ++c) {
      special[c] = true;
    }
    special[static_cast<unsigned char>('&')] = true;
    special[static_cast<unsigned char>('<')] = true;
    special[0xEF] = true;
  }
};
constexpr ValueTable k_value;

} // namespace

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
  std::string_view qname;
  bool empty = false;
  const char* after = nullptr;
  uint64_t lines = 0;
  switch (parse_start_tag(p, end, qname, empty, after, lines)) {
  case Parsed::done:
    m_line += lines;
    return report_start_tag(qname, empty) ? static_cast<size_t>(after - p) : 0;
  case Parsed::failed:
    return 0;
  case Parsed::cut:
    break;
  }
  return std::nullopt;
}

Scanner::Parsed Scanner::parse_start_tag(const char* p, const char* end, std::string_view& qname, bool& empty,
                                         const char*& after, uint64_t& lines) {
  lines = 0;
  auto fail = [&](std::string message) {
    m_line += lines;
    fatal(std::move(message));
    return Parsed::failed;
  };
  const char* q = name_end(p + 1, end);
  if (q == end) {
    return Parsed::cut;
  }
  if (q == p + 1) {
    return fail("StartTag: invalid element name");
  }
  qname = std::string_view(p + 1, static_cast<size_t>(q - p - 1));
  m_raw.clear();
  for (;;) {
    const char* before = q;
    while (q < end && is_space(*q)) {
      lines += *q == '\n';
      ++q;
    }
    if (q == end) {
      return Parsed::cut;
    }
    if (*q == '>') {
      empty = false;
      after = q + 1;
      return Parsed::done;
    }
    if (*q == '/') {
      if (q + 1 == end) {
        return Parsed::cut;
      }
      if (q[1] != '>') {
        return fail("Couldn't find end of Start Tag " + std::string(qname));
      }
      empty = true;
      after = q + 2;
      return Parsed::done;
    }
    if (q == before) {
      return fail("attributes construct error");
    }
    const char* name = q;
    q = name_end(q, end);
    if (q == end) {
      return Parsed::cut;
    }
    if (q == name) {
      return fail("attributes construct error");
    }
    const std::string_view aname(name, static_cast<size_t>(q - name));
    while (q < end && is_space(*q)) {
      lines += *q == '\n';
      ++q;
    }
    if (q == end) {
      return Parsed::cut;
    }
    if (*q != '=') {
      return fail("Specification mandates value for attribute " + std::string(aname));
    }
    ++q;
    while (q < end && is_space(*q)) {
      lines += *q == '\n';
      ++q;
    }
    if (q == end) {
      return Parsed::cut;
    }
    if (*q != '"' && *q != '\'') {
      return fail("AttValue: \" or ' expected");
    }
    const char* value = q + 1;
    const void* close = std::memchr(value, *q, static_cast<size_t>(end - value));
    if (!close) {
      return Parsed::cut;
    }
    q = static_cast<const char*>(close);
    bool plain = true;
    for (const char* v = value; v < q; ++v) {
      const auto c = static_cast<unsigned char>(*v);
      if (!k_value.special[c]) {
        continue;
      }
      if (c == '<') {
        return fail("Unescaped '<' not allowed in attributes values");
      }
      if (c == '&' || c == '\t' || c == '\r') {
        plain = false;
      } else if (c == '\n') {
        plain = false;
        ++lines;
      } else if (c != 0xEF || non_character(v, q)) {
        return fail(forbidden_message("AttValue", *chars::forbidden_char(std::string_view(v, static_cast<size_t>(q - v)))));
      }
    }
    // The same name twice: compared pairwise while there are few (a
    // Sitemap's elements have a handful), through a set past that (a
    // hostile tag of 4 MB holds half a million attributes).
    bool seen = false;
    if (m_raw.size() < k_few_attributes) {
      for (const auto& a : m_raw) {
        seen = seen || a.qname == aname;
      }
    } else {
      if (m_raw.size() == k_few_attributes) {
        m_seen.clear();
        for (const auto& a : m_raw) {
          m_seen.insert(std::string(a.qname));
        }
      }
      seen = !m_seen.insert(std::string(aname)).second;
    }
    if (seen) {
      return fail("Attribute " + std::string(aname) + " redefined");
    }
    m_raw.push_back(RawAttr{aname, std::string_view(value, static_cast<size_t>(q - value)), plain});
    ++q;
  }
}

bool Scanner::report_start_tag(std::string_view qname, bool empty) {
  // A QName's prefix and local part. Both must be NCNames: where the local
  // part does not begin as a name does, the whole is the local name; a
  // second colon stays in the local part (both as libxml2 reads them).
  auto split = [this](std::string_view qn, std::string_view& prefix, std::string_view& local) {
    const size_t colon = qn.find(':');
    prefix = {};
    local = qn;
    if (colon == std::string_view::npos) {
      return;
    }
    if (colon == 0 || colon + 1 == qn.size() || qn[colon + 1] == ':' ||
        name_end(qn.data() + colon + 1, qn.data() + qn.size()) == qn.data() + colon + 1) {
      ns_error("Failed to parse QName '" + std::string(qn) + "'");
      return;
    }
    if (qn.find(':', colon + 1) != std::string_view::npos) {
      ns_error("Failed to parse QName '" + std::string(qn) + "'");
    }
    prefix = qn.substr(0, colon);
    local = qn.substr(colon + 1);
  };

  // Values: references decoded and whitespace normalized where there is
  // any, else views of the input; namespace declarations (xmlns and
  // xmlns:*) bound.
  if (m_decoded.size() < m_raw.size()) {
    m_decoded.resize(m_raw.size());
  }
  m_attrs.clear();
  const size_t mark = m_bindings.size();
  for (size_t i = 0; i < m_raw.size(); ++i) {
    std::string_view value = m_raw[i].raw;
    if (!m_raw[i].plain) {
      std::string error;
      if (!chars::decode(value, true, m_decoded[i], error)) {
        fatal(std::move(error));
        return false;
      }
      value = m_decoded[i];
    }
    const std::string_view an = m_raw[i].qname;
    std::string_view ap;
    std::string_view al;
    split(an, ap, al);
    if (an != "xmlns" && ap != "xmlns") {
      m_attrs.push_back(Attribute{al, ap, {}, value});
      continue;
    }
    const std::string_view prefix = an == "xmlns" ? std::string_view() : al;
    if (prefix == "xml") {
      if (value != k_xml_ns) {
        ns_error("xml namespace prefix mapped to wrong URI");
      }
    } else if (prefix == "xmlns") {
      ns_error("redefinition of the xmlns prefix is forbidden");
    } else if (value == k_xml_ns || value == k_xmlns_ns) {
      ns_error("reuse of the xml or xmlns namespace name is forbidden");
    } else if (!prefix.empty() && value.empty()) {
      ns_error("xmlns:" + std::string(prefix) + ": Empty XML namespace is not allowed");
    } else if (m_bindings.size() >= k_most_bindings) {
      // Each name is looked up among the bindings in scope: a hostile
      // document declaring a million would make every element cost that.
      fatal("more than " + std::to_string(k_most_bindings) + " namespace declarations in scope");
      return false;
    } else {
      m_bindings.push_back(Binding{std::string(prefix), std::string(value)});
    }
  }

  // Names: the element's and each attribute's, against the bindings in
  // scope (this tag's own included).
  std::string_view prefix;
  std::string_view local;
  split(qname, prefix, local);
  const std::string_view ns = lookup(prefix);
  if (!prefix.empty() && ns.empty()) {
    ns_error("Namespace prefix " + std::string(prefix) + " on " + std::string(local) + " is not defined");
  }
  std::unordered_set<std::string> expanded;
  for (size_t i = 0; i < m_attrs.size(); ++i) {
    Attribute& a = m_attrs[i];
    if (a.prefix.empty()) {
      continue;
    }
    a.ns = lookup(a.prefix);
    if (a.ns.empty()) {
      ns_error("Namespace prefix " + std::string(a.prefix) + " for " + std::string(a.name) + " on " +
               std::string(local) + " is not defined");
      continue;
    }
    // The same namespace and local name under two prefixes (again a set
    // past a few).
    bool twice = false;
    if (m_attrs.size() <= k_few_attributes) {
      for (size_t j = 0; j < i; ++j) {
        twice = twice || (m_attrs[j].ns == a.ns && m_attrs[j].name == a.name);
      }
    } else {
      if (expanded.empty()) {
        expanded.reserve(m_attrs.size());
      }
      twice = !expanded.insert(std::string(a.ns) + '\n' + std::string(a.name)).second;
    }
    if (twice) {
      ns_error("Namespaced Attribute " + std::string(a.name) + " in '" + std::string(a.ns) + "' redefined");
    }
  }
  m_decls.clear();
  for (size_t i = mark; i < m_bindings.size(); ++i) {
    m_decls.push_back(Namespace{m_bindings[i].prefix, m_bindings[i].uri});
  }
  if (m_stopped) {
    return false;
  }

  m_where = Where::content;
  m_open.push_back(Open{m_names.size(), qname.size(), mark, m_line});
  m_names.append(qname);
  m_handler.start_element(local, prefix, ns, m_decls, m_attrs);
  if (empty && !m_stopped) {
    m_handler.end_element();
    close_element();
  }
  return !m_stopped;
}

std::string_view Scanner::lookup(std::string_view prefix) const {
  if (prefix == "xml") {
    return k_xml_ns;
  }
  for (size_t i = m_bindings.size(); i-- > 0;) {
    const std::string& p = m_bindings[i].prefix;
    if (p.size() == prefix.size() && (p.empty() || std::memcmp(p.data(), prefix.data(), p.size()) == 0)) {
      return m_bindings[i].uri;
    }
  }
  return {};
}

} // namespace tributary::rs::xml
