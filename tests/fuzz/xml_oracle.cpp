// The XML scanner against libxml2 (#54): the same bytes through our
// scanner (resourcesync/xml_scanner.h) and through libxml2's SAX2 push
// parser with the options the reader used before the scanner replaced it.
// Both must agree on whether the document is well-formed and, where it is,
// on every element (local name, namespace, attributes and their values)
// and on the character data of each. The oracle is what the reader was;
// the scanner must not read a byte differently.
#include "targets.h"

#include "resourcesync/xml_scanner.h"

#include "common/text.h"

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace tributary::fuzz {

namespace {

// The events of a document, written as one string to compare.
struct Trace {
  std::string events;
  std::string text; // character data not yet written (merged across pieces)
  bool fatal = false;
  bool error = false; // any error, fatal or not (namespace errors are not)
  bool doctype = false;
  void flush() {
    if (!text.empty()) {
      events += "T[" + text + "]\n";
      text.clear();
    }
  }
  void start(std::string_view name, std::string_view ns) {
    flush();
    events += "S{" + std::string(ns) + "}" + std::string(name) + "\n";
  }
  void attr(std::string_view name, std::string_view ns, std::string_view value) {
    events += " A{" + std::string(ns) + "}" + std::string(name) + "=[" + std::string(value) + "]\n";
  }
  void end() {
    flush();
    events += "E\n";
  }
};

class Ours : public rs::xml::ScannerHandler {
public:
  Trace trace;
  rs::xml::Scanner scanner{*this, 1 << 20};
  void start_element(std::string_view name, std::string_view, std::string_view ns,
                     std::span<const rs::xml::Namespace>, std::span<const rs::xml::Attribute> attrs) override {
    trace.start(name, ns);
    for (const auto& a : attrs) {
      trace.attr(a.name, a.ns, a.value);
    }
  }
  void end_element() override { trace.end(); }
  void characters(std::string_view t) override { trace.text.append(t); }
  void doctype(std::string_view) override {
    trace.doctype = true;
    scanner.stop();
  }
  void xml_error(uint64_t, std::string, bool fatal) override {
    trace.fatal = trace.fatal || fatal;
    trace.error = true;
  }
};

void silent(void*, const char*, ...) {}

struct Theirs {
  Trace trace;
  xmlParserCtxtPtr ctxt = nullptr;
  static Theirs* self(void* ctx) { return static_cast<Theirs*>(ctx); }
  static void on_start(void* ctx, const xmlChar* localname, const xmlChar*, const xmlChar* uri, int, const xmlChar**,
                       int nb_attributes, int, const xmlChar** attributes) {
    Trace& t = self(ctx)->trace;
    auto sv = [](const xmlChar* s) { return s ? std::string_view(reinterpret_cast<const char*>(s)) : std::string_view(); };
    t.start(sv(localname), sv(uri));
    for (int i = 0; i < nb_attributes; ++i) {
      const xmlChar** a = attributes + 5 * i;
      t.attr(sv(a[0]), sv(a[2]),
             std::string_view(reinterpret_cast<const char*>(a[3]), static_cast<size_t>(a[4] - a[3])));
    }
  }
  static void on_end(void* ctx, const xmlChar*, const xmlChar*, const xmlChar*) { self(ctx)->trace.end(); }
  static void on_chars(void* ctx, const xmlChar* ch, int len) {
    self(ctx)->trace.text.append(reinterpret_cast<const char*>(ch), static_cast<size_t>(len));
  }
  // libxml2 2.9 hands CDATA sections over with their carriage returns;
  // XML normalizes line ends before parsing (2.11), CDATA included, and so
  // does the scanner: the one difference kept on purpose.
  static void on_cdata(void* ctx, const xmlChar* ch, int len) {
    std::string& text = self(ctx)->trace.text;
    for (int i = 0; i < len; ++i) {
      if (ch[i] != '\r') {
        text += static_cast<char>(ch[i]);
      } else if (i + 1 >= len || ch[i + 1] != '\n') {
        text += '\n';
      }
    }
  }
  static void on_doctype(void* ctx, const xmlChar*, const xmlChar*, const xmlChar*) {
    self(ctx)->trace.doctype = true;
    xmlStopParser(self(ctx)->ctxt);
  }
  static void on_error(void* ctx, xmlErrorPtr err) {
    if (err && err->level == XML_ERR_FATAL) {
      self(ctx)->trace.fatal = true;
    }
    // A namespace name that is not a URI libxml2 can parse is an error to
    // it; the scanner takes any string, as Namespaces in XML 1.0 allows
    // reading it (the reader knows its two namespaces by their exact
    // strings): a difference kept on purpose.
    if (err && err->level >= XML_ERR_ERROR && err->code != XML_WAR_NS_URI && err->code != XML_WAR_NS_URI_RELATIVE) {
      self(ctx)->trace.error = true;
    }
  }
};

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const CodePoint c = decode_utf8(s, i);
    if (c.length == 0) {
      return false;
    }
    i += c.length;
  }
  return true;
}

Trace libxml2_trace(std::string_view bytes) {
  static std::once_flag once;
  std::call_once(once, [] {
    xmlInitParser();
    xmlSetGenericErrorFunc(nullptr, silent);
  });
  Theirs theirs;
  xmlSAXHandler sax{};
  sax.initialized = XML_SAX2_MAGIC;
  sax.startElementNs = &Theirs::on_start;
  sax.endElementNs = &Theirs::on_end;
  sax.characters = &Theirs::on_chars;
  sax.cdataBlock = &Theirs::on_cdata;
  sax.ignorableWhitespace = &Theirs::on_chars;
  sax.internalSubset = &Theirs::on_doctype;
  sax.externalSubset = &Theirs::on_doctype;
  sax.serror = &Theirs::on_error;
  theirs.ctxt = xmlCreatePushParserCtxt(&sax, &theirs, nullptr, 0, nullptr);
  // (Without XML_PARSE_NOCDATA, which the reader set: it hands CDATA to
  // `characters`, where on_cdata could not normalize it.)
  xmlCtxtUseOptions(theirs.ctxt, XML_PARSE_NOENT | XML_PARSE_NONET | XML_PARSE_IGNORE_ENC);
  const int rc = xmlParseChunk(theirs.ctxt, bytes.data(), static_cast<int>(bytes.size()), 1);
  if (rc != 0 || !theirs.ctxt->wellFormed) {
    theirs.trace.fatal = true;
    theirs.trace.error = true;
  }
  xmlFreeParserCtxt(theirs.ctxt);
  theirs.trace.flush();
  return theirs.trace;
}

Trace scanner_trace(std::string_view bytes, size_t piece) {
  Ours ours;
  for (size_t at = 0; at < bytes.size() && !ours.scanner.stopped(); at += piece) {
    ours.scanner.feed(bytes.substr(at, piece));
  }
  ours.scanner.finish();
  ours.trace.flush();
  return ours.trace;
}

[[noreturn]] void differs(const char* what, const Trace& a, const Trace& b) {
  std::fprintf(stderr, "fuzz property broken: %s\n--- scanner (fatal %d, error %d, doctype %d)\n%s--- libxml2 (fatal %d, error %d, doctype %d)\n%s",
               what, a.fatal, a.error, a.doctype, a.events.c_str(), b.fatal, b.error, b.doctype, b.events.c_str());
  std::abort();
}

} // namespace

int xml_scanner(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The reader's input decoder hands the scanner valid UTF-8 only, without
  // the NUL bytes libxml2 stops at silently; sizes the fuzzer makes small.
  if (size > (1 << 16) || !valid_utf8(bytes) || bytes.find('\0') != std::string_view::npos) {
    return 0;
  }
  const Trace whole = scanner_trace(bytes, bytes.size() + 1);
  const Trace pieces = scanner_trace(bytes, 3);
  // (What a broken document reports before its error depends on where it
  // was cut, as with any streaming parser: only the verdict counts there.)
  if (whole.fatal != pieces.fatal || whole.doctype != pieces.doctype || (!whole.fatal && whole.events != pieces.events)) {
    differs("the scanner reads the bytes differently whole and in pieces of 3", whole, pieces);
  }
  const Trace oracle = libxml2_trace(bytes);
  if (whole.doctype || oracle.doctype) {
    // Both stop at a DOCTYPE; libxml2 reports it once it has read all of it.
    if (whole.doctype != oracle.doctype && !whole.fatal && !oracle.fatal) {
      differs("one of the two saw a DOCTYPE", whole, oracle);
    }
    return 0;
  }
  // An error of either kind makes the reader refuse what it is in (the
  // entry, or the document): which kind, for names libxml2 half-reads
  // (a:b:c, prefixes bound nowhere), need not match.
  if (whole.error != oracle.error) {
    differs("an error for one, none for the other", whole, oracle);
  }
  if (whole.fatal != oracle.fatal && !whole.error) {
    differs("well-formed for one, not for the other", whole, oracle);
  }
  if (!whole.error && whole.events != oracle.events) {
    differs("a well-formed document read differently", whole, oracle);
  }
  return 0;
}

} // namespace tributary::fuzz
