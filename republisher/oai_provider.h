#pragma once

// Room republisher/oai_provider: the aggregate as an OAI-PMH 2.0 data
// provider (#52), at <public_url>/oai, built on the store's resources and
// the time their last change entered our change log (store/store_reader.h,
// DatedQuery), not on a second copy of the data. A record per resource we
// hold, deleted ones with status="deleted"; its identifier is the URL of
// our copy; oai_dc as an OAI-PMH source gave it, else derived from what we
// know of the resource; a set per published
// source set ("source:<name>", all of them "source") and per named set
// ("set:<name>"); stateless resumption tokens; keyset pages, so that a
// page deep in a million costs what the first does.

#include "common/http/server.h"
#include "common/result.h"
#include "republisher/documents.h"
#include "republisher/oai_protocol.h"
#include "republisher/oai_records.h"
#include "republisher/url_scheme.h"
#include "store/blob/blob_store.h"
#include "store/store_reader.h"

#include <memory>
#include <string>
#include <vector>

namespace tributary::pub {

struct OaiOptions {
  bool enabled = true;
  std::string repository_name;           // empty: "Tributary at <public_url>"
  std::vector<std::string> admin_emails; // empty: one made of the public URL's host
  size_t page_size = 100;                // records or headers a page
};

class OaiProvider {
public:
  OaiProvider(OaiOptions options, std::shared_ptr<store::StoreReader> reader,
              std::shared_ptr<store::BlobStore> blobs, const UrlScheme& urls, std::vector<NamedSet> named_sets);

  // Answers a GET (arguments in the query) or a POST (in a form body).
  // Reads the database: call on a worker.
  void serve(const http::Request& req, http::Response& res);

private:
  struct Sets;   // the published feeds and their sets, as of this request
  struct Answer; // the verb's element, or an OAI-PMH error
  Result<Answer> respond(const oai::Arguments& a, rs::Timestamp& response_date);
  Result<Answer> identify(rs::Timestamp& response_date);
  Result<Answer> list_metadata_formats(const oai::Arguments& a);
  Result<Answer> list_sets(const oai::Arguments& a);
  Result<Answer> get_record(const oai::Arguments& a);
  Result<Answer> list(const oai::Arguments& a, rs::Timestamp& response_date);
  Result<Sets> sets();
  static Answer fail(std::string code, std::string message);
  // A record of `d` in `prefix` (nullptr: its header alone).
  void append_record(std::string& out, const store::DatedResource& d, const Sets& sets,
                     const std::string* prefix) const;
  // The namespace and schema of the records held in `prefix` (harvested in
  // it), read from the first of them; nullopt when none says.
  Result<std::optional<oai_records::Format>> native_format(const Sets& sets, const std::string& prefix);
  // The feed and collection link an upstream set's spec
  // ("source:<set>:<spec>") names, for records in `prefix`.
  std::optional<std::pair<int64_t, std::string>> upstream_set(const Sets& sets, const std::string& spec,
                                                              const std::string& prefix) const;
  // The feed and URI our identifier names; nullopt when it names none.
  Result<std::optional<store::DatedResource>> find(const std::string& identifier, const Sets& sets);
  // The sets as of now and the record `identifier` names: an
  // idDoesNotExist answer in `missing` when it names none.
  struct Found;
  Result<Found> lookup(const std::string& identifier);

  OaiOptions m_options;
  std::shared_ptr<store::StoreReader> m_reader;
  std::shared_ptr<store::BlobStore> m_blobs;
  const UrlScheme& m_urls;
  std::vector<NamedSet> m_named_sets;
};

} // namespace tributary::pub
