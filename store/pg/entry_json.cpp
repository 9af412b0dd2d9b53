#include "store/pg/entry_json.h"

#include "resourcesync/fields.h"

#include <nlohmann/json.hpp>

namespace tributary::store {

namespace {

using nlohmann::json;

json time_json(const rs::Timestamp& t) { return t.time_since_epoch().count(); }

rs::Timestamp time_of(const json& j) { return rs::Timestamp(std::chrono::microseconds(j.get<int64_t>())); }

template <typename T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) {
    j[key] = *v;
  }
}

void put_time(json& j, const char* key, const std::optional<rs::Timestamp>& v) {
  if (v) {
    j[key] = time_json(*v);
  }
}

template <typename T>
void get(const json& j, const char* key, std::optional<T>& v) {
  if (auto it = j.find(key); it != j.end() && !it->is_null()) {
    v = it->get<T>();
  }
}

void get_time(const json& j, const char* key, std::optional<rs::Timestamp>& v) {
  if (auto it = j.find(key); it != j.end() && it->is_number_integer()) {
    v = time_of(*it);
  }
}

json hashes_json(const std::vector<rs::HashValue>& hashes) {
  json a = json::array();
  for (const auto& h : hashes) {
    a.push_back({h.algorithm, h.hex});
  }
  return a;
}

std::vector<rs::HashValue> hashes_of(const json& j) {
  std::vector<rs::HashValue> out;
  for (const auto& h : j) {
    out.push_back({h.at(0).get<std::string>(), h.at(1).get<std::string>()});
  }
  return out;
}

// One field of the tables (resourcesync/fields.h) into the record's JSON:
// absent values and empty hash lists left out, timestamps as microseconds.
struct JsonPut {
  json& j;
  void operator()(const char* key, const std::string& v) const { j[key] = v; }
  template <typename T>
  void operator()(const char* key, const std::optional<T>& v) const {
    put(j, key, v);
  }
  void operator()(const char* key, const std::optional<rs::Timestamp>& v) const { put_time(j, key, v); }
  void operator()(const char* key, const std::optional<rs::Change>& v) const {
    if (v) {
      j[key] = std::string(rs::to_string(*v));
    }
  }
  void operator()(const char* key, const std::vector<rs::HashValue>& v) const {
    if (!v.empty()) {
      j[key] = hashes_json(v);
    }
  }
};

// And back.
struct JsonGet {
  const json& j;
  void operator()(const char* key, std::string& v) const { v = j.value(key, ""); }
  template <typename T>
  void operator()(const char* key, std::optional<T>& v) const {
    get(j, key, v);
  }
  void operator()(const char* key, std::optional<rs::Timestamp>& v) const { get_time(j, key, v); }
  void operator()(const char* key, std::optional<rs::Change>& v) const {
    if (j.contains(key)) {
      v = rs::change_from_string(j[key].get<std::string>());
    }
  }
  void operator()(const char* key, std::vector<rs::HashValue>& v) const {
    if (j.contains(key)) {
      v = hashes_of(j[key]);
    }
  }
};

json attributes_json(const std::vector<rs::ExtensionAttribute>& attributes) {
  json a = json::array();
  for (const auto& x : attributes) {
    a.push_back({x.ns, x.prefix, x.name, x.value});
  }
  return a;
}

std::vector<rs::ExtensionAttribute> attributes_of(const json& j) {
  std::vector<rs::ExtensionAttribute> out;
  for (const auto& x : j) {
    out.push_back({x.at(0).get<std::string>(), x.at(1).get<std::string>(), x.at(2).get<std::string>(),
                   x.at(3).get<std::string>()});
  }
  return out;
}

json node_json(const rs::XmlNode& n) {
  json j{{"ns", n.ns}, {"prefix", n.prefix}, {"name", n.name}, {"text", n.text}};
  if (!n.attributes.empty()) {
    j["attributes"] = attributes_json(n.attributes);
  }
  if (!n.children.empty()) {
    json c = json::array();
    for (const auto& child : n.children) {
      c.push_back(node_json(child));
    }
    j["children"] = std::move(c);
  }
  return j;
}

rs::XmlNode node_of(const json& j) {
  rs::XmlNode n;
  n.ns = j.value("ns", "");
  n.prefix = j.value("prefix", "");
  n.name = j.value("name", "");
  n.text = j.value("text", "");
  if (j.contains("attributes")) {
    n.attributes = attributes_of(j["attributes"]);
  }
  if (j.contains("children")) {
    for (const auto& c : j["children"]) {
      n.children.push_back(node_of(c));
    }
  }
  return n;
}

json md_json(const rs::Metadata& md) {
  json j = json::object();
  rs::each_md_field(md, JsonPut{j});
  if (!md.extensions.empty()) {
    j["ext"] = attributes_json(md.extensions);
  }
  return j;
}

rs::Metadata md_of(const json& j) {
  rs::Metadata md;
  rs::each_md_field(md, JsonGet{j});
  if (j.contains("ext")) {
    md.extensions = attributes_of(j["ext"]);
  }
  return md;
}

json link_json(const rs::Link& l) {
  json j = json::object();
  rs::each_ln_field(l, JsonPut{j});
  if (!l.extensions.empty()) {
    j["ext"] = attributes_json(l.extensions);
  }
  return j;
}

rs::Link link_of(const json& j) {
  rs::Link l;
  rs::each_ln_field(l, JsonGet{j});
  if (j.contains("ext")) {
    l.extensions = attributes_of(j["ext"]);
  }
  return l;
}

} // namespace

std::string entry_to_json(const rs::Entry& e) {
  json j{{"loc", e.loc}};
  put_time(j, "lastmod", e.lastmod);
  put(j, "changefreq", e.changefreq);
  put(j, "priority", e.priority);
  if (e.md) {
    j["md"] = md_json(*e.md);
  }
  if (!e.links.empty()) {
    json a = json::array();
    for (const auto& l : e.links) {
      a.push_back(link_json(l));
    }
    j["links"] = std::move(a);
  }
  if (!e.extensions.empty()) {
    json a = json::array();
    for (const auto& n : e.extensions) {
      a.push_back(node_json(n));
    }
    j["extensions"] = std::move(a);
  }
  if (e.lastmod_date_only) {
    j["lastmod_date_only"] = true;
  }
  if (e.time_inferred) {
    j["time_inferred"] = true;
  }
  return j.dump();
}

rs::Entry entry_from_json(const std::string& text, const std::string& uri) {
  rs::Entry bare;
  bare.loc = uri;
  try {
    const json j = json::parse(text);
    if (!j.is_object() || j.value("loc", "") != uri) {
      return bare;
    }
    rs::Entry e;
    e.loc = uri;
    get_time(j, "lastmod", e.lastmod);
    get(j, "changefreq", e.changefreq);
    get(j, "priority", e.priority);
    if (j.contains("md")) {
      e.md = md_of(j["md"]);
    }
    if (j.contains("links")) {
      for (const auto& l : j["links"]) {
        e.links.push_back(link_of(l));
      }
    }
    if (j.contains("extensions")) {
      for (const auto& n : j["extensions"]) {
        e.extensions.push_back(node_of(n));
      }
    }
    e.lastmod_date_only = j.value("lastmod_date_only", false);
    e.time_inferred = j.value("time_inferred", false);
    return e;
  } catch (const json::exception&) {
    return bare;
  }
}

} // namespace tributary::store
