#include "aggregator/setup/config.h"

#include "common/http/client_address.h"

#include "store/pg/pg_budget.h"
#include "store/store.h"
#include "sync_engine/fetcher.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace tributary::agg {

namespace {

// Source and set names become folder names (dumps, documents) and URL
// segments: a safe alphabet, a letter or digit first (never "", "." or "..").
std::optional<std::string> name_problem(const std::string& name) {
  if (name.empty() || name.size() > 64) {
    return "must be 1 to 64 characters";
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) {
      return "use letters, digits, '-', '_' and '.' only";
    }
  }
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) {
    return "must start with a letter or a digit";
  }
  return std::nullopt;
}

using nlohmann::json;

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Walks the JSON with one table of keys per object: type, validation and
// where the value goes. Collects every problem instead of stopping at the
// first, so `check-config` can list them all.
class Parser {
public:
  Parser(std::string file, std::vector<std::string>& problems) : m_file(std::move(file)), m_problems(problems) {}

  void problem(const std::string& ptr, const std::string& msg) {
    m_problems.push_back(m_file + ": " + (ptr.empty() ? "/" : ptr) + ": " + msg);
  }

  using Handler = std::function<void(const json&, const std::string&)>;
  struct Key {
    Handler handler;
    bool required = false;
  };

  void object(const json& j, const std::string& ptr, const std::map<std::string, Key>& keys) {
    if (!j.is_object()) {
      problem(ptr, "expected an object");
      return;
    }
    for (const auto& [k, v] : j.items()) {
      auto it = keys.find(k);
      const std::string child = ptr + "/" + escape_pointer(k);
      if (it == keys.end()) {
        problem(child, "unknown key");
        continue;
      }
      it->second.handler(v, child);
    }
    for (const auto& [k, key] : keys) {
      if (key.required && !j.contains(k)) {
        problem(ptr + "/" + escape_pointer(k), "missing (required)");
      }
    }
  }

  Handler string(std::string& out, bool non_empty = true) {
    return [this, &out, non_empty](const json& v, const std::string& ptr) {
      if (!v.is_string()) {
        problem(ptr, "expected a string");
      } else if (non_empty && v.get<std::string>().empty()) {
        problem(ptr, "must not be empty");
      } else {
        out = v.get<std::string>();
      }
    };
  }

  Handler url(std::string& out, bool allow_file) {
    return [this, &out, allow_file](const json& v, const std::string& ptr) {
      if (!v.is_string()) {
        problem(ptr, "expected a URL string");
        return;
      }
      auto u = sync::parse_url(v.get<std::string>());
      if (!u || (u->scheme != "http" && u->scheme != "https" && !(allow_file && u->scheme == "file"))) {
        problem(ptr, allow_file ? "expected an http(s) or file URL" : "expected an http(s) URL");
        return;
      }
      out = v.get<std::string>();
    };
  }

  template <typename T> Handler integer(T& out, long long min, long long max) {
    return [this, &out, min, max](const json& v, const std::string& ptr) {
      if (!v.is_number_integer()) {
        problem(ptr, "expected an integer");
        return;
      }
      long long n = v.get<long long>();
      if (n < min || n > max) {
        problem(ptr, "must be between " + std::to_string(min) + " and " + std::to_string(max));
        return;
      }
      out = static_cast<T>(n);
    };
  }

  Handler number(double& out, double min, double max) {
    return [this, &out, min, max](const json& v, const std::string& ptr) {
      if (!v.is_number() || !std::isfinite(v.get<double>())) {
        problem(ptr, "expected a number");
        return;
      }
      double n = v.get<double>();
      if (n < min || n > max) {
        std::ostringstream s;
        s << "must be between " << min << " and " << max;
        problem(ptr, s.str());
        return;
      }
      out = n;
    };
  }

  Handler duration(std::chrono::seconds& out, bool allow_never) {
    return [this, &out, allow_never](const json& v, const std::string& ptr) {
      if (allow_never && v.is_string() && v.get<std::string>() == "never") {
        out = std::chrono::seconds(0);
        return;
      }
      auto d = v.is_string() ? parse_duration(v.get<std::string>()) : std::nullopt;
      if (!d) {
        problem(ptr, std::string("expected a duration such as \"30s\", \"15m\", \"1h30m\" or \"1d\"") +
                         (allow_never ? " (or \"never\")" : ""));
        return;
      }
      out = *d;
    };
  }

  Handler one_of(std::string& out, std::vector<std::string> allowed) {
    return [this, &out, allowed](const json& v, const std::string& ptr) {
      std::string list;
      for (const auto& a : allowed) {
        list += (list.empty() ? "\"" : ", \"") + a + "\"";
        if (v.is_string() && v.get<std::string>() == a) {
          out = a;
          return;
        }
      }
      problem(ptr, "expected one of " + list);
    };
  }

  // "host:port".
  Handler host_port(std::string& out) {
    return [this, &out](const json& v, const std::string& ptr) {
      if (!v.is_string() || v.get<std::string>().rfind(':') == std::string::npos) {
        problem(ptr, "expected \"host:port\", e.g. \"127.0.0.1:8080\"");
        return;
      }
      const std::string s = v.get<std::string>();
      const std::string port = s.substr(s.rfind(':') + 1);
      if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
          std::stoi(port) > 65535) {
        problem(ptr, "expected \"host:port\", e.g. \"127.0.0.1:8080\"");
        return;
      }
      out = s;
    };
  }

  Handler boolean(bool& out) {
    return [this, &out](const json& v, const std::string& ptr) {
      if (!v.is_boolean()) {
        problem(ptr, "expected true or false");
        return;
      }
      out = v.get<bool>();
    };
  }

  template <typename T> Handler array(std::vector<T>& out, std::function<void(const json&, const std::string&, T&)> item) {
    return [this, &out, item](const json& v, const std::string& ptr) {
      if (!v.is_array()) {
        problem(ptr, "expected an array");
        return;
      }
      out.clear(); // a configured list replaces the default one (oai.metadata_prefixes' ["oai_dc"])
      for (size_t i = 0; i < v.size(); ++i) {
        T t{};
        const size_t before = m_problems.size();
        item(v[i], ptr + "/" + std::to_string(i), t);
        if (m_problems.size() == before) {
          out.push_back(std::move(t));
        }
      }
    };
  }

  void filter(const json& v, const std::string& ptr, sync::UriFilter& f) {
    if (!v.is_string() || v.get<std::string>().empty()) {
      problem(ptr, "expected a URI prefix or \"re:<regular expression>\"");
      return;
    }
    if (auto why = sync::make_uri_filter(v.get<std::string>(), f)) {
      problem(ptr, *why);
    }
  }

  void secret(const json& j, const std::string& ptr, sync::SecretRef& s, const char* what) {
    const std::string file_key = std::string(what) + "_file";
    const std::string env_key = std::string(what) + "_env";
    if (j.contains(file_key) == j.contains(env_key)) {
      problem(ptr, "give exactly one of " + file_key + " and " + env_key);
      return;
    }
    if (j.contains(file_key) && j[file_key].is_string()) {
      s.file = j[file_key].get<std::string>();
      if (access(s.file.c_str(), R_OK) != 0) {
        problem(ptr + "/" + file_key, "cannot read " + s.file);
      }
    }
    if (j.contains(env_key) && j[env_key].is_string()) {
      s.env = j[env_key].get<std::string>();
      if (s.env.empty()) {
        problem(ptr + "/" + env_key, "must not be empty");
      }
    }
  }

  void auth(const json& v, const std::string& ptr, sync::AuthConfig& a) {
    std::string type;
    std::string token_file, token_env, password_file, password_env;
    object(v, ptr,
           {{"type", {string(type), true}},
            {"username", {string(a.username)}},
            {"token_file", {string(token_file)}},
            {"token_env", {string(token_env)}},
            {"password_file", {string(password_file)}},
            {"password_env", {string(password_env)}}});
    if (!v.is_object()) {
      return;
    }
    if (type == "bearer") {
      a.type = sync::AuthConfig::Type::bearer;
      secret(v, ptr, a.secret, "token");
    } else if (type == "basic") {
      a.type = sync::AuthConfig::Type::basic;
      if (a.username.empty()) {
        problem(ptr + "/username", "missing (required for basic auth)");
      }
      secret(v, ptr, a.secret, "password");
    } else if (!type.empty()) {
      problem(ptr + "/type", "expected \"bearer\" or \"basic\"");
    }
  }

  void source(const json& v, const std::string& ptr, sync::SourceConfig& s) {
    double timeout_seconds = 60;
    object(v, ptr,
           {{"name", {string(s.name), true}},
            {"url", {url(s.url, true), true}},
            {"enabled", {boolean(s.enabled)}},
            {"mirrors", {array<sync::MirrorEndpoint>(s.mirrors,
                                                     [this](const json& m, const std::string& p, sync::MirrorEndpoint& e) {
                                                       object(m, p, {{"url", {url(e.url, true), true}},
                                                                     {"pri", {integer(e.pri, 1, 999999)}}});
                                                     })}},
            {"capability_lists", {array<std::string>(s.capability_lists,
                                                     [this](const json& c, const std::string& p, std::string& out) {
                                                       url(out, true)(c, p);
                                                     })}},
            {"include", {array<sync::UriFilter>(s.include, [this](const json& f, const std::string& p,
                                                                  sync::UriFilter& out) { filter(f, p, out); })}},
            {"exclude", {array<sync::UriFilter>(s.exclude, [this](const json& f, const std::string& p,
                                                                  sync::UriFilter& out) { filter(f, p, out); })}},
            {"media_types", {array<std::string>(s.media_types,
                                                [this](const json& m, const std::string& p, std::string& out) {
                                                  if (!m.is_string() || m.get<std::string>().find('/') == std::string::npos) {
                                                    problem(p, "expected a media type such as \"application/pdf\" or \"text/*\"");
                                                    return;
                                                  }
                                                  out = m.get<std::string>();
                                                })}},
            {"auth", {[this, &s](const json& a, const std::string& p) { auth(a, p, s.auth); }}},
            {"concurrency", {integer(s.concurrency, 1, 256)}},
            {"max_requests_per_second", {number(s.max_requests_per_second, 0, 100000)}},
            {"allow_hosts", {array<std::string>(s.allow_hosts,
                                                [this](const json& h, const std::string& p, std::string& out) {
                                                  string(out)(h, p);
                                                })}},
            {"verify_tls", {boolean(s.verify_tls)}},
            {"pipelining", {boolean(s.pipelining)}},
            {"timeout_seconds", {number(timeout_seconds, 0.1, 3600)}},
            {"max_body_bytes", {integer(s.max_body_bytes, 1, 1LL << 40)}},
            {"min_bytes_per_second", {integer(s.min_bytes_per_second, 0, 1LL << 40)}},
            {"interval", {duration(s.interval, false)}},
            {"audit_interval", {duration(s.audit_interval, true)}},
            {"strategy", {one_of(s.strategy, {"auto", "lists", "dumps"})}},
            {"max_deletion_share", {number(s.max_deletion_share, 0, 1)}},
            {"clock_tolerance", {duration(s.clock_tolerance, false)}},
            {"retry_attention_after", {duration(s.retry_attention_after, true)}},
            {"kind", {one_of(s.kind, {"resourcesync", "oai-pmh", "iiif-discovery"})}},
            {"oai", {[this, &s](const json& o, const std::string& p) { oai(o, p, s.oai); }}}});
    s.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_seconds * 1000));
    if (auto why = name_problem(s.name)) {
      problem(ptr + "/name", *why);
    }
  }

  void oai(const json& v, const std::string& ptr, sync::OaiConfig& o) {
    auto prefix = [this](const json& m, const std::string& p, std::string& out) {
      string(out)(m, p);
      if (out.empty() || out.find_first_of(" &=?#") != std::string::npos) {
        problem(p, "expected a metadataPrefix such as \"oai_dc\"");
      }
    };
    object(v, ptr,
           {{"metadata_prefixes", {array<std::string>(o.metadata_prefixes, prefix)}},
            {"sets", {array<std::string>(o.sets, [this](const json& m, const std::string& p, std::string& out) {
               string(out)(m, p);
             })}},
            {"record_uri", {string(o.record_uri)}},
            {"overlap", {duration(o.overlap, true)}}});
    if (o.metadata_prefixes.empty()) {
      problem(ptr + "/metadata_prefixes", "at least one metadataPrefix");
    }
    if (!o.record_uri.empty() && o.record_uri.find("{identifier}") == std::string::npos) {
      problem(ptr + "/record_uri", "must hold {identifier}, or every record would have one URI");
    }
  }

  void content(const json& v, const std::string& ptr, Config::Content& c) {
    object(v, ptr,
           {{"store", {one_of(c.store, {"local", "s3"})}},
            {"endpoint", {url(c.endpoint, false)}},
            {"bucket", {string(c.bucket)}},
            {"region", {string(c.region)}},
            {"path_style", {boolean(c.path_style)}},
            {"cache_bytes", {integer(c.cache_bytes, 0, 1LL << 60)}},
            {"access_key_file", {[](const json&, const std::string&) {}}},
            {"access_key_env", {[](const json&, const std::string&) {}}},
            {"secret_key_file", {[](const json&, const std::string&) {}}},
            {"secret_key_env", {[](const json&, const std::string&) {}}}});
    if (!v.is_object()) {
      return;
    }
    // The keys default to AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    for (auto [what, ref] : {std::pair<const char*, sync::SecretRef*>{"access_key", &c.access_key},
                             {"secret_key", &c.secret_key}}) {
      const std::string w = what;
      if (v.contains(w + "_file") || v.contains(w + "_env")) {
        *ref = sync::SecretRef{};
        secret(v, ptr, *ref, what);
      }
    }
    if (c.store == "s3") {
      if (c.endpoint.empty()) {
        problem(ptr + "/endpoint", "missing (required for the s3 store)");
      }
      // S3 bucket names: 3-63 of lower-case letters, digits, '-' and '.'.
      if (c.bucket.size() < 3 || c.bucket.size() > 63 ||
          c.bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos) {
        problem(ptr + "/bucket", "expected an S3 bucket name (3-63 of a-z, 0-9, '-' and '.')");
      }
    }
  }

  // `oai`: our OAI-PMH data provider.
  void oai(const json& v, const std::string& ptr, Config::Oai& o) {
    object(v, ptr,
           {{"enabled", {boolean(o.enabled)}},
            {"repository_name", {string(o.repository_name)}},
            {"admin_emails", {array<std::string>(o.admin_emails,
                                                 [this](const json& n, const std::string& q, std::string& e) {
                                                   string(e)(n, q);
                                                   const size_t at = e.find('@');
                                                   if (at == std::string::npos || at == 0 ||
                                                       e.find('.', at) == std::string::npos ||
                                                       e.find_first_of(" \t\r\n") != std::string::npos) {
                                                     problem(q, "expected an email address");
                                                   }
                                                 })}},
            {"page_size", {integer(o.page_size, 1, 10000)}}});
  }

  // `push`: our hub, our subscriptions and their limits.
  void push(const json& v, const std::string& ptr, Config::Push& p) {
    object(v, ptr,
           {{"hub", {boolean(p.hub)}},
            {"subscribe", {boolean(p.subscribe)}},
            {"sign", {[this, &p](const json& s, const std::string& q) {
               if (s.is_boolean()) {
                 p.sign = s.get<bool>() ? "always" : "never";
               } else {
                 one_of(p.sign, {"https", "always", "never"})(s, q);
               }
             }}},
            {"lease", {duration(p.lease, false)}},
            {"poll_interval", {duration(p.poll_interval, false)}},
            {"min_lease", {duration(p.min_lease, false)}},
            {"max_lease", {duration(p.max_lease, false)}},
            {"max_subscriptions", {integer(p.max_subscriptions, 1, 10000000)}},
            {"max_subscriptions_per_host", {integer(p.max_subscriptions_per_host, 1, 10000000)}},
            {"max_subscriptions_per_domain", {integer(p.max_subscriptions_per_domain, 1, 10000000)}},
            {"external_hub", {url(p.external_hub, false)}},
            {"external_hub_secret_file", {[this, &p](const json& e, const std::string& q) {
               std::string f;
               string(f)(e, q);
               if (!f.empty()) {
                 if (access(f.c_str(), R_OK) != 0) {
                   problem(q, "cannot read " + f);
                 }
                 p.external_hub_secret = sync::SecretRef{f, ""};
               }
             }}},
            {"external_hub_secret_env", {[this, &p](const json& e, const std::string& q) {
               std::string n;
               string(n)(e, q);
               if (!n.empty()) {
                 p.external_hub_secret = sync::SecretRef{"", n};
               }
             }}},
            {"callback_allow_hosts",
             {array<std::string>(p.callback_allow_hosts,
                                 [this](const json& n, const std::string& q, std::string& host) {
                                   string(host)(n, q);
                                 })}}});
    if (p.min_lease > p.max_lease) {
      problem(ptr + "/min_lease", "must not be longer than max_lease");
    }
  }

  // A named set of `sets`: its name, and the sources it gathers.
  void named_set(const json& v, const std::string& p, Config::NamedSet& out) {
    object(v, p,
           {{"name", {[this, &out](const json& n, const std::string& q) {
                        string(out.name)(n, q);
                        if (auto why = n.is_string() ? name_problem(out.name) : std::nullopt) {
                          problem(q, *why);
                        }
                      },
                      true}},
            {"sources", {array<std::string>(out.sources,
                                            [this](const json& n, const std::string& q, std::string& name) {
                                              string(name)(n, q);
                                            }),
                         true}}});
  }

  // What is judged across keys: each set names configured sources, one
  // admin token, no source name twice.
  void across(const json& j, const Config& c) {
    for (size_t i = 0; i < c.sets.size(); ++i) {
      for (size_t k = 0; k < c.sets[i].sources.size(); ++k) {
        bool known = false;
        if (j.is_object() && j.contains("sources") && j["sources"].is_array()) {
          for (const auto& src : j["sources"]) {
            // (A name that is no string is a problem reported above, not a throw.)
            known = known || (src.is_object() && src.contains("name") && src["name"].is_string() &&
                               src["name"].get<std::string>() == c.sets[i].sources[k]);
          }
        }
        if (!known) {
          problem("/sets/" + std::to_string(i) + "/sources/" + std::to_string(k),
                  "no source named '" + c.sets[i].sources[k] + "'");
        }
      }
    }
    if (j.is_object() && j.contains("admin_token_file") && j.contains("admin_token_env")) {
      problem("/admin_token_env", "give only one of admin_token_file and admin_token_env");
    }
    // Duplicates are judged on the raw names, so that a source with other
    // problems still counts.
    std::set<std::string> names;
    if (j.is_object() && j.contains("sources") && j["sources"].is_array()) {
      const json& arr = j["sources"];
      for (size_t i = 0; i < arr.size(); ++i) {
        if (arr[i].is_object() && arr[i].contains("name") && arr[i]["name"].is_string()) {
          const std::string name = arr[i]["name"].get<std::string>();
          if (!names.insert(name).second) {
            problem("/sources/" + std::to_string(i) + "/name", "duplicate source name '" + name + "'");
          }
        }
      }
    }
  }

  void config(const json& j, Config& c) {
    object(j, "",
           {{"database", {string(c.database), true}},
            {"database_connections", {integer(c.database_connections, 2, 1000)}},
            {"database_wait", {duration(c.database_wait, false)}},
            {"database_session", {string(c.database_session, false)}},
            {"data_dir", {string(c.data_dir), true}},
            {"listen", {host_port(c.listen)}},
            {"operator_listen", {host_port(c.operator_listen)}},
            {"trusted_proxies", {array<std::string>(c.trusted_proxies,
                                                    [this](const json& n, const std::string& q, std::string& entry) {
                                                      string(entry)(n, q);
                                                      if (!entry.empty()) {
                                                        if (auto t = http::ProxyTrust::parse({entry}); !t) {
                                                          problem(q, t.error().message);
                                                        }
                                                      }
                                                    })}},
            {"public_url", {url(c.public_url, false)}},
            {"max_concurrent_syncs", {integer(c.max_concurrent_syncs, 1, 256)}},
            {"run_retention", {duration(c.run_retention, true)}},
            {"removed_source_retention", {duration(c.removed_source_retention, true)}},
            {"change_retention", {duration(c.change_retention, true)}},
            {"resource_dump_interval", {duration(c.resource_dump_interval, true)}},
            {"dump_package_size", {integer(c.dump_package_size, 1, 1000000)}},
            // Up to 16 GiB: what a Tributary accepts in one package.
            {"dump_package_bytes", {integer(c.dump_package_bytes, 1024, 16LL << 30)}},
            {"admin_token_file", {[this, &c](const json& v, const std::string& ptr) {
               std::string f;
               string(f)(v, ptr);
               if (!f.empty()) {
                 if (access(f.c_str(), R_OK) != 0) {
                   problem(ptr, "cannot read " + f);
                 }
                 c.admin_token = sync::SecretRef{f, ""};
               }
             }}},
            {"admin_token_env", {[this, &c](const json& v, const std::string& ptr) {
               std::string e;
               string(e)(v, ptr);
               if (!e.empty()) {
                 c.admin_token = sync::SecretRef{"", e};
               }
             }}},
            {"content", {[this, &c](const json& v, const std::string& ptr) { content(v, ptr, c.content); }}},
            {"archives", {boolean(c.archives)}},
            {"archive_retention", {duration(c.archive_retention, true)}},
            {"resource_list_archive_interval", {duration(c.resource_list_archive_interval, true)}},
            {"push", {[this, &c](const json& v, const std::string& ptr) { push(v, ptr, c.push); }}},
            {"oai", {[this, &c](const json& v, const std::string& ptr) { oai(v, ptr, c.oai); }}},
            {"node_name", {string(c.node_name)}},
            {"log", {[this, &c](const json& v, const std::string& ptr) {
               object(v, ptr,
                      {{"level", {one_of(c.log_level, {"debug", "info", "warn", "error"})}},
                       {"format", {one_of(c.log_format, {"text", "json"})}}});
             }}},
            {"change_list_part_size", {integer(c.change_list_part_size, 1, 50000)}},
            {"sets", {array<Config::NamedSet>(c.sets, [this](const json& v, const std::string& p, Config::NamedSet& out) {
               named_set(v, p, out);
             })}},
            {"sources", {array<sync::SourceConfig>(c.sources, [this](const json& s, const std::string& p,
                                                                     sync::SourceConfig& out) { source(s, p, out); })}}});
    across(j, c);
  }

private:
  std::string m_file;
  std::vector<std::string>& m_problems;
};

} // namespace

std::optional<std::chrono::seconds> parse_duration(const std::string& s, bool allow_zero) {
  if (s.empty()) {
    return std::nullopt;
  }
  long long total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    long long n = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      n = n * 10 + (s[i] - '0');
      if (n > 100000000) {
        return std::nullopt;
      }
      ++i;
    }
    if (i == start || i == s.size()) {
      return std::nullopt; // a number without a unit, or a unit without a number
    }
    switch (s[i]) {
    case 's': total += n; break;
    case 'm': total += n * 60; break;
    case 'h': total += n * 3600; break;
    case 'd': total += n * 86400; break;
    default: return std::nullopt;
    }
    ++i;
  }
  if (total < 0 || (total == 0 && !allow_zero)) {
    return std::nullopt;
  }
  return std::chrono::seconds(total);
}

const sync::SourceConfig* Config::find_source(const std::string& name) const {
  for (const auto& s : sources) {
    if (s.name == name) {
      return &s;
    }
  }
  return nullptr;
}

std::filesystem::path Config::serving_dir(const std::string& kind) const {
  std::string name = listen;
  for (char& c : name) {
    const bool plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.';
    c = plain ? c : '-';
  }
  return std::filesystem::path(data_dir) / kind / name;
}

ConfigLoad parse_config(const std::string& text, const std::string& file_name) {
  ConfigLoad out;
  json j;
  try {
    j = json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) { // parse_error, and out_of_range for a number past a double (found by fuzzing)
    out.problems.push_back(file_name + ": not valid JSON: " + e.what());
    return out;
  }
  Config c;
  Parser p(file_name, out.problems);
  p.config(j, c);
  if (c.public_url.empty()) {
    c.public_url = "http://" + c.listen;
  }
  if (out.problems.empty()) {
    if (j.contains("sources") && j["sources"].is_array()) {
      for (const auto& s : j["sources"]) {
        c.source_text[s["name"].get<std::string>()] = s.dump();
      }
    }
    out.config = std::move(c);
  }
  return out;
}

ConfigLoad load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ConfigLoad out;
    out.problems.push_back(path + ": cannot be read");
    return out;
  }
  std::ostringstream s;
  s << in.rdbuf();
  return parse_config(s.str(), path);
}

void apply_process_settings(const Config& config) {
  if (!config.node_name.empty()) {
    store::set_node_name(config.node_name);
  }
  store::PgBudget budget;
  budget.connections = config.database_connections;
  budget.wait = config.database_wait;
  budget.session_conninfo = config.database_session;
  store::set_pg_budget(budget);
}

} // namespace tributary::agg
