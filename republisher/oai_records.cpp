// What one record of our OAI-PMH face says besides its header (#52).
#include "republisher/oai_records.h"

#include "common/percent.h"
#include "republisher/oai_protocol.h"
#include "resourcesync/writer.h"

namespace tributary::pub::oai_records {

namespace {

constexpr std::string_view k_verb_get_record = "verb=GetRecord";

void element(std::string& out, std::string_view name, std::string_view value) {
  out += '<';
  out += name;
  out += '>';
  rs::append_xml_escaped(out, value, false);
  out += "</";
  out += name;
  out += '>';
}

// The value of attribute `name` in a start tag; nullopt when absent.
std::optional<std::string> attribute(std::string_view tag, std::string_view name) {
  for (size_t at = tag.find(name); at != std::string_view::npos; at = tag.find(name, at + 1)) {
    const bool starts = at > 0 && (tag[at - 1] == ' ' || tag[at - 1] == '\t' || tag[at - 1] == '\n' ||
                                   tag[at - 1] == '\r');
    size_t p = at + name.size();
    while (p < tag.size() && (tag[p] == ' ' || tag[p] == '\t' || tag[p] == '\n' || tag[p] == '\r')) {
      ++p;
    }
    if (!starts || p >= tag.size() || tag[p] != '=') {
      continue;
    }
    ++p;
    while (p < tag.size() && (tag[p] == ' ' || tag[p] == '\t' || tag[p] == '\n' || tag[p] == '\r')) {
      ++p;
    }
    if (p >= tag.size() || (tag[p] != '"' && tag[p] != '\'')) {
      continue;
    }
    const size_t end = tag.find(tag[p], p + 1);
    if (end == std::string_view::npos) {
      return std::nullopt;
    }
    return std::string(tag.substr(p + 1, end - p - 1));
  }
  return std::nullopt;
}

struct Known {
  std::string_view ns;
  std::string_view schema;
};
// Formats repositories serve (DSpace, EPrints, InvenioRDM, OJS), by
// namespace: their published schemas.
constexpr Known k_known[] = {
    {"http://www.loc.gov/MARC21/slim", "http://www.loc.gov/standards/marcxml/schema/MARC21slim.xsd"},
    {"http://www.loc.gov/mods/v3", "http://www.loc.gov/standards/mods/mods.xsd"},
    {"http://www.loc.gov/METS/", "http://www.loc.gov/standards/mets/mets.xsd"},
    {"http://schema.datacite.org/oai/oai-1.1/", "http://schema.datacite.org/oai/oai-1.1/oai.xsd"},
    {"http://datacite.org/schema/kernel-4", "http://schema.datacite.org/meta/kernel-4/metadata.xsd"},
    {"http://namespace.openaire.eu/schema/oaire/", "https://www.openaire.eu/schema/repo-lit/4.0/openaire.xsd"},
    {"urn:mpeg:mpeg21:2002:02-DIDL-NS",
     "http://standards.iso.org/ittf/PubliclyAvailableStandards/MPEG-21_schema_files/did/didl.xsd"},
    {"http://www.openarchives.org/OAI/2.0/oai_dc/", "http://www.openarchives.org/OAI/2.0/oai_dc.xsd"},
};

std::string_view trim_declaration(std::string_view xml) {
  if (xml.rfind("<?xml", 0) == 0) {
    const size_t end = xml.find("?>");
    xml = end == std::string_view::npos ? std::string_view() : xml.substr(end + 2);
  }
  while (!xml.empty() && (xml.front() == '\n' || xml.front() == '\r' || xml.front() == ' ' || xml.front() == '\t')) {
    xml.remove_prefix(1);
  }
  return xml;
}

} // namespace

bool valid_spec_part(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    std::string_view("-_.!~*'()").find(c) != std::string_view::npos;
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::optional<Origin> origin_of(const store::ResourceRecord& r) {
  if (!r.fetched_from || r.fetched_from->rfind(store::k_inline_prefix, 0) != 0) {
    return std::nullopt;
  }
  const std::string_view url = std::string_view(*r.fetched_from).substr(store::k_inline_prefix.size());
  const size_t verb = url.find(k_verb_get_record);
  if (verb == std::string_view::npos || verb == 0 || (url[verb - 1] != '?' && url[verb - 1] != '&')) {
    return std::nullopt;
  }
  auto pairs = form_pairs(url.substr(verb));
  if (!pairs) {
    return std::nullopt;
  }
  Origin o;
  o.base_url = std::string(url.substr(0, verb - 1));
  for (auto& [name, value] : *pairs) {
    if (name == "identifier") {
      o.identifier = std::move(value);
    } else if (name == "metadataPrefix") {
      o.prefix = std::move(value);
    }
  }
  if (o.identifier.empty() || o.prefix.empty()) {
    return std::nullopt;
  }
  return o;
}

std::string harvested(const store::BlobStore& blobs, const store::ResourceRecord& r, std::string_view prefix) {
  // A record of an OAI-PMH source is held as its <metadata> child, with the
  // namespaces it uses declared on it.
  const auto o = origin_of(r);
  if (!o || o->prefix != prefix || !r.blob_sha256 || r.state != store::ResourceState::live) {
    return {};
  }
  auto bytes = blobs.read(*r.blob_sha256);
  if (!bytes) {
    return {};
  }
  const std::string_view xml = trim_declaration(*bytes);
  if (xml.empty() || xml.front() != '<' || xml.size() < 2 || xml[1] == '!' || xml[1] == '?') {
    return {};
  }
  if (prefix == "oai_dc") {
    // Only an oai_dc record: its root is "dc" in the oai_dc namespace.
    auto f = format_of(prefix, xml);
    if (!f || f->ns != "http://www.openarchives.org/OAI/2.0/oai_dc/") {
      return {};
    }
  }
  return std::string(xml);
}

std::optional<Format> format_of(std::string_view prefix, std::string_view metadata) {
  metadata = trim_declaration(metadata);
  if (metadata.empty() || metadata.front() != '<') {
    return std::nullopt;
  }
  const std::string_view tag = metadata.substr(0, metadata.find('>'));
  const size_t name_end = tag.find_first_of(" \t\r\n/");
  const std::string_view name = tag.substr(1, name_end == std::string_view::npos ? std::string_view::npos
                                                                                 : name_end - 1);
  const size_t colon = name.find(':');
  const std::string declaration =
      colon == std::string_view::npos ? std::string("xmlns") : "xmlns:" + std::string(name.substr(0, colon));
  auto ns = attribute(tag, declaration);
  if (!ns || ns->empty()) {
    return std::nullopt;
  }
  Format f{std::string(prefix), {}, *ns};
  if (auto locations = attribute(tag, "xsi:schemaLocation")) {
    // Pairs of namespace and location, white space between.
    std::vector<std::string> words;
    std::string word;
    for (char c : *locations + " ") {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        if (!word.empty()) {
          words.push_back(std::move(word));
          word.clear();
        }
      } else {
        word += c;
      }
    }
    for (size_t i = 0; i + 1 < words.size(); i += 2) {
      if (words[i] == f.ns) {
        f.schema = words[i + 1];
      }
    }
  }
  if (f.schema.empty()) {
    for (const auto& k : k_known) {
      if (k.ns == f.ns) {
        f.schema = std::string(k.schema);
      }
    }
  }
  if (f.schema.empty()) {
    return std::nullopt;
  }
  return f;
}

namespace {

// What our OAI-PMH harvester names an upstream ListRecords by (its
// list_url): the base URL, then its parameters in this order.
std::string list_records_head(const Origin& o) {
  return o.base_url + (o.base_url.find('?') == std::string::npos ? "?" : "&") + "verb=ListRecords&";
}

} // namespace

std::string upstream_set_link(const Origin& o, const std::string& spec) {
  return list_records_head(o) + "metadataPrefix=" + percent_encode(o.prefix) + "&set=" + percent_encode(spec);
}

std::optional<std::string> upstream_set_spec(const std::string& href, const Origin& o, const std::string& set) {
  const std::string head = list_records_head(o);
  if (href.rfind(head, 0) != 0) {
    return std::nullopt;
  }
  auto pairs = form_pairs(std::string_view(href).substr(o.base_url.size() + 1));
  if (!pairs) {
    return std::nullopt;
  }
  for (const auto& [name, spec] : *pairs) {
    if (name != "set") {
      continue;
    }
    bool valid = !spec.empty();
    for (size_t start = 0; valid && start <= spec.size();) {
      const size_t end = std::min(spec.find(':', start), spec.size());
      valid = valid_spec_part(std::string_view(spec).substr(start, end - start));
      start = end + 1;
    }
    if (valid) {
      return "source:" + set + ":" + spec;
    }
  }
  return std::nullopt;
}

std::vector<std::string> upstream_set_specs(const store::ResourceRecord& r, const Origin& o, const std::string& set) {
  std::vector<std::string> out;
  for (const auto& l : r.links) {
    if (l.rel != "collection") {
      continue;
    }
    if (auto spec = upstream_set_spec(l.href, o, set)) {
      out.push_back(std::move(*spec));
    }
  }
  return out;
}

void append_derived_dc(std::string& out, const store::ResourceRecord& r, const std::string& identifier,
                       const std::string& source) {
  out += "<oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" "
         "xmlns:dc=\"http://purl.org/dc/elements/1.1/\" "
         "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/oai_dc/ "
         "http://www.openarchives.org/OAI/2.0/oai_dc.xsd\">";
  element(out, "dc:identifier", r.uri);
  element(out, "dc:identifier", identifier);
  if (auto when = r.lastmod ? r.lastmod : r.change_datetime) {
    element(out, "dc:date", oai::format_datestamp(*when));
  }
  if (r.type) {
    element(out, "dc:format", *r.type);
  }
  if (!source.empty()) {
    element(out, "dc:source", source);
  }
  for (const auto& l : r.links) {
    if (!l.href.empty()) {
      element(out, "dc:relation", l.href);
    }
  }
  out += "</oai_dc:dc>";
}

void append_provenance(std::string& out, const store::ResourceRecord& r, const Origin& o, std::string_view ns,
                       bool altered) {
  out += "<about><provenance xmlns=\"http://www.openarchives.org/OAI/2.0/provenance\" "
         "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/provenance "
         "http://www.openarchives.org/OAI/2.0/provenance.xsd\"><originDescription harvestDate=\"";
  const auto harvested_at = r.fetched_at ? r.fetched_at : r.change_datetime;
  out += harvested_at ? oai::format_datestamp(*harvested_at) : std::string("1970-01-01T00:00:00Z");
  out += altered ? "\" altered=\"true\">" : "\" altered=\"false\">";
  element(out, "baseURL", o.base_url);
  element(out, "identifier", o.identifier);
  const auto stamp = r.change_datetime ? r.change_datetime : r.lastmod;
  element(out, "datestamp", stamp ? oai::format_datestamp(*stamp) : std::string("1970-01-01T00:00:00Z"));
  element(out, "metadataNamespace", ns);
  out += "</originDescription></provenance></about>";
}

} // namespace tributary::pub::oai_records
