#include "aggregator/cli/document_json.h"

#include "resourcesync/fields.h"

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

// One field of the tables (resourcesync/fields.h) as `inspect --json` and
// the API show it: times and hash lists as the documents write them.
struct FieldJson {
  nlohmann::json& j;
  void operator()(const char* key, const std::string& v) const { j[key] = v; }
  void operator()(const char* key, const std::optional<std::string>& v) const { put_str(j, key, v); }
  void operator()(const char* key, const std::optional<rs::Timestamp>& v) const { put_time(j, key, v); }
  void operator()(const char* key, const std::optional<rs::Change>& v) const {
    if (v) {
      j[key] = std::string(rs::to_string(*v));
    }
  }
  void operator()(const char* key, const std::vector<rs::HashValue>& v) const {
    if (!v.empty()) {
      j[key] = rs::format_hash_list(v);
    }
  }
  template <typename T>
  void operator()(const char* key, const std::optional<T>& v) const {
    if (v) {
      j[key] = *v;
    }
  }
};

} // namespace

nlohmann::json to_json(const rs::Metadata& md) {
  nlohmann::json j = nlohmann::json::object();
  rs::each_md_field(md, FieldJson{j});
  put_ext(j, md.extensions);
  return j;
}

nlohmann::json to_json(const rs::Link& l) {
  nlohmann::json j = nlohmann::json::object();
  rs::each_ln_field(l, FieldJson{j});
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
