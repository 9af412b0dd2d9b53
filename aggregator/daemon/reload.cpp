#include "aggregator/daemon/reload.h"

#include "common/log.h"
#include "store/pg/pg_operator.h"

namespace tributary::agg {

SourceChanges compare_sources(const Config& before, const Config& after) {
  SourceChanges out;
  for (const auto& s : after.sources) {
    const sync::SourceConfig* was = before.find_source(s.name);
    if (!was) {
      out.added.push_back(s.name);
    } else if (was->enabled && !s.enabled) {
      out.disabled.push_back(s.name);
    } else if (!was->enabled && s.enabled) {
      out.enabled.push_back(s.name);
    } else {
      auto a = before.source_text.find(s.name);
      auto b = after.source_text.find(s.name);
      const bool same = a != before.source_text.end() && b != after.source_text.end() && a->second == b->second;
      if (!same) {
        out.changed.push_back(s.name);
      }
    }
  }
  for (const auto& s : before.sources) {
    if (!after.find_source(s.name)) {
      out.removed.push_back(s.name);
    }
  }
  return out;
}

std::string describe(const SourceChanges& c) {
  std::string out;
  auto part = [&out](const char* verb, const std::vector<std::string>& names) {
    if (names.empty()) {
      return;
    }
    out += out.empty() ? "" : "; ";
    out += verb;
    for (size_t i = 0; i < names.size(); ++i) {
      out += (i == 0 ? " " : ", ") + names[i];
    }
  };
  part("added", c.added);
  part("removed", c.removed);
  part("enabled", c.enabled);
  part("disabled", c.disabled);
  part("changed", c.changed);
  return out.empty() ? "no source changed" : out;
}

void mark_removed_sources(store::PgOperatorStore& operators, const Config& c) {
  std::vector<std::string> names;
  for (const auto& s : c.sources) {
    names.push_back(s.name);
  }
  auto removed = operators.mark_removed(names);
  if (!removed) {
    log::warn("", "removed sources not marked: " + removed.error().message);
    return;
  }
  for (const auto& name : *removed) {
    const auto keep = c.removed_source_retention.count();
    log::warn(name, "source removed from the config: no longer published (its documents answer 410 Gone); its data "
                    "is kept " + (keep > 0 ? "for " + std::to_string(keep / 86400) + " d, then purged by tributary gc"
                                           : std::string("until `tributary retire ") + name + "`") +
                    " (`tributary retire " + name + "` purges it now)");
  }
}

} // namespace tributary::agg
