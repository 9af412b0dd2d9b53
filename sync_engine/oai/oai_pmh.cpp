#include "sync_engine/oai/oai_pmh.h"

#include "common/percent.h"
#include "common/text.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlreader.h>

#include <algorithm>
#include <memory>

namespace tributary::sync::oai {

namespace {

constexpr std::string_view k_ns = "http://www.openarchives.org/OAI/2.0/";

// ---- characters XML forbids ----------------------------------------------------

// The length of the UTF-8 sequence at `p` if it encodes a character XML 1.0
// allows, else 0 (a stray control character, a bad sequence, a surrogate,
// U+FFFE or U+FFFF).
size_t allowed_char(std::string_view s, size_t p) {
  const auto [cp, n] = decode_utf8(s, p);
  if (n == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE || cp == 0xFFFF) {
    return 0;
  }
  return n;
}

std::string text_of(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

// The text of the first <...identifier> element in `span`, for a warning.
std::string identifier_in(std::string_view span) {
  const size_t open = span.find("identifier>");
  if (open == std::string_view::npos) {
    return {};
  }
  const size_t start = open + 11;
  const size_t end = span.find('<', start);
  std::string id(span.substr(start, end == std::string_view::npos ? 0 : end - start));
  // Only what can be shown: the identifier may hold the bad bytes itself.
  id.erase(std::remove_if(id.begin(), id.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; }),
           id.end());
  return id.substr(0, 200);
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

// The position just past the first end tag `</record>` or `</prefix:record>`
// at or after `from`; npos when none.
size_t record_end(std::string_view s, size_t from) {
  constexpr std::string_view tail = "record>";
  for (size_t p = s.find(tail, from); p != std::string_view::npos; p = s.find(tail, p + 1)) {
    size_t q = p;
    if (q > 0 && s[q - 1] == ':') { // a prefix
      --q;
      while (q > 0 && name_char(s[q - 1]) && s[q - 1] != ':') {
        --q;
      }
    }
    if (q >= 2 && s[q - 1] == '/' && s[q - 2] == '<') {
      return p + tail.size();
    }
  }
  return std::string_view::npos;
}

constexpr size_t k_stray_warnings = 20; // characters outside records warned of one by one

// Cuts every record holding a character XML forbids (it costs that record,
// with a warning naming it) and blanks such characters elsewhere, so that
// the rest of the page parses. One pass, linear in the page: the record
// we are in is known from the tags passed, and a record with a bad
// character is skipped whole. Returns `body` itself when it is clean, else
// the mended copy, kept in `mended`.
std::string_view without_forbidden(std::string_view body, std::string& mended, std::vector<Warning>& warnings) {
  constexpr size_t npos = std::string_view::npos;
  uint64_t line = 1;
  size_t copied = 0;      // body[0, copied) is settled: copied to `mended`, or cut
  size_t open = npos;     // where the record we are in starts
  bool no_end = false;    // no </record> lies ahead
  uint64_t stray = 0;     // characters blanked outside any record
  bool touched = false;
  size_t p = 0;
  while (p < body.size()) {
    const char c = body[p];
    if (c == '\n') {
      ++line;
      ++p;
      continue;
    }
    if (c == '<') {
      size_t q = p + 1;
      const bool closing = q < body.size() && body[q] == '/';
      q += closing ? 1 : 0;
      const size_t name = q;
      while (q < body.size() && q - name < 256 && name_char(body[q])) {
        ++q;
      }
      std::string_view qname = body.substr(name, q - name);
      if (const size_t colon = qname.rfind(':'); colon != npos) {
        qname.remove_prefix(colon + 1);
      }
      if (qname == "record" && (q == body.size() || body[q] == '>' || body[q] == '/' || body[q] == ' ' ||
                                body[q] == '\t' || body[q] == '\n' || body[q] == '\r')) {
        open = closing ? npos : p;
      }
      p = q;
      continue;
    }
    const size_t n = allowed_char(body, p);
    if (n > 0) {
      p += n;
      continue;
    }
    touched = true;
    const auto byte = static_cast<unsigned char>(c);
    const size_t end = open != npos && !no_end ? record_end(body, p) : npos;
    if (open != npos && end == npos) {
      no_end = true; // none after this place, so none after any later one
    }
    if (open != npos && end != npos) {
      warnings.push_back({line, identifier_in(body.substr(open, end - open)),
                          std::string("a character XML forbids (byte 0x") + "0123456789abcdef"[byte >> 4] +
                              "0123456789abcdef"[byte & 15] + "): the record is skipped, the rest of the page is kept"});
      mended.append(body.substr(copied, open - copied));
      line += static_cast<uint64_t>(std::count(body.begin() + static_cast<std::ptrdiff_t>(p),
                                               body.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
      copied = end;
      p = end;
      open = npos;
      continue;
    }
    if (++stray <= k_stray_warnings) {
      warnings.push_back({line, "", "a character XML forbids outside any record: read as a space"});
    }
    mended.append(body.substr(copied, p - copied));
    mended += ' ';
    p += 1;
    copied = p;
  }
  if (stray > k_stray_warnings) {
    warnings.push_back({line, "", std::to_string(stray - k_stray_warnings) +
                                      " more characters XML forbids outside any record: read as spaces"});
  }
  if (!touched) {
    return body;
  }
  mended.append(body.substr(copied));
  return mended;
}

// ---- the tree ------------------------------------------------------------------

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

bool is(const xmlNode* n, std::string_view local) {
  return n != nullptr && n->type == XML_ELEMENT_NODE && local == reinterpret_cast<const char*>(n->name);
}

bool in_oai_ns(const xmlNode* n) {
  return n->ns != nullptr && n->ns->href != nullptr && k_ns == reinterpret_cast<const char*>(n->ns->href);
}

std::vector<xmlNode*> children(xmlNode* n, std::string_view local = {}) {
  std::vector<xmlNode*> out;
  for (xmlNode* c = n ? n->children : nullptr; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE && (local.empty() || is(c, local))) {
      out.push_back(c);
    }
  }
  return out;
}

xmlNode* child(xmlNode* n, std::string_view local) {
  auto all = children(n, local);
  return all.empty() ? nullptr : all.front();
}

std::string text(const xmlNode* n) {
  if (n == nullptr) {
    return {};
  }
  xmlChar* t = xmlNodeGetContent(n);
  std::string s = t ? reinterpret_cast<const char*>(t) : "";
  xmlFree(t);
  const size_t b = s.find_first_not_of(" \t\r\n");
  const size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string attr(const xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  std::string s = v ? reinterpret_cast<const char*>(v) : "";
  xmlFree(v);
  return s;
}

std::optional<uint64_t> number(const std::string& s) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoull(s);
}

// The element serialised on its own: copied into a document of its own,
// with the namespaces its ancestors declared declared on it.
std::string serialise(xmlNode* n) {
  Doc doc(xmlNewDoc(reinterpret_cast<const xmlChar*>("1.0")));
  xmlNode* copy = xmlDocCopyNode(n, doc.get(), 1);
  if (copy == nullptr) {
    return {};
  }
  xmlDocSetRootElement(doc.get(), copy);
  xmlReconciliateNs(doc.get(), copy);
  xmlBuffer* buf = xmlBufferCreate();
  xmlNodeDump(buf, doc.get(), copy, 0, 0);
  std::string s(reinterpret_cast<const char*>(xmlBufferContent(buf)), static_cast<size_t>(xmlBufferLength(buf)));
  xmlBufferFree(buf);
  return s;
}

// Parses an OAI-PMH answer into a tree (no network, no entity expansion,
// no DTD); the root must be OAI-PMH.
Result<Doc> parse_tree(std::string_view body) {
  if (body.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error(ErrorKind::invalid_document, "the OAI-PMH answer is too large");
  }
  Doc doc(xmlReadMemory(body.data(), static_cast<int>(body.size()), nullptr, nullptr,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_COMPACT));
  if (!doc) {
    const xmlError* e = xmlGetLastError();
    return make_error(ErrorKind::invalid_document,
                      std::string("not well-formed XML") +
                          (e && e->message ? ": line " + std::to_string(e->line) + ": " + text_of(e->message) : std::string()));
  }
  xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!is(root, "OAI-PMH") || !in_oai_ns(root)) {
    return make_error(ErrorKind::invalid_document, "not an OAI-PMH answer (its root is not OAI-PMH in the "
                                                   "http://www.openarchives.org/OAI/2.0/ namespace)");
  }
  return doc;
}

std::vector<ProtocolError> errors_of(xmlNode* root) {
  std::vector<ProtocolError> out;
  for (xmlNode* e : children(root, "error")) {
    out.push_back({attr(e, "code"), text(e)});
  }
  return out;
}

Resumption resumption_of(xmlNode* list) {
  Resumption r;
  xmlNode* t = child(list, "resumptionToken");
  if (t == nullptr) {
    return r;
  }
  r.token = text(t);
  r.cursor = number(attr(t, "cursor"));
  r.complete_list_size = number(attr(t, "completeListSize"));
  if (auto x = attr(t, "expirationDate"); !x.empty()) {
    r.expires = rs::parse_datetime_lenient(x);
  }
  return r;
}

std::string with_params(const std::string& base_url, const std::vector<std::pair<std::string, std::string>>& q) {
  std::string url = base_url + (base_url.find('?') == std::string::npos ? '?' : '&');
  for (size_t i = 0; i < q.size(); ++i) {
    url += (i ? "&" : "") + q[i].first + "=" + percent_encode(q[i].second);
  }
  return url;
}

// One <record> (or ListIdentifiers' <header>) onto the page, or a warning
// saying why it cannot be used.
void add_record(Page& page, xmlNode* item) {
  xmlNode* header = is(item, "header") ? item : child(item, "header");
  const auto line = static_cast<uint64_t>(xmlGetLineNo(item));
  Record r;
  r.identifier = text(child(header, "identifier"));
  if (r.identifier.empty()) {
    page.warnings.push_back({line, "", "a record without an identifier: skipped"});
    return;
  }
  const std::string stamp = text(child(header, "datestamp"));
  std::string why;
  auto when = rs::parse_datetime_lenient(stamp, &why);
  if (!when) {
    page.warnings.push_back({line, r.identifier, "datestamp '" + stamp.substr(0, 64) + "': " + why +
                                                     ": the record is skipped"});
    return;
  }
  r.datestamp = *when;
  r.deleted = attr(header, "status") == "deleted";
  for (xmlNode* s : children(header, "setSpec")) {
    if (auto spec = text(s); !spec.empty()) {
      r.sets.push_back(std::move(spec));
    }
  }
  if (!r.deleted && header != item) {
    auto payload = children(child(item, "metadata"));
    if (payload.empty()) {
      page.warnings.push_back({line, r.identifier, "a record with no metadata and not deleted: skipped"});
      return;
    }
    r.metadata = serialise(payload.front());
  }
  page.records.push_back(std::move(r));
}

} // namespace

bool Page::has_error(std::string_view code) const {
  return std::any_of(errors.begin(), errors.end(), [&](const ProtocolError& e) { return e.code == code; });
}

std::string format_datestamp(rs::Timestamp t, Granularity g, bool round_up) {
  using namespace std::chrono;
  if (g == Granularity::day) {
    auto day = floor<days>(t);
    if (round_up && day != t) {
      day += days(1);
    }
    return rs::format_w3c_datetime(day).substr(0, 10);
  }
  auto s = floor<seconds>(t);
  if (round_up && s != t) {
    s += seconds(1);
  }
  return rs::format_w3c_datetime(s);
}

std::string list_url(const std::string& base_url, const ListRequest& r) {
  if (!r.resumption_token.empty()) {
    return with_params(base_url, {{"verb", r.verb}, {"resumptionToken", r.resumption_token}});
  }
  std::vector<std::pair<std::string, std::string>> q{{"verb", r.verb}, {"metadataPrefix", r.metadata_prefix}};
  if (r.from) {
    q.emplace_back("from", format_datestamp(*r.from, r.granularity));
  }
  if (r.until) {
    q.emplace_back("until", format_datestamp(*r.until, r.granularity, true));
  }
  if (r.set) {
    q.emplace_back("set", *r.set);
  }
  return with_params(base_url, q);
}

std::string identify_url(const std::string& base_url) {
  return with_params(base_url, {{"verb", "Identify"}});
}

std::string list_metadata_formats_url(const std::string& base_url) {
  return with_params(base_url, {{"verb", "ListMetadataFormats"}});
}

std::string list_sets_url(const std::string& base_url, const std::string& resumption_token) {
  return resumption_token.empty() ? with_params(base_url, {{"verb", "ListSets"}})
                                  : with_params(base_url, {{"verb", "ListSets"}, {"resumptionToken", resumption_token}});
}

std::string get_record_url(const std::string& base_url, const std::string& identifier,
                           const std::string& metadata_prefix) {
  return with_params(base_url, {{"verb", "GetRecord"}, {"identifier", identifier}, {"metadataPrefix", metadata_prefix}});
}

Result<Identify> parse_identify(std::string_view body, std::vector<ProtocolError>* errors) {
  std::vector<Warning> ignored;
  std::string mended;
  auto doc = parse_tree(without_forbidden(body, mended, ignored));
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  xmlNode* root = xmlDocGetRootElement(doc->get());
  if (errors) {
    *errors = errors_of(root);
  }
  xmlNode* id = child(root, "Identify");
  if (id == nullptr) {
    auto errs = errors_of(root);
    return make_error(ErrorKind::invalid_document,
                      "the answer holds no Identify" + (errs.empty() ? std::string() : ": " + errs[0].code));
  }
  Identify out;
  out.repository_name = text(child(id, "repositoryName"));
  out.base_url = text(child(id, "baseURL"));
  out.protocol_version = text(child(id, "protocolVersion"));
  out.granularity = text(child(id, "granularity")) == "YYYY-MM-DDThh:mm:ssZ" ? Granularity::second : Granularity::day;
  if (auto d = text(child(id, "deletedRecord")); d == "no" || d == "transient" || d == "persistent") {
    out.deleted_record = d;
  }
  out.earliest_datestamp = rs::parse_datetime_lenient(text(child(id, "earliestDatestamp")));
  return out;
}

Result<std::vector<MetadataFormat>> parse_metadata_formats(std::string_view body) {
  std::vector<Warning> ignored;
  std::string mended;
  auto doc = parse_tree(without_forbidden(body, mended, ignored));
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  std::vector<MetadataFormat> out;
  for (xmlNode* f : children(child(xmlDocGetRootElement(doc->get()), "ListMetadataFormats"), "metadataFormat")) {
    MetadataFormat m{text(child(f, "metadataPrefix")), text(child(f, "schema")), text(child(f, "metadataNamespace"))};
    if (!m.prefix.empty()) {
      out.push_back(std::move(m));
    }
  }
  return out;
}

Result<std::vector<Set>> parse_sets(std::string_view body, Resumption* resumption) {
  std::vector<Warning> ignored;
  std::string mended;
  auto doc = parse_tree(without_forbidden(body, mended, ignored));
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  xmlNode* list = child(xmlDocGetRootElement(doc->get()), "ListSets");
  std::vector<Set> out;
  for (xmlNode* s : children(list, "set")) {
    Set set{text(child(s, "setSpec")), text(child(s, "setName"))};
    if (!set.spec.empty()) {
      out.push_back(std::move(set));
    }
  }
  if (resumption) {
    *resumption = list ? resumption_of(list) : Resumption{};
  }
  return out;
}

// A ListRecords or ListIdentifiers page, read as a stream: each record is
// built as a small tree of its own, copied out and freed before the next,
// so that memory follows the largest record, not the page (a page read
// into one tree cost 75 times its size).
Result<Page> parse_list(std::string_view body) {
  Page page;
  std::string mended;
  const std::string_view text = without_forbidden(body, mended, page.warnings);
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error(ErrorKind::invalid_document, "the OAI-PMH answer is too large");
  }
  std::unique_ptr<xmlTextReader, decltype(&xmlFreeTextReader)> reader(
      xmlReaderForMemory(text.data(), static_cast<int>(text.size()), nullptr, nullptr,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
      &xmlFreeTextReader);
  if (!reader) {
    return make_error(ErrorKind::invalid_document, "not well-formed XML");
  }
  xmlTextReader* r = reader.get();
  auto string_of = [](xmlChar* v) {
    std::string out = v ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    return out;
  };
  auto trimmed = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    const size_t e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  auto attribute = [&](const char* name) {
    return string_of(xmlTextReaderGetAttribute(r, reinterpret_cast<const xmlChar*>(name)));
  };
  bool rooted = false;
  bool listed = false; // inside ListRecords or ListIdentifiers
  bool had_list = false;
  int step = xmlTextReaderRead(r);
  while (step == 1) {
    if (xmlTextReaderNodeType(r) != XML_READER_TYPE_ELEMENT) {
      step = xmlTextReaderRead(r);
      continue;
    }
    const int depth = xmlTextReaderDepth(r);
    const std::string_view local = reinterpret_cast<const char*>(xmlTextReaderConstLocalName(r));
    if (depth == 0) {
      const xmlChar* ns = xmlTextReaderConstNamespaceUri(r);
      if (local != "OAI-PMH" || ns == nullptr || k_ns != reinterpret_cast<const char*>(ns)) {
        return make_error(ErrorKind::invalid_document, "not an OAI-PMH answer (its root is not OAI-PMH in the "
                                                       "http://www.openarchives.org/OAI/2.0/ namespace)");
      }
      rooted = true;
    } else if (depth == 1) {
      listed = local == "ListRecords" || local == "ListIdentifiers";
      had_list = had_list || listed;
      if (local == "responseDate") {
        page.response_date = rs::parse_datetime_lenient(trimmed(string_of(xmlTextReaderReadString(r))));
      } else if (local == "error") {
        std::string code = attribute("code");
        page.errors.push_back({std::move(code), trimmed(string_of(xmlTextReaderReadString(r)))});
      }
    } else if (depth == 2 && listed && local == "resumptionToken") {
      page.resumption.cursor = number(attribute("cursor"));
      page.resumption.complete_list_size = number(attribute("completeListSize"));
      if (auto x = attribute("expirationDate"); !x.empty()) {
        page.resumption.expires = rs::parse_datetime_lenient(x);
      }
      page.resumption.token = trimmed(string_of(xmlTextReaderReadString(r)));
    } else if (depth == 2 && listed && (local == "record" || local == "header")) {
      xmlNode* item = xmlTextReaderExpand(r);
      if (item == nullptr) {
        break; // not well-formed inside: said below
      }
      add_record(page, item);
      step = xmlTextReaderNext(r); // the record's tree is freed as the reader moves on
      continue;
    }
    step = xmlTextReaderRead(r);
  }
  if (step != 0 || !rooted) {
    const xmlError* e = xmlGetLastError();
    if (!rooted && step == 0) {
      return make_error(ErrorKind::invalid_document, "not an OAI-PMH answer (no root element)");
    }
    return make_error(ErrorKind::invalid_document,
                      std::string("not well-formed XML") +
                          (e && e->message ? ": line " + std::to_string(e->line) + ": " + text_of(e->message) : std::string()));
  }
  if (!had_list && page.errors.empty()) {
    return make_error(ErrorKind::invalid_document, "the answer holds neither ListRecords nor ListIdentifiers "
                                                   "nor an error");
  }
  return page;
}

} // namespace tributary::sync::oai
