#include "aggregator/cli/document_json.h"

namespace tributary::agg {

namespace {

void put_time(nlohmann::json& j, const char* key, const std::optional<rs::Timestamp>& t) {
  if (t) {
    j[key] = rs::format_w3c_datetime(*t);
  }
}

void put_str(nlohmann::json& j, const char* key, const std::optional<std::string>& s) {
  if (s) {
    j[key] = *s;
  }
}

void put_ext(nlohmann::json& j, const std::vector<rs::ExtensionAttribute>& ext) {
  for (const auto& a : ext) {
    std::string key = a.ns.empty() ? a.name : "{" + a.ns + "}" + a.name;
    j[key] = a.value;
  }
}

} // namespace

nlohmann::json to_json(const rs::Metadata& md) {
  nlohmann::json j = nlohmann::json::object();
  put_str(j, "capability", md.capability);
  put_time(j, "at", md.at);
  put_time(j, "completed", md.completed);
  put_time(j, "from", md.from);
  put_time(j, "until", md.until);
  if (md.change) {
    j["change"] = std::string(rs::to_string(*md.change));
  }
  put_time(j, "datetime", md.datetime);
  if (!md.hash.empty()) {
    j["hash"] = rs::format_hash_list(md.hash);
  }
  if (md.length) {
    j["length"] = *md.length;
  }
  put_str(j, "type", md.type);
  put_str(j, "encoding", md.encoding);
  put_str(j, "path", md.path);
  put_ext(j, md.extensions);
  return j;
}

nlohmann::json to_json(const rs::Link& l) {
  nlohmann::json j = nlohmann::json::object();
  j["rel"] = l.rel;
  j["href"] = l.href;
  if (!l.hash.empty()) {
    j["hash"] = rs::format_hash_list(l.hash);
  }
  if (l.length) {
    j["length"] = *l.length;
  }
  put_time(j, "modified", l.modified);
  put_str(j, "path", l.path);
  if (l.pri) {
    j["pri"] = *l.pri;
  }
  put_str(j, "type", l.type);
  put_str(j, "encoding", l.encoding);
  put_ext(j, l.extensions);
  return j;
}

nlohmann::json to_json(const rs::XmlNode& n) {
  nlohmann::json j = nlohmann::json::object();
  j["name"] = n.ns.empty() ? n.name : "{" + n.ns + "}" + n.name;
  if (!n.attributes.empty()) {
    nlohmann::json a = nlohmann::json::object();
    put_ext(a, n.attributes);
    j["attributes"] = a;
  }
  if (!n.text.empty()) {
    j["text"] = n.text;
  }
  if (!n.children.empty()) {
    j["children"] = nlohmann::json::array();
    for (const auto& c : n.children) {
      j["children"].push_back(to_json(c));
    }
  }
  return j;
}

nlohmann::json to_json(const rs::Entry& e) {
  nlohmann::json j = nlohmann::json::object();
  j["loc"] = e.loc;
  put_time(j, "lastmod", e.lastmod);
  put_str(j, "changefreq", e.changefreq);
  put_str(j, "priority", e.priority);
  j["md"] = e.md ? to_json(*e.md) : nlohmann::json::object();
  j["links"] = nlohmann::json::array();
  for (const auto& l : e.links) {
    j["links"].push_back(to_json(l));
  }
  if (!e.extensions.empty()) {
    j["extensions"] = nlohmann::json::array();
    for (const auto& n : e.extensions) {
      j["extensions"].push_back(to_json(n));
    }
  }
  return j;
}

nlohmann::json to_json(const rs::Diagnostic& d) {
  return nlohmann::json{{"line", d.line}, {"message", d.message}};
}

} // namespace tributary::agg
