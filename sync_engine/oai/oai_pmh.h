#pragma once

// OAI-PMH 2.0 as a Source (#36), the protocol half: the requests a harvest
// makes and what their answers say, with no I/O. The harvester (next) turns
// pages into the changes the engine already applies: a record is a
// resource whose content is its metadata XML, whose lastmod is its
// datestamp, and whose deletion is `status="deleted"`.
//
// Read liberally: what one record gets wrong (characters XML forbids, a
// datestamp that does not parse, no identifier) costs that record, with a
// warning naming it; the page and every other record on it are kept.

#include "common/result.h"
#include "resourcesync/datetime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::sync::oai {

// How precisely a repository dates its records (Identify's granularity).
enum class Granularity { day, second };

// Identify: what a harvest needs to know of the repository.
struct Identify {
  std::string repository_name;
  std::string base_url;
  std::string protocol_version;
  Granularity granularity = Granularity::day;
  // "no", "transient" or "persistent": whether deletions are reported, and
  // for how long.
  std::string deleted_record = "no";
  std::optional<rs::Timestamp> earliest_datestamp;
};

struct MetadataFormat {
  std::string prefix;
  std::string schema;
  std::string namespace_uri;
};

struct Set {
  std::string spec;
  std::string name;
};

// One record (ListRecords, GetRecord) or header (ListIdentifiers).
struct Record {
  std::string identifier;
  rs::Timestamp datestamp{};
  bool deleted = false;
  std::vector<std::string> sets;
  // The <metadata> element's child, serialised as it came (with the
  // namespaces it uses declared on it); empty for a deleted record or a
  // header.
  std::string metadata;
};

// A list's flow control: an empty `token` ends the list.
struct Resumption {
  std::string token;
  std::optional<uint64_t> cursor;
  std::optional<uint64_t> complete_list_size;
  std::optional<rs::Timestamp> expires;
};

// An OAI-PMH error the repository answered with (badResumptionToken,
// noRecordsMatch, cannotDisseminateFormat, badArgument, ...).
struct ProtocolError {
  std::string code;
  std::string message;
};

// A record, header or value the page held but we could not use, and why.
struct Warning {
  uint64_t line = 0;
  std::string identifier; // when known
  std::string reason;
};

// One page of ListRecords or ListIdentifiers.
struct Page {
  std::optional<rs::Timestamp> response_date;
  std::vector<Record> records;
  Resumption resumption;
  std::vector<ProtocolError> errors;
  std::vector<Warning> warnings;
  // No more records in this list (no token, or noRecordsMatch).
  bool last() const { return resumption.token.empty(); }
  bool has_error(std::string_view code) const;
};

// The request URLs of a harvest. `base_url` is the repository's base URL;
// a resumption token stands alone with its verb, as the protocol asks.
struct ListRequest {
  std::string verb = "ListRecords"; // or "ListIdentifiers"
  std::string metadata_prefix = "oai_dc";
  std::optional<std::string> set;
  std::optional<rs::Timestamp> from;
  std::optional<rs::Timestamp> until;
  Granularity granularity = Granularity::day;
  std::string resumption_token;
};
std::string list_url(const std::string& base_url, const ListRequest& r);
std::string identify_url(const std::string& base_url);
std::string list_metadata_formats_url(const std::string& base_url);
std::string list_sets_url(const std::string& base_url, const std::string& resumption_token = "");
std::string get_record_url(const std::string& base_url, const std::string& identifier,
                           const std::string& metadata_prefix);

// A datestamp at a granularity, as a request's from/until: from is rounded
// down and until up, so that the window never loses a record.
std::string format_datestamp(rs::Timestamp t, Granularity g, bool round_up = false);

// The answers. A document that is not OAI-PMH at all fails; everything else
// is a page, with what it could not use in `warnings`.
Result<Identify> parse_identify(std::string_view body, std::vector<ProtocolError>* errors = nullptr);
Result<std::vector<MetadataFormat>> parse_metadata_formats(std::string_view body);
Result<std::vector<Set>> parse_sets(std::string_view body, Resumption* resumption = nullptr);
Result<Page> parse_list(std::string_view body);

} // namespace tributary::sync::oai
