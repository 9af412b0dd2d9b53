#include "sync_engine/spool.h"

#include "common/temp_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tributary::sync {

namespace {

struct NullHandler : rs::DocumentHandler {
  void on_entry(rs::Entry&&, uint64_t) override {}
};

// Ends a read once the header is known (it comes before the first entry).
struct HeaderRead {};
struct HeaderHandler : rs::DocumentHandler {
  std::optional<rs::DocumentHeader>& out;
  explicit HeaderHandler(std::optional<rs::DocumentHeader>& o) : out(o) {}
  void on_header(const rs::DocumentHeader& h) override {
    out = h;
    throw HeaderRead{};
  }
  void on_entry(rs::Entry&&, uint64_t) override {}
};

} // namespace

bool SpooledDocument::read_early_header() {
  HeaderHandler h(m_early);
  try {
    (void)read(h);
  } catch (const HeaderRead&) {
  }
  return m_early.has_value();
}

const rs::ReadSummary& SpooledDocument::summary() const {
  (void)validated();
  return m_summary;
}

Result<void> SpooledDocument::validated() const {
  if (m_pass.valid()) {
    try {
      auto s = m_pass.get();
      if (s) {
        m_summary = std::move(*s);
      } else {
        m_pass_error = s.error();
      }
    } catch (const std::exception& e) {
      m_pass_error = make_error(ErrorKind::io, "GET " + m_url + ": validating it failed: " + e.what()).value();
    }
    if (!m_pass_error && !m_summary.header) {
      m_pass_error = make_error(ErrorKind::invalid_document, "GET " + m_url + ": not a ResourceSync document: " +
                                                                 error_text())
                         .value();
    }
    if (m_pass_error && !m_summary.header && m_early) {
      m_summary.header = m_early; // header() stays usable
    }
  }
  if (m_pass_error) {
    return tl::unexpected(*m_pass_error);
  }
  return {};
}

SpooledDocument::~SpooledDocument() {
  if (m_pass.valid()) {
    m_pass.wait(); // it reads the file
  }
  std::error_code ec;
  if (!m_path.empty()) {
    std::filesystem::remove(m_path, ec);
  }
}

std::string SpooledDocument::error_text(size_t max) const {
  std::string out;
  size_t n = 0;
  for (const auto& d : m_summary.diagnostics) {
    if (d.severity != rs::Severity::error) {
      continue;
    }
    if (n++ == max) {
      out += "; ...";
      break;
    }
    out += (out.empty() ? "" : "; ") + std::string("line ") + std::to_string(d.line) + ": " + d.message;
  }
  return out;
}

Result<rs::ReadSummary> SpooledDocument::read(rs::DocumentHandler& handler) const {
  std::ifstream in(m_path, std::ios::binary);
  if (!in) {
    return make_error(ErrorKind::io, "cannot reopen spooled " + m_path.string());
  }
  return rs::read_document(in, handler, m_options);
}

Result<std::unique_ptr<SpooledDocument>> spool_document(Fetcher& fetcher, const std::string& url,
                                                        const FetchOptions& options,
                                                        const std::filesystem::path& tmp_dir, bool defer_validation) {
  std::error_code ec;
  std::filesystem::create_directories(tmp_dir, ec);
  auto doc = std::unique_ptr<SpooledDocument>(new SpooledDocument());
  doc->m_url = url;
  doc->m_path = tmp_dir / temp_file_name("doc", ".xml");
  std::ofstream out;
  // The body arrives a few kilobytes at a time, and the stream writes any
  // piece of 1 KiB or more straight through: a system call every 4 KiB of
  // a Resource List (476 for a 2 MB one) before its first entry is used.
  // Pieces are gathered here and written 256 KiB at a time.
  constexpr size_t k_gather = 256 * 1024;
  std::string gathered;
  auto open = [&] {
    gathered.clear();
    out.close();
    out.open(doc->m_path, std::ios::binary | std::ios::trunc);
    return static_cast<bool>(out);
  };
  if (!open()) {
    return make_error(ErrorKind::io, "cannot create " + doc->m_path.string());
  }
  FetchOptions o = options;
  o.restart = open;
  int write_errno = 0;
  auto write_gathered = [&] {
    errno = 0;
    out.write(gathered.data(), static_cast<std::streamsize>(gathered.size()));
    gathered.clear();
    if (!out) {
      write_errno = errno ? errno : EIO;
    }
    return static_cast<bool>(out);
  };
  auto r = fetcher.fetch(url, o, [&](const char* d, size_t n) {
    gathered.append(d, n);
    return gathered.size() < k_gather || write_gathered();
  });
  if (out && !gathered.empty()) {
    write_gathered();
  }
  out.close();
  if (write_errno != 0) {
    // Our disk, not the Source: say so (a full data_dir read as "aborted").
    return make_error(ErrorKind::io, "GET " + url + ": cannot write it to " + doc->m_path.string() + ": " +
                                         std::strerror(write_errno));
  }
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (r->status == 304) {
    doc->m_response = *r;
    return doc;
  }
  if (r->status < 200 || r->status > 299) {
    return tl::unexpected(status_error(url, r->status));
  }
  doc->m_response = *r;
  // Both passes read it alike: relative references against the URL it
  // came from (after redirects), undated changes at one read time.
  doc->m_options.base_url = r->final_url.empty() ? url : r->final_url;
  doc->m_options.read_time = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  if (defer_validation && doc->read_early_header()) {
    doc->m_deferred = true;
    const SpooledDocument* d = doc.get();
    doc->m_pass = std::async(std::launch::async, [d] {
      NullHandler null;
      return d->read(null);
    });
    return doc;
  }
  NullHandler null;
  auto s = doc->read(null);
  if (!s) {
    return tl::unexpected(s.error());
  }
  doc->m_summary = std::move(*s);
  if (!doc->m_summary.header) {
    return make_error(ErrorKind::invalid_document, "GET " + url + ": not a ResourceSync document: " + doc->error_text());
  }
  return doc;
}

} // namespace tributary::sync
