// The aggregate as an OAI-PMH 2.0 data provider (#52).
#include "republisher/oai_provider.h"

#include "common/log.h"
#include "common/percent.h"
#include "republisher/oai_records.h"
#include "republisher/responses.h"
#include "resourcesync/writer.h"

#include <algorithm>
#include <map>
#include <set>

namespace tributary::pub {

namespace {

using oai_records::valid_spec_part;

constexpr std::string_view k_oai_dc = "oai_dc";

// The repository and the metadataPrefix an OAI-PMH source's feed harvests
// (read from its list URL; identifier empty); nullopt for a feed of
// another kind.
std::optional<oai_records::Origin> native_origin(const std::string& feed_url) {
  const size_t verb = feed_url.find("verb=ListRecords");
  if (verb == std::string::npos || verb == 0 || (feed_url[verb - 1] != '?' && feed_url[verb - 1] != '&')) {
    return std::nullopt;
  }
  auto pairs = form_pairs(std::string_view(feed_url).substr(verb));
  if (pairs) {
    for (const auto& [name, value] : *pairs) {
      if (name == "metadataPrefix" && !value.empty()) {
        return oai_records::Origin{feed_url.substr(0, verb - 1), {}, value};
      }
    }
  }
  return std::nullopt;
}

const oai_records::Format k_oai_dc_format{"oai_dc", "http://www.openarchives.org/OAI/2.0/oai_dc.xsd",
                                          "http://www.openarchives.org/OAI/2.0/oai_dc/"};

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
  std::map<int64_t, oai_records::Origin> native;        // an OAI-PMH source's feed -> its repository and prefix
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
    if (auto origin = native_origin(f.capability_list_url)) {
      out.native[f.feed_id] = std::move(*origin);
    }
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
  std::vector<oai_records::Format> formats{k_oai_dc_format};
  if (a.identifier) {
    auto found = lookup(*a.identifier);
    if (!found || found->missing) {
      return found ? Result<Answer>(std::move(*found->missing)) : tl::unexpected(found.error());
    }
    // oai_dc, and the format it was harvested in.
    const auto& r = found->record->resource;
    if (auto o = oai_records::origin_of(r); o && o->prefix != k_oai_dc && m_blobs) {
      if (auto f = oai_records::format_of(o->prefix, oai_records::harvested(*m_blobs, r, o->prefix))) {
        formats.push_back(std::move(*f));
      }
    }
  } else {
    auto s = sets();
    if (!s) {
      return tl::unexpected(s.error());
    }
    std::set<std::string> prefixes;
    for (const auto& [feed, origin] : s->native) {
      if (origin.prefix != k_oai_dc) {
        prefixes.insert(origin.prefix);
      }
    }
    for (const auto& prefix : prefixes) {
      auto f = native_format(*s, prefix);
      if (!f) {
        return tl::unexpected(f.error());
      }
      if (*f) {
        formats.push_back(std::move(**f));
      }
    }
  }
  Answer out;
  out.body = "<ListMetadataFormats>\n";
  for (const auto& f : formats) {
    out.body += "<metadataFormat>";
    element(out.body, "metadataPrefix", f.prefix);
    element(out.body, "schema", f.schema);
    element(out.body, "metadataNamespace", f.ns);
    out.body += "</metadataFormat>\n";
  }
  out.body += "</ListMetadataFormats>\n";
  return out;
}

auto OaiProvider::native_format(const Sets& s, const std::string& prefix)
    -> Result<std::optional<oai_records::Format>> {
  // What the first records held in it declare.
  store::DatedQuery q;
  for (const auto& [feed, origin] : s.native) {
    if (origin.prefix == prefix) {
      q.feed_ids.push_back(feed);
    }
  }
  q.before = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()) +
             std::chrono::hours(24);
  q.limit = 10;
  auto sample = m_reader->dated_resources(q);
  if (!sample) {
    return tl::unexpected(sample.error());
  }
  for (const auto& d : *sample) {
    if (auto f = m_blobs ? oai_records::format_of(prefix, oai_records::harvested(*m_blobs, d.resource, prefix))
                         : std::nullopt) {
      return f;
    }
  }
  return std::optional<oai_records::Format>();
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
  // The upstream sets of each OAI-PMH source's records.
  std::vector<std::pair<std::string, std::string>> listed = s->listed;
  std::map<std::string, std::vector<int64_t>> oai_feeds_of;
  for (const auto& [feed, origin] : s->native) {
    if (auto own = s->source_set.find(feed); own != s->source_set.end() && valid_spec_part(own->second)) {
      oai_feeds_of[own->second].push_back(feed);
    }
  }
  for (const auto& [set, feeds] : oai_feeds_of) {
    auto hrefs = m_reader->link_targets(feeds, "collection", 10000);
    if (!hrefs) {
      return tl::unexpected(hrefs.error());
    }
    std::set<std::string> specs;
    for (int64_t feed : feeds) {
      for (const auto& href : *hrefs) {
        if (auto spec = oai_records::upstream_set_spec(href, s->native.at(feed), set)) {
          specs.insert(std::move(*spec));
        }
      }
    }
    for (const auto& spec : specs) {
      listed.emplace_back(spec, "Set " + spec.substr(("source:" + set + ":").size()) + " of source " + set);
    }
  }
  Answer out;
  out.body = "<ListSets>\n";
  for (const auto& [spec, name] : listed) {
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
  const std::string& prefix = *a.metadata_prefix;
  if (prefix != k_oai_dc) {
    auto o = oai_records::origin_of(found->record->resource);
    if (!o || o->prefix != prefix) {
      return fail("cannotDisseminateFormat", "this record is held in oai_dc" + (o ? " and " + o->prefix : "") +
                                                 ", not in " + prefix);
    }
  }
  Answer out;
  out.body = "<GetRecord>\n";
  append_record(out.body, *found->record, found->sets, &prefix);
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
    t.metadata_prefix = *a.metadata_prefix;
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
  // oai_dc for every record; another format for those harvested in it.
  const auto in_format = [&](int64_t feed) {
    auto n = s->native.find(feed);
    return t.metadata_prefix == k_oai_dc || (n != s->native.end() && n->second.prefix == t.metadata_prefix);
  };
  // oai_dc is always offered (an aggregate with nothing yet has no record
  // in it: noRecordsMatch below); another format only where held.
  if (!resumed && t.metadata_prefix != k_oai_dc && std::none_of(s->all.begin(), s->all.end(), in_format)) {
    return fail("cannotDisseminateFormat", "no record is held in " + t.metadata_prefix);
  }
  store::DatedQuery q;
  if (t.set.empty()) {
    q.feed_ids = s->all;
  } else if (auto it = s->by_spec.find(t.set); it != s->by_spec.end()) {
    q.feed_ids = it->second;
  } else if (auto up = upstream_set(*s, t.set, t.metadata_prefix)) {
    q.feed_ids = {up->first};
    q.collection_link = std::move(up->second);
  }
  std::erase_if(q.feed_ids, [&](int64_t f) { return !in_format(f); });
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
    append_record(out.body, d, *s, records ? &t.metadata_prefix : nullptr);
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

auto OaiProvider::upstream_set(const Sets& s, const std::string& spec, const std::string& prefix) const
    -> std::optional<std::pair<int64_t, std::string>> {
  // "source:<set>:<upstream spec>": the source's OAI-PMH feed harvesting
  // `prefix` (or its first), and the link its records in that set carry.
  constexpr std::string_view head = "source:";
  const size_t colon = spec.find(':', head.size());
  if (spec.rfind(head, 0) != 0 || colon == std::string::npos || colon + 1 >= spec.size()) {
    return std::nullopt;
  }
  auto feeds = s.by_spec.find(spec.substr(0, colon));
  if (feeds == s.by_spec.end()) {
    return std::nullopt;
  }
  std::optional<std::pair<int64_t, std::string>> out;
  for (int64_t f : feeds->second) {
    auto n = s.native.find(f);
    if (n == s.native.end() || (out && n->second.prefix != prefix)) {
      continue;
    }
    out.emplace(f, oai_records::upstream_set_link(n->second, spec.substr(colon + 1)));
    if (n->second.prefix == prefix) {
      break;
    }
  }
  return out;
}

void OaiProvider::append_record(std::string& out, const store::DatedResource& d, const Sets& s,
                                const std::string* prefix) const {
  const store::ResourceRecord& r = d.resource;
  const bool deleted = r.state == store::ResourceState::deleted;
  auto own = s.source_set.find(d.feed_id);
  const std::string set = own != s.source_set.end() ? own->second : "";
  const std::string identifier = m_urls.resource(set, r.uri);
  const auto origin = oai_records::origin_of(r);
  if (prefix) {
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
  if (origin && valid_spec_part(set)) {
    for (const auto& spec : oai_records::upstream_set_specs(r, *origin, set)) {
      element(out, "setSpec", spec);
    }
  }
  out += "</header>";
  if (!prefix) {
    out += '\n';
    return;
  }
  if (!deleted) {
    // As harvested where we hold it in this format; oai_dc derived else.
    const std::string as_harvested = m_blobs ? oai_records::harvested(*m_blobs, r, *prefix) : std::string();
    std::string ns = as_harvested.empty() ? std::string() : oai_records::format_of(*prefix, as_harvested)
                                                                 .value_or(oai_records::Format{}).ns;
    out += "<metadata>";
    if (!as_harvested.empty()) {
      out += as_harvested;
    } else {
      auto cap = s.capability_list.find(d.feed_id);
      oai_records::append_derived_dc(out, r, identifier, cap != s.capability_list.end() ? cap->second : "");
      if (origin && m_blobs) {
        // What it was made from: the record as harvested.
        ns = oai_records::format_of(origin->prefix, oai_records::harvested(*m_blobs, r, origin->prefix))
                 .value_or(oai_records::Format{})
                 .ns;
      }
    }
    out += "</metadata>";
    if (origin && !ns.empty()) {
      oai_records::append_provenance(out, r, *origin, ns, as_harvested.empty());
    }
  }
  out += "</record>\n";
}

} // namespace tributary::pub
