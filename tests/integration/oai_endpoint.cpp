#include "oai_endpoint.h"

#include "common/percent.h"

#include <set>
#include <sstream>
#include <thread>

namespace tributary::test {

namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    default: out += c;
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Days from `from` to `until` (W3C dates or datetimes).
int days_between(const std::string& from, const std::string& until) {
  auto a = rs::parse_w3c_datetime(from);
  auto b = rs::parse_w3c_datetime(until);
  if (!a || !b) {
    return 1 << 20;
  }
  return static_cast<int>(std::chrono::duration_cast<std::chrono::hours>(*b - *a).count() / 24);
}

} // namespace

std::string OaiEndpoint::record_url(const std::string& id) const {
  return base() + "?verb=GetRecord&identifier=" + percent_encode(id) + "&metadataPrefix=oai_dc";
}

std::string OaiEndpoint::envelope(const std::string& verb, const std::string& inner) const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<?xml-stylesheet type=\"text/xsl\" href=\"static/style.xsl\"?>\n"
         "<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\" "
         "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/ http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd\">\n"
         "<responseDate>" + rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(
                                std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()))) +
         "</responseDate>\n<request verb=\"" + verb + "\">" + base() + "</request>\n" + inner + "</OAI-PMH>\n";
}

std::string OaiEndpoint::list(const httplib::Request& req) {
  const std::string verb = req.get_param_value("verb");
  std::string from = req.get_param_value("from");
  std::string until = req.get_param_value("until");
  std::string set = req.get_param_value("set");
  std::string prefix = req.get_param_value("metadataPrefix");
  size_t offset = 0;
  if (req.has_param("resumptionToken")) {
    // g<generation>|<offset>|<from>|<until>|<set>|<prefix>
    auto parts = split(req.get_param_value("resumptionToken"), '|');
    if (parts.size() != 6 || parts[0] != "g" + std::to_string(m_generation.load()) ||
        req.has_param("metadataPrefix") || req.has_param("from")) {
      ++bad_tokens;
      return envelope(verb, "<error code=\"badResumptionToken\">The value of the resumptionToken argument is "
                            "invalid or expired.</error>\n");
    }
    offset = std::stoul(parts[1]);
    from = parts[2];
    until = parts[3];
    set = parts[4];
    prefix = parts[5];
  }
  if (prefix != "oai_dc" && prefix != "marc") {
    return envelope(verb, "<error code=\"cannotDisseminateFormat\">" + xml_escape(prefix) + "</error>\n");
  }
  const size_t stamp_len = second_granularity ? 20 : 10;
  if ((!from.empty() && from.size() != stamp_len) || (!until.empty() && until.size() != stamp_len)) {
    return envelope(verb, "<error code=\"badArgument\">from/until not at the repository's granularity</error>\n");
  }
  const std::string today = stamp();
  if (max_window_days > 0 && !req.has_param("resumptionToken") &&
      (from.empty() || days_between(from, until.empty() ? today : until) > max_window_days)) {
    ++refused_windows;
    return envelope(verb, "<error code=\"badArgument\">Too many records in that range: narrow it with from and "
                          "until</error>\n");
  }
  std::vector<std::pair<std::string, Record>> match;
  {
    std::lock_guard lock(m_mutex);
    for (const auto& [id, r] : m_records) {
      if ((!from.empty() && r.datestamp < from) || (!until.empty() && r.datestamp > until)) {
        continue;
      }
      if (!set.empty() && std::find(r.sets.begin(), r.sets.end(), set) == r.sets.end()) {
        continue;
      }
      match.emplace_back(id, r);
    }
  }
  if (match.empty()) {
    return envelope(verb, "<error code=\"noRecordsMatch\">No records match.</error>\n");
  }
  std::ostringstream out;
  out << "<" << verb << ">\n";
  for (size_t i = offset; i < std::min(match.size(), offset + page_size); ++i) {
    const auto& [id, r] = match[i];
    std::ostringstream header;
    header << "<header" << (r.deleted ? " status=\"deleted\"" : "") << ">\n<identifier>" << xml_escape(id)
           << "</identifier>\n<datestamp>" << r.datestamp << "</datestamp>\n";
    for (const auto& s : r.sets) {
      header << "<setSpec>" << s << "</setSpec>\n";
    }
    header << "</header>\n";
    if (verb == "ListIdentifiers") {
      out << header.str();
      continue;
    }
    out << "<record>\n" << header.str();
    if (!r.deleted && prefix == "marc") {
      // MARC21 slim, as DSpace serves it under "marc".
      out << "<metadata>\n<record xmlns=\"http://www.loc.gov/MARC21/slim\" "
             "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
             "xsi:schemaLocation=\"http://www.loc.gov/MARC21/slim "
             "http://www.loc.gov/standards/marcxml/schema/MARC21slim.xsd\">\n<leader>00925njm  22002777a 4500</leader>"
             "\n<datafield tag=\"245\" ind1=\"0\" ind2=\"0\"><subfield code=\"a\">"
          << xml_escape(r.title) << "</subfield></datafield>\n</record>\n</metadata>\n";
    } else if (!r.deleted) {
      out << "<metadata>\n<oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" "
             "xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
             "xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/oai_dc/ "
             "http://www.openarchives.org/OAI/2.0/oai_dc.xsd\">\n<dc:title>"
          << xml_escape(r.title) << "</dc:title>\n<dc:identifier>http://hdl.handle.net/" << xml_escape(id)
          << "</dc:identifier>\n</oai_dc:dc>\n</metadata>\n";
    }
    out << "</record>\n";
  }
  const size_t next = offset + page_size;
  if (next < match.size()) {
    const auto expires = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) + std::chrono::hours(1);
    out << "<resumptionToken completeListSize=\"" << match.size() << "\" cursor=\"" << offset
        << "\" expirationDate=\""
        << rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(expires)) << "\">g"
        << m_generation.load() << "|" << next << "|" << from << "|" << until << "|" << set << "|" << prefix << "</resumptionToken>\n";
  } else if (offset > 0) {
    out << "<resumptionToken completeListSize=\"" << match.size() << "\" cursor=\"" << offset << "\"/>\n";
  }
  out << "</" << verb << ">\n";
  return envelope(verb, out.str());
}

httplib::Server& OaiEndpoint::setup() {
  m_server.Get("/oai/request", [this](const httplib::Request& req, httplib::Response& res) {
    ++requests;
    if (delay_ms.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    }
    if (unavailable.load() > 0) {
      --unavailable;
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content("busy", "text/plain");
      return;
    }
    const std::string verb = req.get_param_value("verb");
    std::string body;
    if (verb == "Identify") {
      std::string first = earliest;
      if (first.empty()) {
        std::lock_guard lock(m_mutex);
        first = stamp();
        for (const auto& [id, r] : m_records) {
          first = std::min(first, r.datestamp);
        }
      }
      body = envelope(verb, "<Identify>\n<repositoryName>Test repository</repositoryName>\n<baseURL>" + base() +
                                "</baseURL>\n<protocolVersion>2.0</protocolVersion>\n<adminEmail>admin@example.org"
                                "</adminEmail>\n<earliestDatestamp>" + first +
                                "</earliestDatestamp>\n<deletedRecord>" + deleted_record +
                                "</deletedRecord>\n<granularity>" +
                                (second_granularity ? "YYYY-MM-DDThh:mm:ssZ" : "YYYY-MM-DD") +
                                "</granularity>\n</Identify>\n");
    } else if (verb == "ListMetadataFormats") {
      body = envelope(verb, "<ListMetadataFormats>\n<metadataFormat><metadataPrefix>oai_dc</metadataPrefix>"
                            "<schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema><metadataNamespace>"
                            "http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace></metadataFormat>\n"
                            "<metadataFormat><metadataPrefix>dim</metadataPrefix><schema>http://www.dspace.org/"
                            "schema/dim.xsd</schema><metadataNamespace>http://www.dspace.org/xmlns/dspace/dim"
                            "</metadataNamespace></metadataFormat>\n"
                            "<metadataFormat><metadataPrefix>marc</metadataPrefix><schema>http://www.loc.gov/"
                            "standards/marcxml/schema/MARC21slim.xsd</schema><metadataNamespace>http://www.loc.gov/"
                            "MARC21/slim</metadataNamespace></metadataFormat>\n</ListMetadataFormats>\n");
    } else if (verb == "ListSets") {
      std::set<std::string> specs;
      {
        std::lock_guard lock(m_mutex);
        for (const auto& [id, r] : m_records) {
          specs.insert(r.sets.begin(), r.sets.end());
        }
      }
      std::string sets = "<ListSets>\n";
      for (const auto& s : specs) {
        sets += "<set><setSpec>" + s + "</setSpec><setName>Collection " + s + "</setName></set>\n";
      }
      body = envelope(verb, sets + "</ListSets>\n");
    } else if (verb == "ListRecords" || verb == "ListIdentifiers") {
      body = list(req);
    } else {
      body = envelope(verb, "<error code=\"badVerb\">Illegal OAI verb</error>\n");
    }
    res.set_content(body, "text/xml;charset=UTF-8");
  });
  return m_server;
}

} // namespace tributary::test
