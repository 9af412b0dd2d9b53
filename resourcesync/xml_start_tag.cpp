#include "resourcesync/xml_start_tag.h"

#include "common/text.h"
#include "resourcesync/xml_chars.h"

#include <cstring>
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
// At most this many namespace declarations in scope (a Sitemap with every
// extension in use declares about ten; libxml2 looked them up one by one as
// well).
constexpr size_t k_most_bindings = 256;

constexpr std::string_view k_xml_ns = "http://www.w3.org/XML/1998/namespace";
constexpr std::string_view k_xmlns_ns = "http://www.w3.org/2000/xmlns/";

// Bytes that need a second look in attribute values: '<' (an error), '&',
// whitespace other than the space (normalized), the forbidden controls,
// 0xEF (which begins U+FFFE and U+FFFF).
constexpr chars::StopBytes k_value("&<\xEF");

} // namespace

// ---- the scope ---------------------------------------------------------------

bool NamespaceScope::bind(std::string_view prefix, std::string_view uri) {
  if (m_bindings.size() >= k_most_bindings) {
    return false;
  }
  std::string_view interned;
  for (const std::string_view k : m_interned) {
    if (k == uri) {
      interned = k;
    }
  }
  m_bindings.push_back(Binding{std::string(prefix), std::string(uri), interned});
  forget_lookups();
  return true;
}

std::string_view NamespaceScope::lookup(std::string_view prefix) const {
  // The answers for the default namespace and for the last prefix asked
  // about are kept until the bindings change (a Sitemap's elements ask for
  // those two, element after element).
  if (prefix.empty()) {
    if (!m_default_known) {
      m_default = find(prefix);
      m_default_known = true;
    }
    return m_default;
  }
  if (!m_last_known || !same(m_last_prefix, prefix)) {
    m_last_prefix.assign(prefix);
    m_last = find(prefix);
    m_last_known = true;
  }
  return m_last;
}

std::string_view NamespaceScope::find(std::string_view prefix) const {
  if (prefix == "xml") {
    return k_xml_ns;
  }
  for (size_t i = m_bindings.size(); i-- > 0;) {
    const std::string& p = m_bindings[i].prefix;
    if (same(p, prefix)) {
      return m_bindings[i].view();
    }
  }
  return {};
}

void NamespaceScope::since(size_t mark, std::vector<Namespace>& out) const {
  out.clear();
  for (size_t i = mark; i < m_bindings.size(); ++i) {
    out.push_back(Namespace{m_bindings[i].prefix, m_bindings[i].view()});
  }
}

// ---- reading the tag ---------------------------------------------------------

StartTag::Parsed StartTag::fail(std::string message) {
  m_error = std::move(message);
  return Parsed::failed;
}

StartTag::Parsed StartTag::parse(const char* p, const char* end) {
  lines = 0;
  const char* q = name_end(p + 1, end, m_qname_colon);
  if (q == end) {
    return Parsed::cut;
  }
  if (q == p + 1) {
    return fail("StartTag: invalid element name");
  }
  qname = std::string_view(p + 1, static_cast<size_t>(q - p - 1));
  m_raw.clear();
  m_first_bytes[0] = m_first_bytes[1] = m_first_bytes[2] = m_first_bytes[3] = 0;
  m_may_declare = false;
  auto skip_space = [&] {
    for (; q < end; ++q) {
      if (*q == ' ') {
        continue; // the most of it: a space between attributes, indentation
      }
      if (!is_space(*q)) {
        break;
      }
      lines += *q == '\n';
    }
    return q < end;
  };
  for (;;) {
    const char* before = q;
    if (!skip_space()) {
      return Parsed::cut;
    }
    if (*q == '>' || *q == '/') {
      if (*q == '/' && q + 1 == end) {
        return Parsed::cut;
      }
      if (*q == '/' && q[1] != '>') {
        return fail("Couldn't find end of Start Tag " + std::string(qname));
      }
      empty = *q == '/';
      after = q + (empty ? 2 : 1);
      return Parsed::done;
    }
    const char* name_at = q;
    bool colon = false;
    q = name_end(q, end, colon);
    if (q == end) {
      return Parsed::cut;
    }
    if (before == name_at || q == name_at) {
      return fail("attributes construct error");
    }
    const std::string_view aname(name_at, static_cast<size_t>(q - name_at));
    if (end - q >= 2 && q[0] == '=' && (q[1] == '"' || q[1] == '\'')) {
      ++q; // name="value", as nearly every writer puts it: no white space to skip
    } else {
      if (!skip_space()) {
        return Parsed::cut;
      }
      if (*q != '=') {
        return fail("Specification mandates value for attribute " + std::string(aname));
      }
      ++q;
      if (!skip_space()) {
        return Parsed::cut;
      }
      if (*q != '"' && *q != '\'') {
        return fail("AttValue: \" or ' expected");
      }
    }
    const char* raw = q + 1;
    bool plain = true;
    if (const Parsed r = value(q, end, plain); r != Parsed::done) {
      return r;
    }
    if (seen_before(aname)) {
      return fail("Attribute " + std::string(aname) + " redefined");
    }
    m_may_declare = m_may_declare || (aname.size() >= 5 && same(aname.substr(0, 5), "xmlns"));
    m_raw.push_back(RawAttr{aname, std::string_view(raw, static_cast<size_t>(q - raw)), plain, colon});
    ++q;
  }
}

StartTag::Parsed StartTag::value(const char*& q, const char* end, bool& plain) {
  const char* v = q + 1;
  const void* close = std::memchr(v, *q, static_cast<size_t>(end - v));
  if (!close) {
    return Parsed::cut;
  }
  q = static_cast<const char*>(close);
  for (; (v = chars::find_stop(v, q, k_value)) < q; ++v) {
    const auto c = static_cast<unsigned char>(*v);
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
  return Parsed::done;
}

// The same name twice: compared pairwise while there are few (a Sitemap's
// elements have a handful), through a set past that (a hostile tag of 4 MB
// holds half a million attributes).
bool StartTag::seen_before(std::string_view aname) {
  // A first byte no earlier name began with settles it (a Sitemap's
  // attributes mostly differ there: change, datetime, hash, length, type).
  const auto first = static_cast<unsigned char>(aname[0]);
  uint64_t& word = m_first_bytes[first >> 6];
  const uint64_t bit = uint64_t{1} << (first & 63);
  if ((word & bit) == 0 && m_raw.size() < k_few_attributes) {
    word |= bit;
    return false;
  }
  word |= bit;
  return seen_before_slow(aname);
}

bool StartTag::seen_before_slow(std::string_view aname) {
  if (m_raw.size() < k_few_attributes) {
    for (const auto& a : m_raw) {
      if (a.qname[0] == aname[0] && same(a.qname, aname)) {
        return true;
      }
    }
    return false;
  }
  if (m_raw.size() == k_few_attributes) {
    m_seen.clear();
    for (const auto& a : m_raw) {
      m_seen.insert(std::string(a.qname));
    }
  }
  return !m_seen.insert(std::string(aname)).second;
}

// ---- what it means -------------------------------------------------------------

// Both parts of a QName must be NCNames: where the local part does not
// begin as a name does, the whole is the local name; a second colon stays
// in the local part (both as libxml2 reads them).
void StartTag::split(std::string_view qn, std::string_view& pre, std::string_view& local) {
  const size_t colon = qn.find(':');
  pre = {};
  local = qn;
  if (colon == std::string_view::npos) {
    return;
  }
  if (colon == 0 || colon + 1 == qn.size() || qn[colon + 1] == ':' ||
      name_end(qn.data() + colon + 1, qn.data() + qn.size()) == qn.data() + colon + 1) {
    m_ns_errors.push_back("Failed to parse QName '" + std::string(qn) + "'");
    return;
  }
  if (qn.find(':', colon + 1) != std::string_view::npos) {
    m_ns_errors.push_back("Failed to parse QName '" + std::string(qn) + "'");
  }
  pre = qn.substr(0, colon);
  local = qn.substr(colon + 1);
}

bool StartTag::resolve(NamespaceScope& scope) {
  m_ns_errors.clear();
  const size_t mark = scope.mark();
  if (!bind_declarations(scope)) {
    return false;
  }
  resolve_names(scope);
  if (m_may_declare) {
    scope.since(mark, m_decls);
  } else {
    m_decls.clear(); // it declared nothing
  }
  return true;
}

// Values: references decoded and whitespace normalized where there is any,
// else views of the input; namespace declarations (xmlns and xmlns:*)
// bound, the other attributes kept.
bool StartTag::bind_declarations(NamespaceScope& scope) {
  if (m_decoded.size() < m_raw.size()) {
    m_decoded.resize(m_raw.size());
  }
  m_attrs.clear();
  for (size_t i = 0; i < m_raw.size(); ++i) {
    std::string_view v = m_raw[i].raw;
    if (!m_raw[i].plain) {
      if (!chars::decode(v, true, m_decoded[i], m_error)) {
        return false;
      }
      v = m_decoded[i];
    }
    const std::string_view an = m_raw[i].qname;
    std::string_view ap;
    std::string_view al = an;
    if (m_raw[i].colon) {
      split(an, ap, al);
    }
    if (!m_may_declare || (!same(an, "xmlns") && !same(ap, "xmlns"))) {
      m_attrs.push_back(Attribute{al, ap, {}, v});
      continue;
    }
    const std::string_view declared = an == "xmlns" ? std::string_view() : al;
    if (declared == "xml") {
      if (v != k_xml_ns) {
        m_ns_errors.push_back("xml namespace prefix mapped to wrong URI");
      }
    } else if (declared == "xmlns") {
      m_ns_errors.push_back("redefinition of the xmlns prefix is forbidden");
    } else if (v == k_xml_ns || v == k_xmlns_ns) {
      m_ns_errors.push_back("reuse of the xml or xmlns namespace name is forbidden");
    } else if (!declared.empty() && v.empty()) {
      m_ns_errors.push_back("xmlns:" + std::string(declared) + ": Empty XML namespace is not allowed");
    } else if (!scope.bind(declared, v)) {
      m_error = "more than " + std::to_string(k_most_bindings) + " namespace declarations in scope";
      return false;
    }
  }
  return true;
}

// Names: the element's and each attribute's, against the bindings in scope
// (this tag's own included).
void StartTag::resolve_names(const NamespaceScope& scope) {
  prefix = {};
  name = qname;
  if (m_qname_colon) {
    // The last element name split, kept: a Sitemap's prefixed elements are
    // a few names (rs:md, rs:ln) again and again.
    if (!m_split_qname.empty() && same(m_split_qname, qname)) {
      prefix = qname.substr(0, m_split_at);
      name = qname.substr(m_split_at + 1);
    } else {
      const size_t errors = m_ns_errors.size();
      split(qname, prefix, name);
      if (m_ns_errors.size() == errors && !prefix.empty()) {
        m_split_qname.assign(qname);
        m_split_at = prefix.size();
      }
    }
  }
  ns = scope.lookup(prefix);
  if (!prefix.empty() && ns.empty()) {
    m_ns_errors.push_back("Namespace prefix " + std::string(prefix) + " on " + std::string(name) + " is not defined");
  }
  bool expanded_filled = false;
  for (size_t i = 0; i < m_attrs.size(); ++i) {
    Attribute& a = m_attrs[i];
    if (a.prefix.empty()) {
      continue;
    }
    a.ns = scope.lookup(a.prefix);
    if (a.ns.empty()) {
      m_ns_errors.push_back("Namespace prefix " + std::string(a.prefix) + " for " + std::string(a.name) + " on " +
                            std::string(name) + " is not defined");
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
      if (!expanded_filled) {
        m_seen.clear();
        expanded_filled = true;
      }
      twice = !m_seen.insert(std::string(a.ns) + '\n' + std::string(a.name)).second;
    }
    if (twice) {
      m_ns_errors.push_back("Namespaced Attribute " + std::string(a.name) + " in '" + std::string(a.ns) + "' redefined");
    }
  }
}

} // namespace tributary::rs::xml
