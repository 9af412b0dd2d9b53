#pragma once

// Room republisher/oai_records: what one record of our OAI-PMH face says
// besides its header: its metadata in a format (as an OAI-PMH source gave it
// to us, or oai_dc derived from what we know), the upstream sets it was in,
// and where it came from (<about>, in the OAI provenance schema). Stateless:
// functions over a resource and the blob store, for OaiProvider.

#include "store/blob/blob_store.h"
#include "store/store.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::pub::oai_records {

// Where a record of an OAI-PMH source came from, read from the GetRecord URL
// its bytes were taken "from" (store::k_inline_prefix and the URL): the
// repository's base URL, the record's identifier there, the format we
// harvested. nullopt for any other resource.
struct Origin {
  std::string base_url;
  std::string identifier;
  std::string prefix;
};
std::optional<Origin> origin_of(const store::ResourceRecord& r);

// The metadata an OAI-PMH source gave us for `r` in `prefix`, as harvested:
// its root element, without an XML declaration; empty when we hold none.
std::string harvested(const store::BlobStore& blobs, const store::ResourceRecord& r, std::string_view prefix);

// A format as ListMetadataFormats names it.
struct Format {
  std::string prefix;
  std::string schema;
  std::string ns;
};
// The namespace and schema of `metadata` (a harvested record of `prefix`):
// its root's namespace and, for it, xsi:schemaLocation; else those of a
// well-known prefix (marc21, marcxml, mods, oai_datacite, datacite,
// oai_openaire, didl, ...) whose namespace matches; nullopt when nothing
// says (the format is then not offered).
std::optional<Format> format_of(std::string_view prefix, std::string_view metadata);

// The upstream sets `r` was listed in (its rel="collection" links to a
// ListRecords of its origin's set), as setSpecs "source:<set>:<spec>" of our
// set `set`; specs that are not valid setSpecs are left out.
std::vector<std::string> upstream_set_specs(const store::ResourceRecord& r, const Origin& o, const std::string& set);
// The same for one collection link's href; nullopt when it names no valid
// upstream set of `o`.
std::optional<std::string> upstream_set_spec(const std::string& href, const Origin& o, const std::string& set);
// The collection link a record in upstream set `spec` of origin `o` carries
// (what upstream_set_specs reads back).
std::string upstream_set_link(const Origin& o, const std::string& spec);
// Whether `s` is a valid setSpec part (OAI-PMH 2.0, setSpecType).
bool valid_spec_part(std::string_view s);

// oai_dc made of what we know of `r`: its URIs, date, format, where we read
// it (`source`: empty for none), its links as relations.
void append_derived_dc(std::string& out, const store::ResourceRecord& r, const std::string& identifier,
                       const std::string& source);

// <about> holding an OAI provenance description of `r` from `o`: its base
// URL, identifier, datestamp there, the namespace of what it served, when we
// harvested it, and whether what we serve is `altered` from that.
void append_provenance(std::string& out, const store::ResourceRecord& r, const Origin& o, std::string_view ns,
                       bool altered);

} // namespace tributary::pub::oai_records
