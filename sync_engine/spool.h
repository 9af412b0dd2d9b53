#pragma once

#include "resourcesync/reader.h"
#include "sync_engine/fetcher.h"

#include <filesystem>
#include <future>
#include <memory>
#include <optional>

namespace tributary::sync {

// A document downloaded to a temporary file and validated in a first pass,
// so that nothing of a document that turns out broken is ever applied; a
// second pass (read()) then streams its entries. The file is removed when
// the object goes away.
//
// The first pass may run on a thread of its own while the second reads
// (spool_document's `defer_validation`): a baseline then fetches its first
// batch meanwhile (the pass took 14 ms of a 10,000-entry list), and applies
// nothing until validated() said yes.
class SpooledDocument {
public:
  ~SpooledDocument();
  SpooledDocument(const SpooledDocument&) = delete;
  SpooledDocument& operator=(const SpooledDocument&) = delete;

  const std::string& url() const { return m_url; }
  // True when the server answered 304 Not Modified to a conditional request
  // (there is then no document to read).
  bool not_modified() const { return m_response.status == 304; }
  const FetchResponse& response() const { return m_response; }
  // The validation pass: header, entry count, diagnostics (waiting for a
  // deferred pass to end).
  const rs::ReadSummary& summary() const;
  const rs::DocumentHeader& header() const { return *summary().header; }
  // The header as read up to the first entry, without waiting (with a
  // deferred pass; the pass adds root-level elements after the entries).
  // Null when the document has none there (not ResourceSync, or none yet).
  const rs::DocumentHeader* early_header() const { return m_early ? &*m_early : nullptr; }
  // Waits for a deferred pass: an error if it failed to read the file, or
  // found no ResourceSync document (then, as spool_document would have).
  Result<void> validated() const;
  bool deferred() const { return m_deferred; }
  // "line 12: <message>; line 14: ..." for the first few errors.
  std::string error_text(size_t max = 3) const;

  // Streams the entries (and header) again through `handler`.
  Result<rs::ReadSummary> read(rs::DocumentHandler& handler) const;

private:
  friend Result<std::unique_ptr<SpooledDocument>> spool_document(Fetcher&, const std::string&, const FetchOptions&,
                                                                 const std::filesystem::path&, bool);
  SpooledDocument() = default;
  // Reads up to the first entry (m_early); false when no header came.
  bool read_early_header();
  std::string m_url;
  std::filesystem::path m_path;
  FetchResponse m_response;
  rs::ReaderOptions m_options; // its URL (relative locs resolve against it) and when it was read
  std::optional<rs::DocumentHeader> m_early;
  bool m_deferred = false;
  // The pass: its future while deferred, then its outcome.
  mutable std::future<Result<rs::ReadSummary>> m_pass;
  mutable rs::ReadSummary m_summary;
  mutable std::optional<Error> m_pass_error;
};

// Downloads `url` into `tmp_dir` and validates it. Fails for transport
// errors and non-2xx statuses (304 excepted: see not_modified()), and
// (invalid_document) when the body is not a ResourceSync document at all; a
// document with validation errors is returned (check summary().valid()).
Result<std::unique_ptr<SpooledDocument>> spool_document(Fetcher& fetcher, const std::string& url,
                                                        const FetchOptions& options,
                                                        const std::filesystem::path& tmp_dir,
                                                        bool defer_validation = false);

} // namespace tributary::sync
