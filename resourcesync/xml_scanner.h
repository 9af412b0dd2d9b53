#pragma once

// A streaming scanner for the XML that Sitemap documents are: XML 1.0 with
// Namespaces, in UTF-8 (the reader's input decoder has made the bytes
// valid UTF-8 before they come here), without a DTD (a DOCTYPE is reported
// and the reader stops). It checks well-formedness as libxml2 does for such
// documents, reports what it reads as events with views into its buffer,
// and copies nothing it does not have to: a value without references or
// carriage returns is a view of the input.
//
// It replaced libxml2's push parser in the reader (#54): that parser was
// half the instructions of reading a Change List (533 M of 918 M for 50,000
// entries), most of it interning names and looking ahead for the end of
// each construct. What a Sitemap needs of XML is small enough to own.
//
// Input may be cut anywhere: a construct cut by the end of a piece waits
// for the next, and character data is reported in pieces.

#include "resourcesync/xml_start_tag.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::rs::xml {

class ScannerHandler {
public:
  virtual ~ScannerHandler() = default;
  virtual void start_element(std::string_view name, std::string_view prefix, std::string_view ns,
                             std::span<const Namespace> declared, std::span<const Attribute> attributes) = 0;
  virtual void end_element() = 0;
  // Character data of the current element, possibly in several pieces
  // (CDATA sections included). Outside the root only whitespace is allowed
  // and none is reported.
  virtual void characters(std::string_view text) = 0;
  // <!DOCTYPE name ...>: the handler decides (the reader stops).
  virtual void doctype(std::string_view name) = 0;
  // A fatal error stops the scanner; others (namespace errors, as libxml2
  // counts them) let it go on.
  virtual void xml_error(uint64_t line, std::string message, bool fatal) = 0;
};

class Scanner {
public:
  // A markup construct (tag, comment, processing instruction, CDATA
  // section) longer than max_markup_bytes is a fatal error; character data
  // is never held whole.
  Scanner(ScannerHandler& handler, size_t max_markup_bytes);

  void feed(std::string_view bytes);
  // The end of the input: what is still open is an error.
  void finish();
  // No event after this.
  void stop() { m_stopped = true; }
  bool stopped() const { return m_stopped; }
  // A namespace name the handler compares against, reported as this very
  // view (its storage must outlive the scanner): comparing pointers first
  // settles most comparisons.
  void intern(std::string_view uri) { m_scope.intern(uri); }
  // The line (from 1) where the construct being reported ends.
  uint64_t line() const { return m_line; }

private:
  enum class Where { prolog, content, epilog };
  struct Open {
    size_t name_at;  // its qname: m_names[name_at, name_at + name_size)
    size_t name_size;
    size_t bindings; // m_scope.mark() before the element's own
    uint64_t line;
  };
  std::string_view open_name(const Open& o) const { return std::string_view(m_names).substr(o.name_at, o.name_size); }
  // Closes the innermost element (its bindings and name go).
  void close_element();

  // Scans [data, data + size): returns how much was consumed (the rest is a
  // construct cut by the end of the input, or nothing once stopped).
  size_t scan(const char* data, size_t size, bool final);
  size_t text(const char* p, const char* end, bool final);
  size_t markup(const char* p, const char* end, bool final);
  size_t start_tag(const char* p, const char* end, bool final);
  // The start tag at p read and reported if it is whole before end: what
  // it took (0 after an error), or nothing while it is cut.
  std::optional<size_t> read_start_tag(const char* p, const char* end);
  size_t end_tag(const char* p, const char* end, bool final);
  size_t comment(const char* p, const char* end, bool final);
  size_t pi(const char* p, const char* end, bool final);
  size_t cdata(const char* p, const char* end, bool final);
  // The delimiter that ends the construct at p (skip bytes in), searched
  // for from where the previous piece's search stopped; null while cut.
  const char* find_close(const char* p, const char* end, size_t skip, std::string_view delimiter);
  size_t doctype(const char* p, const char* end, bool final);

  // False, after a fatal error, when raw holds a character XML does not
  // allow (`what` names the construct in the message).
  bool chars_ok(std::string_view raw, const char* what);
  // A construct cut by the end of the input: wait for more, unless this is
  // the end or it is over the limit.
  size_t incomplete(const char* p, const char* end, bool final, const char* what);
  void fatal(std::string message);
  void ns_error(std::string message);

  ScannerHandler& m_handler;
  size_t m_max_markup;
  std::string m_pending;   // an unfinished construct, and what came after it
  size_t m_resume = 0;     // where in m_pending the search for its end goes on
  char m_quote = 0;        // the quote open at m_resume, in a start tag
  uint64_t m_line = 1;
  bool m_started = false;  // past the byte-order mark, if any
  bool m_at_start = true;  // nothing read yet (where the XML declaration may be)
  Where m_where = Where::prolog;
  bool m_stopped = false;
  std::vector<Open> m_open;
  std::string m_names; // the open elements' qnames, one after another
  NamespaceScope m_scope;
  StartTag m_tag; // the start tag being read (its buffers kept for the next)
  std::string m_text; // decoded character data
};

} // namespace tributary::rs::xml
