#pragma once

#include "sync_engine/source_config.h"

#include <optional>
#include <string>
#include <vector>

namespace tributary::agg {

// The configuration file (JSON). See config/example.json for every key.
struct Config {
  std::string database; // libpq connection string or postgresql:// URI
  std::string data_dir; // blob store and temporary files
  std::string listen = "127.0.0.1:8080"; // host:port the republisher serves on
  std::string public_url;                // our base URL as others reach it (default http://<listen>)
  size_t change_list_part_size = 10000;  // changes per part of our Change List (closed parts never change)
  std::vector<sync::SourceConfig> sources;
  struct NamedSet {
    std::string name;
    std::vector<std::string> sources;
  };
  std::vector<NamedSet> sets; // published sets merging several sources

  const sync::SourceConfig* find_source(const std::string& name) const;
};

// Either a config or every problem found, each as
// "<file>: <JSON pointer>: <what is wrong>" (unknown keys included).
struct ConfigLoad {
  std::optional<Config> config;
  std::vector<std::string> problems;
};

ConfigLoad parse_config(const std::string& text, const std::string& file_name);
ConfigLoad load_config(const std::string& path);

} // namespace tributary::agg
