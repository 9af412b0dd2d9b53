#pragma once

// The class body of Reader::Impl: the state of one document being read.
// Included by reader.cpp alone (its member functions are all there); not
// part of the protocol library's interface.

#include "resourcesync/reader.h"
#include "resourcesync/reader_input.h"
#include "resourcesync/reader_values.h"
#include "resourcesync/validator.h"
#include "resourcesync/xml_scanner.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::rs {

namespace reading {

inline constexpr size_t k_chunk = 64 * 1024;

enum class Ctx {
  none,      // before the root
  root,      // directly inside urlset/sitemapindex
  entry,     // inside url/sitemap
  text,      // inside loc/lastmod/changefreq/priority
  skip,      // inside an element already reported, ignored
  extension, // inside an unknown element being captured
};

enum class TextField { loc, lastmod, changefreq, priority };

} // namespace reading

// The names of reading the class below uses.
using reading::Attr;
using reading::Ctx;
using reading::TextField;

// The state of one document being read: its structure as the XML scanner
// (xml_scanner.h) reports it. Values are read by a ValueReader
// (reader_values.h), bytes come in through an InputDecoder
// (reader_input.h); all three report back through the interfaces this
// implements.
struct Reader::Impl : reading::InputDecoder::Sink, reading::ValueReader::Sink, xml::ScannerHandler {
  DocumentHandler& handler;
  ReaderOptions options;
  ReadSummary summary;
  Validator validator;

  reading::ValueReader values{*this, options};

  reading::InputDecoder input{*this, options.max_bytes};
  // A start tag may hold several values, each up to the value limit.
  xml::Scanner scanner{*this, 4 * options.max_value_bytes + 64 * 1024};

  std::vector<Ctx> stack;
  DocumentHeader header;
  uint64_t root_line = 0;
  bool header_delivered = false;
  bool root_seen = false;
  Entry entry;
  uint64_t entry_line = 0;
  bool entry_md_seen = false;
  uint64_t entry_errors_at_start = 0;  // summary.errors when the entry began
  uint64_t dropped_at_start = 0;       // summary.dropped_values then
  std::string entry_fault;             // what rejects the open entry: its loc, or broken XML in it
  std::optional<Timestamp> last_change; // the latest change time read so far
  TextField text_field = TextField::loc;
  std::string text;
  bool text_too_long = false;
  std::vector<XmlNode> ext_stack;
  std::exception_ptr exception;

  Impl(DocumentHandler& h, ReaderOptions o)
      : handler(h), options(o),
        validator([this](Severity s, uint64_t line, std::string msg) {
          diag(s, line, std::move(msg));
        }) {
    scanner.intern(k_sitemap_ns);
    scanner.intern(k_rs_ns);
  }

  uint64_t line() const { return scanner.line(); }

  void diag(Severity s, uint64_t line_no, std::string msg) {
    if (s == Severity::error) {
      ++summary.errors;
    } else {
      ++summary.warnings;
    }
    if (summary.diagnostics.size() >= options.max_diagnostics) {
      ++summary.suppressed_diagnostics;
      return;
    }
    summary.diagnostics.push_back(Diagnostic{s, line_no, std::move(msg)});
  }
  void error(std::string msg) { error_at(line(), std::move(msg)); }
  // An error inside an entry is the entry's (its first one, the reason it
  // is rejected for), whoever found it: our checks or the XML scanner (a namespace
  // error inside a <url> once rejected it without a reason, found by
  // fuzzing).
  void error_at(uint64_t line_no, std::string msg) {
    if (!stack.empty() && entry_fault.empty() &&
        std::find(stack.begin(), stack.end(), Ctx::entry) != stack.end()) {
      entry_fault = msg;
    }
    diag(Severity::error, line_no, std::move(msg));
  }
  void warning(std::string msg) override { diag(Severity::warning, line(), std::move(msg)); }
  // A value that cannot be used: it is dropped, and costs nothing else.
  void value_error(std::string msg) override {
    ++summary.dropped_values;
    diag(Severity::error, line(), std::move(msg));
  }

  // Stops reading for good: the rest of the input is ignored.
  void stop(std::string msg) override {
    if (!summary.stopped) {
      error(std::move(msg));
      summary.stopped = true;
    }
    scanner.stop();
  }

  // ---- bytes in (InputDecoder::Sink) -------------------------------------
  void on_text(const char* data, size_t size, bool terminate) override { feed_parser(data, size, terminate); }
  bool halted() const override { return summary.stopped || exception; }
  // The text to the XML scanner (an exception from a handler stops it).
  void feed_parser(const char* data, size_t size, bool terminate);

  // ---- the document's structure, as the scanner reports it (reader.cpp) ---
  void deliver_header();
  void start_element(std::string_view name, std::string_view prefix, std::string_view ns,
                     std::span<const xml::Namespace> declared, std::span<const Attr> attrs) override;
  void end_element() override;
  void characters(std::string_view text) override;
  void doctype(std::string_view name) override;
  void xml_error(uint64_t line, std::string message, bool fatal) override;
  void start_root(std::string_view name, std::string_view ns, std::span<const xml::Namespace> declared);
  void start_in_root(std::string_view name, std::string_view prefix, std::string_view ns,
                     std::span<const Attr> attrs);
  void start_in_entry(std::string_view name, std::string_view prefix, std::string_view ns,
                      std::span<const Attr> attrs);
  static std::string_view trim(std::string_view s);
  void end_text();
  void resolve(std::string& ref, std::string_view what, uint64_t line_no);
  void infer_change_time();
  void end_entry();
};

} // namespace tributary::rs
