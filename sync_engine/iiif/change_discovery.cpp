#include "sync_engine/iiif/change_discovery.h"

#include <nlohmann/json.hpp>

namespace tributary::sync::iiif {

namespace {

using nlohmann::json;

// A link may be a string or an object with an id (ActivityStreams allows
// both; IIIF writes objects, some streams strings).
std::string id_of(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) {
    return {};
  }
  const json& v = j[key];
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_object()) {
    for (const char* k : {"id", "@id"}) {
      if (v.contains(k) && v[k].is_string()) {
        return v[k].get<std::string>();
      }
    }
  }
  return {};
}

std::string text(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::optional<uint64_t> count(const json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number_unsigned()) {
    return j[key].get<uint64_t>();
  }
  return std::nullopt;
}

Result<json> parse_json(std::string_view body, const char* what) {
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorKind::invalid_document, std::string("not a JSON object: not an ") + what);
  }
  return j;
}

std::string type_of(const json& j) {
  std::string t = text(j, "type");
  return t.empty() ? text(j, "@type") : t;
}

} // namespace

Result<Collection> parse_collection(std::string_view body) {
  auto j = parse_json(body, "OrderedCollection");
  if (!j) {
    return tl::unexpected(j.error());
  }
  const std::string type = type_of(*j);
  if (type != "OrderedCollection") {
    return make_error(ErrorKind::invalid_document,
                      "not an ActivityStreams OrderedCollection (type '" + type.substr(0, 64) + "')");
  }
  Collection c;
  c.id = id_of(*j, "id");
  if (c.id.empty()) {
    c.id = text(*j, "id");
  }
  c.first = id_of(*j, "first");
  c.last = id_of(*j, "last");
  c.total_items = count(*j, "totalItems");
  if (c.first.empty() && c.last.empty()) {
    return make_error(ErrorKind::invalid_document, "the OrderedCollection names neither a first nor a last page");
  }
  return c;
}

namespace {

// One item of orderedItems onto the page, or a warning saying why not.
void read_activity(const json& item, size_t n, Page& p) {
  Activity a;
  a.id = text(item, "id");
  a.type = type_of(item);
  a.object = id_of(item, "object");
  if (item.is_object() && item.contains("object") && item["object"].is_object()) {
    a.object_type = type_of(item["object"]);
  }
  a.target = id_of(item, "target");
  const std::string where = "activity " + std::to_string(n) + (a.id.empty() ? "" : " (" + a.id.substr(0, 200) + ")");
  static const std::vector<std::string> known{"Create", "Update", "Delete", "Move", "Add", "Remove", "Refresh"};
  if (std::find(known.begin(), known.end(), a.type) == known.end()) {
    p.warnings.push_back(where + ": type '" + a.type.substr(0, 64) + "' is none Change Discovery names: skipped");
    return;
  }
  if (a.object.empty() && a.type != "Refresh") {
    p.warnings.push_back(where + ": no object id: skipped");
    return;
  }
  if (a.type == "Move" && a.target.empty()) {
    p.warnings.push_back(where + ": a Move without a target: read as a Delete of its object");
    a.type = "Delete";
  }
  if (const std::string t = text(item, "endTime"); !t.empty()) {
    std::string why;
    a.end_time = rs::parse_datetime_lenient(t, &why);
    if (!a.end_time) {
      p.warnings.push_back(where + ": endTime '" + t.substr(0, 64) + "': " + why + ": skipped");
      return;
    }
  }
  p.items.push_back(std::move(a));
}

} // namespace

// Read as a stream: each item of orderedItems is made into an Activity as
// soon as it is parsed and then dropped from the document, so that a page
// costs its activities, not a JSON tree of it (ten times its size).
Result<Page> parse_page(std::string_view body) {
  Page p;
  size_t n = 0;
  bool in_items = false;
  bool saw_items = false;
  json::parser_callback_t keep = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) {
      in_items = parsed == "orderedItems";
      return true;
    }
    if (depth == 1 && event == json::parse_event_t::array_start && in_items) {
      saw_items = true;
    }
    if (in_items && depth == 2 &&
        (event == json::parse_event_t::object_end || event == json::parse_event_t::value ||
         event == json::parse_event_t::array_end)) {
      read_activity(parsed, ++n, p);
      return false; // not kept in the document
    }
    return true;
  };
  json j = json::parse(body.begin(), body.end(), keep, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorKind::invalid_document, "not a JSON object: not an OrderedCollectionPage");
  }
  const std::string type = type_of(j);
  if (type != "OrderedCollectionPage") {
    return make_error(ErrorKind::invalid_document,
                      "not an ActivityStreams OrderedCollectionPage (type '" + type.substr(0, 64) + "')");
  }
  p.id = text(j, "id");
  p.prev = id_of(j, "prev");
  p.next = id_of(j, "next");
  p.start_index = count(j, "startIndex");
  if (!saw_items) {
    p.items.clear();
    p.warnings.clear();
    p.warnings.push_back("the page holds no orderedItems array");
  }
  return p;
}

} // namespace tributary::sync::iiif
