#pragma once

// Room resourcesync/xml_start_tag: one start tag of the XML scanner
// (xml_scanner.h), whole in memory: read in one pass, its values decoded,
// its namespace declarations bound in the scope (NamespaceScope), its names
// resolved. The scanner finds where a cut tag ends, and reports what this
// read. Internal to the reader.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tributary::rs::xml {

// An attribute of a start tag. `ns` is empty for an unprefixed attribute
// (Namespaces in XML 1.0: the default namespace does not apply to them).
struct Attribute {
  std::string_view name;   // local part
  std::string_view prefix;
  std::string_view ns;
  std::string_view value;  // references decoded, whitespace normalized
};

// A namespace declared on a start tag (xmlns or xmlns:prefix).
struct Namespace {
  std::string_view prefix; // empty for the default namespace
  std::string_view uri;
};

// The namespace bindings in scope, innermost last.
class NamespaceScope {
public:
  size_t mark() const { return m_bindings.size(); }
  // Back to what was in scope at `mark` (an element's end).
  void pop_to(size_t mark) {
    if (mark < m_bindings.size()) {
      m_bindings.resize(mark);
      forget_lookups();
    }
  }
  // False when the scope already holds its most (each name is looked up
  // among the bindings: a million would make every element cost that).
  bool bind(std::string_view prefix, std::string_view uri);
  // The URI bound to prefix ("xml" always is), or empty.
  std::string_view lookup(std::string_view prefix) const;
  // The bindings made since `mark`, as views.
  void since(size_t mark, std::vector<Namespace>& out) const;
  // A namespace name its user compares against: bound to it, lookup
  // returns this very view (whose storage must outlive the scope), so that
  // comparing pointers settles the comparison.
  void intern(std::string_view uri) { m_interned.push_back(uri); }

private:
  struct Binding {
    std::string prefix;
    std::string uri;
    std::string_view interned; // or empty
    std::string_view view() const { return interned.empty() ? std::string_view(uri) : interned; }
  };
  std::string_view find(std::string_view prefix) const;
  void forget_lookups() { m_default_known = m_last_known = false; }

  std::vector<Binding> m_bindings;
  std::vector<std::string_view> m_interned;
  // lookup()'s last answers, while the bindings stay as they are.
  mutable bool m_default_known = false;
  mutable std::string_view m_default;
  mutable bool m_last_known = false;
  mutable std::string m_last_prefix;
  mutable std::string_view m_last;
};

class StartTag {
public:
  enum class Parsed { done, cut, failed };

  // Reads the start tag at p (its '<') up to end. done: the fields below
  // are set; cut: end came before the tag's; failed: error() says why.
  Parsed parse(const char* p, const char* end);
  // Its values decoded, its declarations bound into scope, its names
  // resolved. False after a fatal error (error()); namespace errors, which
  // are not fatal, are in ns_errors() either way.
  bool resolve(NamespaceScope& scope);

  std::string_view qname;
  std::string_view name; // local part
  std::string_view prefix;
  std::string_view ns;
  bool empty = false;          // <a/>
  const char* after = nullptr; // past its '>'
  uint64_t lines = 0;          // line ends within it (up to an error)

  const std::string& error() const { return m_error; }
  const std::vector<std::string>& ns_errors() const { return m_ns_errors; }
  std::span<const Attribute> attributes() const { return m_attrs; }
  std::span<const Namespace> declared() const { return m_decls; }

private:
  struct RawAttr {
    std::string_view qname;
    std::string_view raw; // between the quotes
    bool plain;           // no reference, no whitespace to normalize
    bool colon;           // its name holds a ':' (else it has no prefix)
  };

  Parsed fail(std::string message);
  // The value after the quote at q, to its closing quote (q is left on it).
  Parsed value(const char*& q, const char* end, bool& plain);
  bool seen_before(std::string_view qname); // its first-byte test, in line; else:
  bool seen_before_slow(std::string_view qname);
  // A QName's prefix and local part, as libxml2 splits them.
  void split(std::string_view qn, std::string_view& prefix, std::string_view& local);
  bool bind_declarations(NamespaceScope& scope);
  void resolve_names(const NamespaceScope& scope);

  bool m_qname_colon = false; // the element's name holds a ':'
  bool m_may_declare = false;  // an attribute's name begins with "xmlns"
  uint64_t m_first_bytes[4] = {}; // the first bytes of its attributes' names (seen_before)
  std::string m_split_qname; // the last prefixed element name split without an error
  size_t m_split_at = 0;      // where its colon is
  std::string m_error;
  std::vector<std::string> m_ns_errors;
  // Kept from tag to tag to reuse their capacity.
  std::vector<RawAttr> m_raw;
  std::vector<Attribute> m_attrs;
  std::vector<Namespace> m_decls;
  std::vector<std::string> m_decoded;
  // The attribute names past a few (parse), then their expanded names
  // (resolve_names).
  std::unordered_set<std::string> m_seen;
};

} // namespace tributary::rs::xml
