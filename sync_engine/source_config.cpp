#include "sync_engine/source_config.h"

#include <re2/re2.h>

#include <cstdlib>
#include <fstream>

namespace tributary::sync {

namespace {

bool type_matches(const std::string& pattern, const std::string& type) {
  // Parameters ("; charset=...") do not take part.
  std::string bare = type.substr(0, type.find(';'));
  while (!bare.empty() && bare.back() == ' ') {
    bare.pop_back();
  }
  if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, "/*") == 0) {
    return bare.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  }
  return bare == pattern;
}

} // namespace

bool UriFilter::matches(const std::string& uri) const {
  if (is_regex) {
    return regex && RE2::FullMatch(uri, *regex);
  }
  return uri.compare(0, prefix.size(), prefix) == 0;
}

std::optional<std::string> make_uri_filter(const std::string& text, UriFilter& out) {
  out = UriFilter{};
  out.text = text;
  if (text.rfind("re:", 0) != 0) {
    out.prefix = text;
    return std::nullopt;
  }
  out.is_regex = true;
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(8 << 20); // a pathological pattern fails here, not at match time
  auto re = std::make_shared<const RE2>(text.substr(3), o);
  if (!re->ok()) {
    return "invalid regular expression: " + re->error();
  }
  out.regex = std::move(re);
  return std::nullopt;
}

bool SourceConfig::selects(const std::string& uri, const std::optional<std::string>& type) const {
  if (!include.empty()) {
    bool any = false;
    for (const auto& f : include) {
      if (f.matches(uri)) {
        any = true;
        break;
      }
    }
    if (!any) {
      return false;
    }
  }
  for (const auto& f : exclude) {
    if (f.matches(uri)) {
      return false;
    }
  }
  if (!media_types.empty()) {
    if (!type) {
      return false;
    }
    for (const auto& m : media_types) {
      if (type_matches(m, *type)) {
        return true;
      }
    }
    return false;
  }
  return true;
}

Result<std::string> read_secret(const SecretRef& s, const std::string& owner) {
  if (!s.env.empty()) {
    const char* v = std::getenv(s.env.c_str());
    if (!v || !*v) {
      return make_error(ErrorKind::permanent, owner + ": environment variable " + s.env + " is not set");
    }
    return std::string(v);
  }
  std::ifstream in(s.file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return make_error(ErrorKind::permanent, owner + ": cannot read secret file " + s.file);
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
    line.pop_back();
  }
  if (line.empty()) {
    return make_error(ErrorKind::permanent, owner + ": secret file " + s.file + " is empty");
  }
  return line;
}

} // namespace tributary::sync
