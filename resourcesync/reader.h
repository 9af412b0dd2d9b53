#pragma once

#include "resourcesync/model.h"

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace tributary::rs {

// Receives a document as it is read: the header once, then each entry, one
// at a time, so that memory stays flat however large the document is.
class DocumentHandler {
public:
  virtual ~DocumentHandler() = default;
  // Called once, before the first entry (for a document without entries, at
  // the end). Root-level elements that come after the first entry are not
  // part of it: they are reported as a warning and added to the summary's
  // header.
  virtual void on_header(const DocumentHeader& header) { (void)header; }
  // Called for each `<url>`/`<sitemap>` in document order; `line` is where
  // the entry starts. An exception thrown here stops reading and is rethrown
  // from Reader::feed/finish.
  virtual void on_entry(Entry&& entry, uint64_t line) = 0;
  // Called instead of on_entry for an entry whose `<loc>` cannot be used
  // (none, two, over the length limit, not a URI even against the
  // document's URL) or whose XML was broken inside it: `reason` is the
  // first error. The document stays usable. Any other bad value (a length
  // past 2^63, a lastmod in year 0, a type that is not a media type, a hash
  // of the wrong length...) costs that value only: it is dropped, reported
  // as an error, and the entry goes to on_entry without it.
  virtual void on_rejected_entry(Entry&& entry, uint64_t line, const std::string& reason) {
    (void)entry;
    (void)line;
    (void)reason;
  }
};

// The largest `length` accepted: what a signed 64-bit column holds.
inline constexpr uint64_t k_max_length = 0x7fffffffffffffffull;
// The longest `loc` read by default. Browsers and servers commonly stop at
// 8 KiB; the Sitemap protocol at 2,048.
inline constexpr size_t k_max_uri_bytes = 8192;

struct ReaderOptions {
  // Hard limit on the uncompressed size; reading stops with an error past
  // it (the 50 MB of the specification is a validation error, not this).
  uint64_t max_bytes = 128ull * 1024 * 1024;
  // Longest attribute value or element text accepted (a `loc` of 10 MB is
  // not a URL but an attack).
  size_t max_value_bytes = 1024 * 1024;
  // Longest `loc` accepted; a longer one rejects its entry.
  size_t max_uri_bytes = k_max_uri_bytes;
  // Deepest element nesting accepted.
  size_t max_depth = 64;
  // Diagnostics kept; the rest are counted in suppressed_diagnostics.
  size_t max_diagnostics = 500;
  // Apply the ResourceSync validation rules (well-formedness and value
  // syntax are always checked).
  bool validate = true;
  // The document's own URL: a relative `<loc>` or `href` is resolved
  // against it (with a warning). Without one, a relative `<loc>` costs its
  // entry.
  std::string base_url;
  // When the document was read: the time given to a change that has none
  // (neither `datetime` nor `<lastmod>`) when the document has no `until`.
  // Unset: the clock, when the entry is read.
  std::optional<Timestamp> read_time;
};

struct ReadSummary {
  // The header as finally known (including root elements after entries);
  // nullopt when no root element was read.
  std::optional<DocumentHeader> header;
  uint64_t entries = 0;
  uint64_t bytes = 0;            // uncompressed XML bytes read
  uint64_t compressed_bytes = 0; // bytes fed, when the input was gzip
  bool gzip = false;
  // Reading stopped early: not well-formed, DOCTYPE, a limit, or a root
  // element that is not a Sitemap.
  bool stopped = false;
  std::vector<Diagnostic> diagnostics;
  uint64_t errors = 0;   // including suppressed ones
  uint64_t warnings = 0; // including suppressed ones
  uint64_t suppressed_diagnostics = 0;

  // Entries rejected for an unusable `<loc>` (see
  // DocumentHandler::on_rejected_entry).
  uint64_t rejected_entries = 0;
  // Errors confined to one entry (counted in `errors` too): a rule it
  // breaks, or what rejected it.
  uint64_t entry_errors = 0;
  // Errors that cost one value only, dropped from its entry or from the
  // document's header (counted in `errors` too).
  uint64_t dropped_values = 0;
  // Changes (or an index's parts) listed out of time order (a warning
  // each): to be applied sorted by time.
  bool out_of_order = false;

  // No error at all: what a validator reports.
  bool valid() const { return errors == 0; }
  // Every error cost a value or an entry only: a Destination applies the
  // rest.
  bool usable() const { return !stopped && errors == entry_errors + dropped_values; }
};

// Push parser over our XML scanner (xml_scanner.h). Feed raw bytes as they arrive
// (plain or gzip-compressed, detected by the magic bytes; a UTF-8 BOM is
// fine); entries reach the handler as soon as they are complete.
// DOCTYPE declarations are refused, so no entity is ever expanded.
class Reader {
public:
  explicit Reader(DocumentHandler& handler, ReaderOptions options = {});
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Returns false once reading has stopped; further input is ignored.
  bool feed(const void* data, size_t size);
  bool feed(std::string_view data) { return feed(data.data(), data.size()); }
  // Ends the input and returns what was found. Call once.
  ReadSummary finish();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// Reads a whole buffer through `handler`.
ReadSummary read_document(std::string_view bytes, DocumentHandler& handler,
                          const ReaderOptions& options = {});
// Reads a stream in 64 KiB chunks through `handler`.
ReadSummary read_document(std::istream& in, DocumentHandler& handler,
                          const ReaderOptions& options = {});

struct ParsedDocument {
  Document document;
  ReadSummary summary;
  std::vector<Entry> rejected; // entries with a bad value, in document order
};

// Reads a whole buffer into memory (for small documents and tests).
ParsedDocument parse_document(std::string_view bytes, const ReaderOptions& options = {});

} // namespace tributary::rs
