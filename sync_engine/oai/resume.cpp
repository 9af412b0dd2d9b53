#include "sync_engine/oai/resume.h"

#include <nlohmann/json.hpp>

namespace tributary::sync::oai {

using nlohmann::json;

std::string Resume::dump() const {
  json j{{"mode", mode}, {"next", next}, {"span_seconds", span_seconds}, {"resumed_baseline", resumed_baseline}};
  auto put = [&](const char* k, const std::optional<rs::Timestamp>& t) {
    if (t) {
      j[k] = rs::format_w3c_datetime(*t);
    }
  };
  put("expires", expires);
  put("from", from);
  put("until", until);
  put("started", started);
  return j.dump();
}
std::optional<Resume> Resume::load(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("mode")) {
    return std::nullopt;
  }
  Resume r;
  r.mode = j.value("mode", "");
  r.next = j.value("next", "");
  r.span_seconds = j.value("span_seconds", int64_t{0});
  r.resumed_baseline = j.value("resumed_baseline", false);
  auto get = [&](const char* k) -> std::optional<rs::Timestamp> {
    return j.contains(k) && j[k].is_string() ? rs::parse_w3c_datetime(j[k].get<std::string>()) : std::nullopt;
  };
  r.expires = get("expires");
  r.from = get("from");
  r.until = get("until");
  r.started = get("started");
  return r;
}

} // namespace tributary::sync::oai
