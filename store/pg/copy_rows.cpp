#include "store/pg/copy_rows.h"

#include "store/pg/pg_store_internal.h"

// COPY rows as PgStore writes them (see copy_rows.h).
namespace tributary::store::pg_detail {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
CopyRows::CopyRows(pqxx::transaction_base& tx, const std::string& table, const std::vector<std::string>& columns)
    : m_writer(tx, table, columns.begin(), columns.end()) {}
#pragma GCC diagnostic pop

void CopyRows::end_row() {
  m_text.end_row();
  if (m_text.size() >= 64 * 1024) {
    flush();
  }
}

void CopyRows::complete() {
  flush();
  m_writer.complete();
}

void CopyRows::flush() {
  if (m_text.size() == 0) {
    return;
  }
  // The last row's newline stays: tablewriter drops one at the end and
  // the connection adds one.
  m_writer.write_raw_line(m_text.text());
  m_text.clear();
}

namespace {

const std::string* hash_text(const std::vector<rs::HashValue>& hashes, rs::HashAlgorithm a) {
  for (const auto& h : hashes) {
    if (h.known() == a) {
      return &h.hex;
    }
  }
  return nullptr;
}

void put_text(CopyText& t, const std::string* v) {
  if (v) {
    t.field(*v);
  } else {
    t.null();
  }
}

} // namespace

void put_time(CopyText& t, const std::optional<Timestamp>& v) {
  if (!v) {
    t.null();
    return;
  }
  // Formatted into one string a thread reuses: a new string for each time
  // was 5 of a first baseline's 96 allocations a resource (heaptrack).
  thread_local std::string text;
  text.clear();
  rs::append_w3c_datetime(text, *v);
  t.field(text);
}

void put_content(CopyText& t, const ResourceRecord& r) {
  if (r.length) {
    t.field(static_cast<long long>(*r.length));
  } else {
    t.null();
  }
  put_text(t, hash_text(r.hashes, rs::HashAlgorithm::md5));
  put_text(t, hash_text(r.hashes, rs::HashAlgorithm::sha1));
  put_text(t, hash_text(r.hashes, rs::HashAlgorithm::sha256));
  t.field(r.type);
  t.field(r.encoding);
  if (r.links.empty()) {
    t.field("[]");
  } else {
    t.field(links_to_json(r.links));
  }
  t.field(r.blob_sha256);
}

void put_resource(CopyText& t, const ResourceRecord& r) {
  t.field(r.uri);
  t.field(r.state == ResourceState::live ? "live" : "deleted");
  put_time(t, r.lastmod);
  put_time(t, r.change_datetime);
  put_content(t, r);
  put_time(t, r.fetched_at);
  t.field(r.fetched_from);
}

} // namespace tributary::store::pg_detail
