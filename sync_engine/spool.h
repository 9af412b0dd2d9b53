#pragma once

#include "resourcesync/reader.h"
#include "sync_engine/fetcher.h"

#include <filesystem>
#include <memory>

namespace tributary::sync {

// A document downloaded to a temporary file and validated in a first pass,
// so that nothing of a document that turns out broken is ever applied; a
// second pass (read()) then streams its entries. The file is removed when
// the object goes away.
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
  // The validation pass: header, entry count, diagnostics.
  const rs::ReadSummary& summary() const { return m_summary; }
  const rs::DocumentHeader& header() const { return *m_summary.header; }
  // "line 12: <message>; line 14: ..." for the first few errors.
  std::string error_text(size_t max = 3) const;

  // Streams the entries (and header) again through `handler`.
  Result<rs::ReadSummary> read(rs::DocumentHandler& handler) const;

private:
  friend Result<std::unique_ptr<SpooledDocument>> spool_document(Fetcher&, const std::string&, const FetchOptions&,
                                                                 const std::filesystem::path&);
  SpooledDocument() = default;
  std::string m_url;
  std::filesystem::path m_path;
  FetchResponse m_response;
  rs::ReadSummary m_summary;
  rs::ReaderOptions m_options; // its URL (relative locs resolve against it) and when it was read
};

// Downloads `url` into `tmp_dir` and validates it. Fails for transport
// errors and non-2xx statuses (304 excepted: see not_modified()), and
// (invalid_document) when the body is not a ResourceSync document at all; a
// document with validation errors is returned (check summary().valid()).
Result<std::unique_ptr<SpooledDocument>> spool_document(Fetcher& fetcher, const std::string& url,
                                                        const FetchOptions& options,
                                                        const std::filesystem::path& tmp_dir);

} // namespace tributary::sync
