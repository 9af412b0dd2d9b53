#pragma once

#include "resourcesync/model.h"

#include <nlohmann/json.hpp>

#include <vector>

// JSON views of the protocol model, as printed by `tributary inspect --json`
// (and later served by the status API). Only attributes that are present
// appear; datetimes are canonical W3C strings.
namespace tributary::agg {

nlohmann::json to_json(const rs::Metadata& md);
nlohmann::json to_json(const rs::Link& link);
nlohmann::json to_json(const rs::Entry& entry);
nlohmann::json to_json(const rs::XmlNode& node);
// {"line": N, "message": "..."}
nlohmann::json to_json(const rs::Diagnostic& d);

} // namespace tributary::agg
