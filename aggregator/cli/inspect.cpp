#include "aggregator/cli/inspect.h"

#include "aggregator/cli/document_json.h"
#include "common/text.h"
#include "resourcesync/reader.h"

#include <filesystem>
#include <iomanip>
#include <ostream>

namespace tributary::agg {

namespace {

// Collects what the summary shows, and the entries themselves for --json.
class InspectHandler : public rs::DocumentHandler {
public:
  explicit InspectHandler(bool keep_entries) : m_keep(keep_entries) {}

  void on_entry(rs::Entry&& e, uint64_t) override {
    if (auto c = e.change()) {
      ++m_changes[static_cast<size_t>(*c)];
    }
    if (auto t = e.change_time()) {
      if (!m_first || *t < *m_first) {
        m_first = t;
      }
      if (!m_last || *t > *m_last) {
        m_last = t;
      }
    }
    if (m_keep) {
      m_entries.push_back(to_json(e));
    }
  }

  nlohmann::json m_entries = nlohmann::json::array();
  size_t m_changes[3] = {0, 0, 0};
  std::optional<rs::Timestamp> m_first;
  std::optional<rs::Timestamp> m_last;

private:
  bool m_keep;
};

// Sizes under 1 KiB read "766 bytes" in the summary.
std::string size_text(uint64_t n) { return n < 1024 ? std::to_string(n) + " bytes" : human_bytes(n); }

void print_summary(std::ostream& out, const std::string& url, const rs::ReadSummary& s,
                   const InspectHandler& h) {
  auto line = [&](const char* label, const std::string& value) {
    out << std::left << std::setw(12) << label << value << '\n';
  };
  std::string size = size_text(s.bytes);
  if (s.gzip) {
    size += ", gzip " + size_text(s.compressed_bytes);
  }
  line("document:", url + " (" + size + ")");
  if (s.header) {
    const auto& hd = *s.header;
    line("root:", std::string(rs::to_string(hd.root)));
    line("capability:", (hd.md && hd.md->capability ? *hd.md->capability : "(none)") +
                            (hd.plain_sitemap ? std::string(" (a plain Sitemap, read as a Resource List)") : ""));
    if (hd.md) {
      const std::pair<const char*, const std::optional<rs::Timestamp>*> times[] = {
          {"at:", &hd.md->at}, {"completed:", &hd.md->completed}, {"from:", &hd.md->from},
          {"until:", &hd.md->until}};
      for (const auto& [label, t] : times) {
        if (*t) {
          line(label, rs::format_w3c_datetime(**t));
        }
      }
    }
    std::string entries = std::to_string(s.entries);
    size_t changes = h.m_changes[0] + h.m_changes[1] + h.m_changes[2];
    if (changes > 0) {
      entries += " (created " + std::to_string(h.m_changes[0]) + ", updated " +
                 std::to_string(h.m_changes[1]) + ", deleted " + std::to_string(h.m_changes[2]) + ")";
    }
    line("entries:", entries);
    if (h.m_first) {
      line("changes:", rs::format_w3c_datetime(*h.m_first) + " .. " + rs::format_w3c_datetime(*h.m_last));
    }
    for (const auto& l : hd.links) {
      line("link:", l.rel + " -> " + l.href);
    }
  }
  if (s.dropped_values > 0) {
    line("dropped:", std::to_string(s.dropped_values) + " unusable value(s), each costing only itself");
  }
  if (s.rejected_entries > 0) {
    line("rejected:", std::to_string(s.rejected_entries) + " entr" + (s.rejected_entries == 1 ? "y" : "ies") +
                          " whose <loc> cannot be used");
  }
  line("warnings:", std::to_string(s.warnings));
  line("errors:", std::to_string(s.errors));
  line("valid:", s.valid() ? "yes" : "no");
  for (const auto& d : s.diagnostics) {
    out << (d.severity == rs::Severity::error ? "error   " : "warning ") << "line " << d.line << ": "
        << d.message << '\n';
  }
  if (s.suppressed_diagnostics > 0) {
    out << "(" << s.suppressed_diagnostics << " more diagnostics not shown)\n";
  }
}

void print_json(std::ostream& out, const rs::ReadSummary& s, InspectHandler& h) {
  nlohmann::json j = nlohmann::json::object();
  if (s.header) {
    const auto& hd = *s.header;
    j["root"] = std::string(rs::to_string(hd.root));
    j["capability"] = hd.md && hd.md->capability ? nlohmann::json(*hd.md->capability) : nlohmann::json();
    j["plain_sitemap"] = hd.plain_sitemap;
    j["md"] = hd.md ? to_json(*hd.md) : nlohmann::json::object();
    j["links"] = nlohmann::json::array();
    for (const auto& l : hd.links) {
      j["links"].push_back(to_json(l));
    }
  } else {
    j["root"] = nullptr;
    j["capability"] = nullptr;
    j["md"] = nlohmann::json::object();
    j["links"] = nlohmann::json::array();
  }
  j["entries"] = std::move(h.m_entries);
  j["warnings"] = nlohmann::json::array();
  j["errors"] = nlohmann::json::array();
  for (const auto& d : s.diagnostics) {
    j[d.severity == rs::Severity::error ? "errors" : "warnings"].push_back(to_json(d));
  }
  j["dropped_values"] = s.dropped_values;
  j["rejected_entries"] = s.rejected_entries;
  j["valid"] = s.valid();
  out << j.dump(2) << '\n';
}

} // namespace

std::string target_url(const std::string& target) {
  if (target.find("://") != std::string::npos) {
    return target;
  }
  std::error_code ec;
  auto abs = std::filesystem::absolute(target, ec);
  return "file://" + (ec ? target : abs.string());
}

int run_inspect(const InspectOptions& options, sync::Fetcher& fetcher, std::ostream& out,
                std::ostream& err) {
  const std::string url = target_url(options.target);
  InspectHandler handler(options.json);
  rs::ReaderOptions ro;
  ro.base_url = url; // a relative <loc> resolves against the document's own URL
  rs::Reader reader(handler, ro);
  auto fetched = fetcher.fetch(url, sync::FetchOptions{}, [&](const char* data, size_t n) {
    return reader.feed(data, n);
  });
  if (!fetched) {
    err << "tributary inspect: " << fetched.error().message << '\n';
    return k_exit_usage;
  }
  if (fetched->status < 200 || fetched->status > 299) {
    err << "tributary inspect: GET " << url << ": HTTP " << fetched->status << '\n';
    return k_exit_usage;
  }
  rs::ReadSummary summary = reader.finish();
  if (options.json) {
    print_json(out, summary, handler);
  } else {
    print_summary(out, fetched->final_url, summary, handler);
  }
  return summary.valid() ? k_exit_valid : k_exit_invalid;
}

} // namespace tributary::agg
