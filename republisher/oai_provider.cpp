// The aggregate as an OAI-PMH 2.0 data provider (#52).
#include "republisher/oai_provider.h"

#include "common/log.h"
#include "republisher/responses.h"
#include "resourcesync/writer.h"

#include <algorithm>
#include <map>

namespace tributary::pub {

namespace {

constexpr std::string_view k_oai_dc = "oai_dc";

void text(std::string& out, std::string_view s) { rs::append_xml_escaped(out, s, false); }

void element(std::string& out, std::string_view name, std::string_view value) {
  out += '<';
  out += name;
  out += '>';
  text(out, value);
  out += "</";
  out += name;
  out += '>';
}

// setSpec's characters (OAI-PMH 2.0, setSpecType): a set whose name has
// others is not offered.
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

std::string host_of(const std::string& base) {
  size_t start = base.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  std::string host = base.substr(start, base.find_first_of(":/", start) - start);
  if (!host.empty() && host.front() == '[') {
    host = "localhost"; // an IPv6 literal is no mail domain
  }
  return host.find('.') == std::string::npos ? host + ".localdomain" : host;
}

} // namespace

struct OaiProvider::Answer {
  std::string body;                       // the verb's element
  std::optional<oai::ProtocolError> error; // or this
};

struct OaiProvider::Sets {
  std::vector<int64_t> all;                             // every published feed
  std::map<int64_t, std::string> source_set;            // a feed's own set (its source's)
  std::map<int64_t, std::string> capability_list;       // where we read it
  std::map<std::string, std::vector<int64_t>> by_spec;  // setSpec -> feeds
  std::map<int64_t, std::vector<std::string>> specs_of; // feed -> its setSpecs
  std::vector<std::pair<std::string, std::string>> listed; // (setSpec, setName), as ListSets shows them
};

OaiProvider::OaiProvider(OaiOptions options, std::shared_ptr<store::StoreReader> reader,
                         std::shared_ptr<store::BlobStore> blobs, const UrlScheme& urls,
                         std::vector<NamedSet> named_sets)
    : m_options(std::move(options)), m_reader(std::move(reader)), m_blobs(std::move(blobs)), m_urls(urls),
      m_named_sets(std::move(named_sets)) {
  if (m_options.repository_name.empty()) {
    m_options.repository_name = "Tributary at " + m_urls.base();
  }
  if (m_options.admin_emails.empty()) {
    m_options.admin_emails.push_back("admin@" + host_of(m_urls.base()));
  }
  m_options.page_size = std::max<size_t>(m_options.page_size, 1);
}

auto OaiProvider::fail(std::string code, std::string message) -> Answer {
  Answer a;
  a.error = oai::ProtocolError{std::move(code), std::move(message)};
  return a;
}

auto OaiProvider::sets() -> Result<Sets> {
  auto feeds = m_reader->feeds();
  if (!feeds) {
    return tl::unexpected(feeds.error());
  }
  Sets out;
  out.listed.emplace_back("source", "Every source");
  for (const auto& s : default_sets(*feeds)) {
    for (int64_t f : s.feeds) {
      out.all.push_back(f);
      out.source_set[f] = s.name;
      out.by_spec["source"].push_back(f);
      if (valid_spec_part(s.name)) {
        out.by_spec["source:" + s.name].push_back(f);
        out.specs_of[f].push_back("source:" + s.name);
      }
    }
    if (valid_spec_part(s.name)) {
      out.listed.emplace_back("source:" + s.name, "Source " + s.name);
    }
  }
  for (const auto& f : *feeds) {
    out.capability_list[f.feed_id] = f.capability_list_url;
  }
  bool named = false;
  for (const auto& s : published_sets(*feeds, m_named_sets)) {
    const bool is_named = std::any_of(m_named_sets.begin(), m_named_sets.end(),
                                      [&](const NamedSet& n) { return n.name == s.name; });
    if (!is_named || !valid_spec_part(s.name)) {
      continue;
    }
    if (!named) {
      out.listed.emplace_back("set", "Every named set");
      named = true;
    }
    out.listed.emplace_back("set:" + s.name, "Named set " + s.name);
    for (int64_t f : s.feeds) {
      out.by_spec["set:" + s.name].push_back(f);
      out.by_spec["set"].push_back(f);
      out.specs_of[f].push_back("set:" + s.name);
    }
  }
  auto& every = out.by_spec["set"];
  std::sort(every.begin(), every.end());
  every.erase(std::unique(every.begin(), every.end()), every.end());
  return out;
}

void OaiProvider::serve(const http::Request& req, http::Response& res) {
  std::string form = req.query;
  if (req.method == "POST") {
    if (req.header_value("content-type").rfind("application/x-www-form-urlencoded", 0) != 0) {
      res.status = 415;
      res.set_body("OAI-PMH takes a POST as application/x-www-form-urlencoded.\n", "text/plain; charset=utf-8");
      return;
    }
    form = req.body;
  } else if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD, POST");
    return;
  }
  rs::Timestamp response_date =
      std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  auto parsed = oai::parse_arguments(form);
  Answer answer;
  const oai::Arguments* args = std::get_if<oai::Arguments>(&parsed);
  if (!args) {
    answer.error = std::get<oai::ProtocolError>(parsed);
  } else {
    auto r = respond(*args, response_date);
    if (!r) {
      log::warn("oai-pmh", r.error().message);
      unavailable(res);
      return;
    }
    answer = std::move(*r);
  }
  std::string out;
  out.reserve(answer.body.size() + 1024);
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\" "
         "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/ http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd\">\n";
  out += "<responseDate>" + oai::format_datestamp(response_date) + "</responseDate>\n<request";
  // For badVerb and badArgument, the request is echoed without its
  // arguments (OAI-PMH 2.0, 3.6).
  if (args && !(answer.error && (answer.error->code == "badVerb" || answer.error->code == "badArgument"))) {
    out += " verb=\"" + args->verb_name + "\"";
    for (const auto& [name, value] : args->given) {
      out += ' ';
      out += name;
      out += "=\"";
      rs::append_xml_escaped(out, value, true);
      out += '"';
    }
  }
  out += '>';
  text(out, m_urls.oai());
  out += "</request>\n";
  if (answer.error) {
    out += "<error code=\"" + answer.error->code + "\">";
    text(out, answer.error->message);
    out += "</error>\n";
  } else {
    out += answer.body;
  }
  out += "</OAI-PMH>\n";
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_body(std::move(out), "text/xml; charset=utf-8");
}

auto OaiProvider::respond(const oai::Arguments& a, rs::Timestamp& response_date) -> Result<Answer> {
  switch (a.verb) {
  case oai::Verb::identify:
    return identify(response_date);
  case oai::Verb::list_metadata_formats:
    return list_metadata_formats(a);
  case oai::Verb::list_sets:
    return list_sets(a);
  case oai::Verb::get_record:
    return get_record(a);
  case oai::Verb::list_identifiers:
  case oai::Verb::list_records:
    return list(a, response_date);
  }
  return fail("badVerb", "unknown verb");
}

auto OaiProvider::identify(rs::Timestamp& response_date) -> Result<Answer> {
  auto horizon = m_reader->datestamp_horizon();
  if (!horizon) {
    return tl::unexpected(horizon.error());
  }
  auto earliest = m_reader->earliest_datestamp();
  if (!earliest) {
    return tl::unexpected(earliest.error());
  }
  response_date = *horizon;
  Answer a;
  std::string& o = a.body;
  o += "<Identify>\n";
  element(o, "repositoryName", m_options.repository_name);
  element(o, "baseURL", m_urls.oai());
  o += "<protocolVersion>2.0</protocolVersion>\n";
  for (const auto& e : m_options.admin_emails) {
    element(o, "adminEmail", e);
  }
  element(o, "earliestDatestamp", oai::format_datestamp(earliest->value_or(*horizon)));
  // Deleted resources keep their row until their source is purged from
  // the aggregator (tributary gc, after removed_source_retention).
  o += "<deletedRecord>transient</deletedRecord>\n"
       "<granularity>YYYY-MM-DDThh:mm:ssZ</granularity>\n"
       "</Identify>\n";
  return a;
}

struct OaiProvider::Found {
  Sets sets;
  std::optional<store::DatedResource> record;
  std::optional<Answer> missing;
};

auto OaiProvider::lookup(const std::string& identifier) -> Result<Found> {
  auto s = sets();
  if (!s) {
    return tl::unexpected(s.error());
  }
  auto record = find(identifier, *s);
  if (!record) {
    return tl::unexpected(record.error());
  }
  Found out{std::move(*s), std::move(*record), std::nullopt};
  if (!out.record) {
    out.missing = fail("idDoesNotExist", "no record has the identifier " + identifier);
  }
  return out;
}

auto OaiProvider::list_metadata_formats(const oai::Arguments& a) -> Result<Answer> {
  if (a.identifier) {
    auto found = lookup(*a.identifier);
    if (!found || found->missing) {
      return found ? Result<Answer>(std::move(*found->missing)) : tl::unexpected(found.error());
    }
  }
  Answer out;
  out.body = "<ListMetadataFormats>\n<metadataFormat>\n<metadataPrefix>oai_dc</metadataPrefix>\n"
             "<schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema>\n"
             "<metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace>\n"
             "</metadataFormat>\n</ListMetadataFormats>\n";
  return out;
}

auto OaiProvider::list_sets(const oai::Arguments& a) -> Result<Answer> {
  if (a.resumption_token) {
    return fail("badResumptionToken", "the list of sets is never cut: no token applies to it");
  }
  auto s = sets();
  if (!s) {
    return tl::unexpected(s.error());
  }
  if (s->all.empty()) {
    return fail("noSetHierarchy", "this aggregate publishes no source yet");
  }
  Answer out;
  out.body = "<ListSets>\n";
  for (const auto& [spec, name] : s->listed) {
    out.body += "<set>";
    element(out.body, "setSpec", spec);
    element(out.body, "setName", name);
    out.body += "</set>\n";
  }
  out.body += "</ListSets>\n";
  return out;
}

auto OaiProvider::find(const std::string& identifier, const Sets& s) -> Result<std::optional<store::DatedResource>> {
  const std::string prefix = m_urls.base() + "/sets/";
  if (identifier.rfind(prefix, 0) != 0) {
    return std::optional<store::DatedResource>();
  }
  const Route route = m_urls.route(m_urls.path_of(identifier));
  if (route.kind != RouteKind::resource) {
    return std::optional<store::DatedResource>();
  }
  auto feeds = s.by_spec.find("source:" + route.set);
  if (feeds == s.by_spec.end()) {
    return std::optional<store::DatedResource>();
  }
  for (int64_t f : feeds->second) {
    auto d = m_reader->dated_resource(f, route.part);
    if (!d || *d) {
      return d;
    }
  }
  return std::optional<store::DatedResource>();
}

auto OaiProvider::get_record(const oai::Arguments& a) -> Result<Answer> {
  auto found = lookup(*a.identifier);
  if (!found || found->missing) {
    return found ? Result<Answer>(std::move(*found->missing)) : tl::unexpected(found.error());
  }
  if (*a.metadata_prefix != k_oai_dc) {
    return fail("cannotDisseminateFormat", "records are disseminated in oai_dc only");
  }
  Answer out;
  out.body = "<GetRecord>\n";
  append_record(out.body, *found->record, found->sets, true);
  out.body += "</GetRecord>\n";
  return out;
}

auto OaiProvider::list(const oai::Arguments& a, rs::Timestamp& response_date) -> Result<Answer> {
  const bool records = a.verb == oai::Verb::list_records;
  oai::Token t;
  bool resumed = false;
  if (a.resumption_token) {
    auto decoded = oai::decode_token(*a.resumption_token);
    if (!decoded || decoded->records != records) {
      return fail("badResumptionToken", "this resumption token was not issued for " + a.verb_name);
    }
    t = std::move(*decoded);
    resumed = true;
  } else {
    if (*a.metadata_prefix != k_oai_dc) {
      return fail("cannotDisseminateFormat", "records are disseminated in oai_dc only");
    }
    std::optional<oai::Datestamp> from;
    std::optional<oai::Datestamp> until;
    if (a.from && !(from = oai::parse_datestamp(*a.from))) {
      return fail("badArgument", "from is not a datestamp (YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ)");
    }
    if (a.until && !(until = oai::parse_datestamp(*a.until))) {
      return fail("badArgument", "until is not a datestamp (YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ)");
    }
    if (from && until && from->day != until->day) {
      return fail("badArgument", "from and until are of different granularities");
    }
    if (from && until && from->at > until->at) {
      return fail("badArgument", "from is later than until");
    }
    t.records = records;
    t.metadata_prefix = std::string(k_oai_dc);
    t.set = a.set.value_or("");
    if (from) {
      t.from = from->at;
    }
    if (until) {
      t.until_end = until->end();
    }
  }
  auto s = sets();
  if (!s) {
    return tl::unexpected(s.error());
  }
  auto horizon = m_reader->datestamp_horizon();
  if (!horizon) {
    return tl::unexpected(horizon.error());
  }
  // What a harvester takes as its next `from`: nothing committed after this
  // answer carries an earlier datestamp.
  response_date = *horizon;
  store::DatedQuery q;
  if (t.set.empty()) {
    q.feed_ids = s->all;
  } else if (auto it = s->by_spec.find(t.set); it != s->by_spec.end()) {
    q.feed_ids = it->second;
  }
  q.before = t.until_end ? std::min(*t.until_end, *horizon) : *horizon;
  if (resumed) {
    q.after = store::DatedKey{t.key_datestamp, t.key_feed, t.key_uri};
  } else {
    q.from = t.from;
  }
  q.limit = m_options.page_size + 1;
  std::vector<store::DatedResource> page;
  if (!q.feed_ids.empty()) {
    auto got = m_reader->dated_resources(q);
    if (!got) {
      return tl::unexpected(got.error());
    }
    page = std::move(*got);
  }
  if (page.empty()) {
    return fail("noRecordsMatch", "no record matches these arguments");
  }
  const bool more = page.size() > m_options.page_size;
  page.resize(std::min(page.size(), m_options.page_size));
  Answer out;
  const std::string name = records ? "ListRecords" : "ListIdentifiers";
  out.body = "<" + name + ">\n";
  for (const auto& d : page) {
    append_record(out.body, d, *s, records);
  }
  if (more || resumed) {
    const uint64_t cursor = t.cursor;
    std::string token;
    if (more) {
      oai::Token next = t;
      next.key_datestamp = page.back().datestamp;
      next.key_feed = page.back().feed_id;
      next.key_uri = page.back().resource.uri;
      next.cursor = cursor + page.size();
      token = oai::encode_token(next);
    }
    out.body += "<resumptionToken cursor=\"" + std::to_string(cursor) + "\">" + token + "</resumptionToken>\n";
  }
  out.body += "</" + name + ">\n";
  return out;
}

void OaiProvider::append_record(std::string& out, const store::DatedResource& d, const Sets& s,
                                bool metadata) const {
  const store::ResourceRecord& r = d.resource;
  const bool deleted = r.state == store::ResourceState::deleted;
  auto own = s.source_set.find(d.feed_id);
  const std::string identifier = m_urls.resource(own != s.source_set.end() ? own->second : "", r.uri);
  if (metadata) {
    out += "<record>";
  }
  out += deleted ? "<header status=\"deleted\">" : "<header>";
  element(out, "identifier", identifier);
  element(out, "datestamp", oai::format_datestamp(d.datestamp));
  if (auto specs = s.specs_of.find(d.feed_id); specs != s.specs_of.end()) {
    for (const auto& spec : specs->second) {
      element(out, "setSpec", spec);
    }
  }
  out += "</header>";
  if (metadata && !deleted) {
    if (const std::string harvested = harvested_oai_dc(r); !harvested.empty()) {
      out += "<metadata>" + harvested + "</metadata></record>\n";
      return;
    }
    out += "<metadata><oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" "
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
    if (auto cap = s.capability_list.find(d.feed_id); cap != s.capability_list.end()) {
      element(out, "dc:source", cap->second);
    }
    for (const auto& l : r.links) {
      if (!l.href.empty()) {
        element(out, "dc:relation", l.href);
      }
    }
    out += "</oai_dc:dc></metadata>";
  }
  if (metadata) {
    out += "</record>";
  }
  out += '\n';
}

std::string OaiProvider::harvested_oai_dc(const store::ResourceRecord& r) const {
  // A record of an OAI-PMH source is held as its <metadata> child, with the
  // namespaces it uses declared on it, fetched "from" its GetRecord URL.
  if (!m_blobs || !r.blob_sha256 || !r.fetched_from || r.fetched_from->rfind(store::k_inline_prefix, 0) != 0 ||
      r.fetched_from->find("metadataPrefix=oai_dc") == std::string::npos) {
    return {};
  }
  auto bytes = m_blobs->read(*r.blob_sha256);
  if (!bytes) {
    return {};
  }
  std::string_view xml = *bytes;
  if (xml.rfind("<?xml", 0) == 0) {
    const size_t end = xml.find("?>");
    xml = end == std::string_view::npos ? std::string_view() : xml.substr(end + 2);
  }
  while (!xml.empty() && (xml.front() == '\n' || xml.front() == '\r' || xml.front() == ' ' || xml.front() == '\t')) {
    xml.remove_prefix(1);
  }
  // Only an oai_dc record: its root is "dc" in the oai_dc namespace.
  const size_t tag_end = xml.find('>');
  const std::string_view start_tag = xml.substr(0, tag_end);
  const size_t name_end = start_tag.find_first_of(" \t\r\n/");
  const std::string_view name = start_tag.substr(1, name_end == std::string_view::npos ? std::string_view::npos
                                                                                      : name_end - 1);
  const bool dc = name == "dc" || (name.size() > 3 && name.substr(name.size() - 3) == ":dc");
  if (xml.empty() || xml.front() != '<' || !dc ||
      start_tag.find("http://www.openarchives.org/OAI/2.0/oai_dc/") == std::string_view::npos) {
    return {};
  }
  return std::string(xml);
}

} // namespace tributary::pub
