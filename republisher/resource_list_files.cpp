#include "republisher/resource_list_files.h"

#include "common/log.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

namespace tributary::pub {

namespace {

constexpr size_t k_page = 2000;             // resources read from the store at a time
constexpr size_t k_flush_bytes = 1 << 20;   // XML buffered before it goes to the file
constexpr uint64_t k_header_room = 64 * 1024; // the part's header, kept under the byte limit

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
  return b;
}

// One file being written with its gzip copy beside it.
class DocumentFiles {
public:
  DocumentFiles(std::filesystem::path path, int level) : m_path(std::move(path)) {
    m_gz_path = m_path.string() + ".gz";
    m_tmp = m_path.string() + ".tmp";
    m_gz_tmp = m_gz_path.string() + ".tmp";
    m_out.open(m_tmp, std::ios::binary | std::ios::trunc);
    m_gz.open(m_gz_tmp, std::ios::binary | std::ios::trunc);
    m_ok = m_out && m_gz && deflateInit2(&m_z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
    m_z_open = m_ok;
  }
  ~DocumentFiles() {
    if (m_z_open) {
      deflateEnd(&m_z);
    }
    if (!m_done) {
      std::error_code ec;
      std::filesystem::remove(m_tmp, ec);
      std::filesystem::remove(m_gz_tmp, ec);
    }
  }
  void write(std::string_view bytes) {
    if (!m_ok || bytes.empty()) {
      return;
    }
    m_out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    m_size += bytes.size();
    deflate_some(bytes, Z_NO_FLUSH);
  }
  // Closes both files under their names; false when any write failed.
  bool finish(CachedDocument& doc) {
    deflate_some({}, Z_FINISH);
    m_out.close();
    m_gz.close();
    if (!m_ok || !m_out || !m_gz) {
      return false;
    }
    std::error_code ec;
    std::filesystem::rename(m_tmp, m_path, ec);
    if (!ec) {
      std::filesystem::rename(m_gz_tmp, m_gz_path, ec);
    }
    if (ec) {
      return false;
    }
    m_done = true;
    doc.file = m_path;
    doc.gz_file = m_gz_path;
    doc.size = m_size;
    doc.gz_size = m_gz_size;
    // The ETag is the text's CRC-32, which the gzip stream computed already
    // (zlib keeps it in `adler` for a gzip wrapper): a second pass over every
    // byte was a sixth of the keeper's zlib time.
    doc.etag = "\"" + hex(m_z.adler) + "-" + hex(m_size) + "\"";
    doc.content_type = "application/xml";
    return true;
  }

private:
  void deflate_some(std::string_view in, int flush) {
    if (!m_ok) {
      return;
    }
    m_z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    m_z.avail_in = static_cast<uInt>(in.size());
    char buf[64 * 1024];
    int rc = Z_OK;
    do {
      m_z.next_out = reinterpret_cast<Bytef*>(buf);
      m_z.avail_out = sizeof buf;
      rc = deflate(&m_z, flush);
      const size_t n = sizeof buf - m_z.avail_out;
      m_gz.write(buf, static_cast<std::streamsize>(n));
      m_gz_size += n;
    } while (m_z.avail_out == 0 || (flush == Z_FINISH && rc == Z_OK));
    if (rc == Z_STREAM_ERROR) {
      m_ok = false;
    }
  }

  std::filesystem::path m_path, m_gz_path, m_tmp, m_gz_tmp;
  std::ofstream m_out, m_gz;
  z_stream m_z{};
  bool m_ok = false;
  bool m_z_open = false;
  bool m_done = false;
  size_t m_size = 0;
  size_t m_gz_size = 0;
};

} // namespace

// The entries of one part on their way: a body file without the header,
// which needs `completed` and whether there is an index, both known only at
// the end of the range.
struct ResourceListFiles::Rendered {
  std::filesystem::path body;
  std::ofstream out;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  Key last;
};

ResourceListFiles::ResourceListFiles(UrlScheme urls, PublishedSet set, Options options)
    : m_urls(std::move(urls)), m_set(std::move(set)), m_options(std::move(options)) {
  std::error_code ec;
  std::filesystem::create_directories(m_options.dir, ec);
}

ResourceListFiles::~ResourceListFiles() {
  for (const auto& p : m_parts) {
    retire(p.doc);
  }
  remove_retired(true);
}

uint64_t ResourceListFiles::entries() const {
  uint64_t n = 0;
  for (const auto& p : m_parts) {
    n += p.entries;
  }
  return n;
}

std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> ResourceListFiles::documents() const {
  std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> out;
  const std::string list = m_urls.path_of(m_urls.resource_list(m_set.name));
  if (m_parts.size() == 1) {
    out.emplace_back(list, m_parts.front().doc);
    return out;
  }
  if (m_index) {
    out.emplace_back(list, m_index);
  }
  for (const auto& p : m_parts) {
    out.emplace_back(m_urls.path_of(m_urls.resource_list_part(m_set.name, p.id)), p.doc);
  }
  return out;
}

size_t ResourceListFiles::part_of(const Key& k) const {
  auto it = std::partition_point(m_parts.begin(), m_parts.end(), [&](const Part& p) { return p.after < k; });
  const size_t j = static_cast<size_t>(it - m_parts.begin());
  return j == 0 ? 0 : j - 1;
}

Result<ResourceListFiles::Outcome> ResourceListFiles::update(store::StoreReader& reader, int64_t seq,
                                                             rs::Timestamp at) {
  remove_retired(false);
  if (m_parts.empty()) {
    auto r = render_all(reader, at);
    if (r) {
      m_seq = seq;
    }
    return r;
  }
  if (seq == m_seq) {
    return Outcome{};
  }
  // Which parts the change log names since the last update.
  std::map<int64_t, size_t> feed_index;
  for (size_t i = 0; i < m_set.feeds.size(); ++i) {
    feed_index[m_set.feeds[i]] = i;
  }
  std::map<size_t, uint64_t> dirty; // part -> changes in its range
  for (int64_t after = m_seq;;) {
    auto keys = reader.changed_keys(m_set.feeds, after, seq, m_options.change_page);
    if (!keys) {
      return tl::unexpected(keys.error());
    }
    for (const auto& k : *keys) {
      if (auto f = feed_index.find(k.feed_id); f != feed_index.end()) {
        ++dirty[part_of(Key{f->second, k.uri})];
      }
    }
    if (keys->size() < m_options.change_page || dirty.size() == m_parts.size()) {
      break;
    }
    after = keys->back().seq;
  }
  Outcome out;
  if (dirty.size() == m_parts.size() && m_parts.size() > 1) {
    auto r = render_all(reader, at); // everything moved: partition again, evenly
    if (r) {
      m_seq = seq;
    }
    return r;
  }
  // From the last part back, so that splitting or dropping one leaves the
  // indexes of those before it as they were.
  std::vector<Part> parts = m_parts;
  std::vector<std::shared_ptr<const CachedDocument>> replaced;
  // On failure the parts rendered so far go (the list stays as it was).
  auto abandon = [&](const Error& e) {
    for (const auto& p : parts) {
      if (std::none_of(m_parts.begin(), m_parts.end(), [&](const Part& q) { return q.doc == p.doc; })) {
        retire(p.doc);
      }
    }
    return tl::unexpected(e);
  };
  for (auto it = dirty.rbegin(); it != dirty.rend(); ++it) {
    const size_t i = it->first;
    const Key after = parts[i].after;
    const Key* until = i + 1 < parts.size() ? &parts[i + 1].after : nullptr;
    uint64_t entries = 0;
    auto fresh = render_range(reader, after, until, parts[i].entries + it->second, parts[i].id, parts.size() > 1,
                              entries);
    if (!fresh) {
      return abandon(fresh.error());
    }
    out.entries_rendered += entries;
    out.parts_rendered += fresh->size();
    replaced.push_back(parts[i].doc);
    if (entries == 0 && parts.size() > 1) {
      // Nothing left in its range: the neighbour takes the range over (it
      // holds nothing there, so it needs no new rendering).
      if (i == 0) {
        parts[1].after = Key{};
      }
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i));
      replaced.push_back((*fresh)[0].doc);
      continue;
    }
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i));
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(i), fresh->begin(), fresh->end());
  }
  // A list that went from one part to several (or back) links its parts to
  // the index (or no more): those that say otherwise are rendered again.
  const bool several = parts.size() > 1;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].indexed == several) {
      continue;
    }
    uint64_t entries = 0;
    const Key* until = i + 1 < parts.size() ? &parts[i + 1].after : nullptr;
    auto fresh = render_range(reader, parts[i].after, until, parts[i].entries, parts[i].id, several, entries);
    if (!fresh) {
      return abandon(fresh.error());
    }
    out.entries_rendered += entries;
    out.parts_rendered += fresh->size();
    replaced.push_back(parts[i].doc);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i));
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(i), fresh->begin(), fresh->end());
    i += fresh->size() - 1;
  }
  for (const auto& d : replaced) {
    retire(d);
  }
  m_parts = std::move(parts);
  m_seq = seq;
  render_index(at);
  return out;
}

Result<ResourceListFiles::Outcome> ResourceListFiles::render_all(store::StoreReader& reader, rs::Timestamp at) {
  uint64_t entries = 0;
  m_next_id = 1;
  auto fresh = render_range(reader, Key{}, nullptr, 0, m_next_id++, false, entries);
  if (!fresh) {
    return tl::unexpected(fresh.error());
  }
  for (const auto& p : m_parts) {
    retire(p.doc);
  }
  m_parts = std::move(*fresh);
  render_index(at);
  Outcome out;
  out.full = true;
  out.parts_rendered = m_parts.size();
  out.entries_rendered = entries;
  return out;
}

uint64_t ResourceListFiles::entries_per_piece(uint64_t estimate) const {
  const uint64_t max_entries = std::max<uint64_t>(1, std::min(m_options.limits.max_entries, rs::k_max_entries));
  const uint64_t target = std::max<uint64_t>(1, std::min(m_options.part_entries, max_entries));
  // A range rendered again keeps one part unless it may hold more than
  // twice `target` (or the limit); then it is cut into even pieces of about
  // `target`. A whole list (estimate 0) is cut every `target`. The estimate
  // may fall short (the change log is read only until every part is known
  // to be touched), so no piece ever passes twice `target` either: the
  // load bench met a single part of 50,000 entries (12 MB) that way.
  const uint64_t split_at = std::min(max_entries, 2 * target);
  if (estimate == 0) {
    return target;
  }
  if (estimate > split_at) {
    const uint64_t pieces = (estimate + target - 1) / target;
    return std::min(max_entries, (estimate + pieces - 1) / pieces);
  }
  return split_at;
}

std::shared_ptr<CachedDocument> ResourceListFiles::write_part(const Rendered& piece, const Part& part) {
  rs::DocumentHeader h;
  h.md = rs::Metadata{};
  h.md->capability = "resourcelist";
  h.md->at = part.at;
  h.md->completed = part.completed;
  h.links.push_back(link("up", m_urls.capability_list(m_set.name)));
  if (part.indexed) {
    h.links.push_back(link("index", m_urls.resource_list(m_set.name)));
  }
  std::string head;
  rs::DocumentWriter w(head);
  w.begin(h);
  const size_t head_size = head.size();
  w.end();
  const std::string foot = head.substr(head_size);
  head.resize(head_size);
  DocumentFiles files(m_options.dir / (std::to_string(part.id) + "-" + std::to_string(++m_generation) + ".xml"),
                      m_options.gzip_level);
  files.write(head);
  {
    std::ifstream in(piece.body, std::ios::binary);
    std::string chunk(k_flush_bytes, '\0');
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      files.write(std::string_view(chunk.data(), static_cast<size_t>(in.gcount())));
    }
  }
  files.write(foot);
  auto doc = std::make_shared<CachedDocument>();
  if (!files.finish(*doc)) {
    return nullptr;
  }
  return doc;
}

Result<std::vector<ResourceListFiles::Part>>
ResourceListFiles::render_range(store::StoreReader& reader, const Key& after, const Key* until, uint64_t estimate,
                                uint64_t first_id, bool others, uint64_t& entries) {
  const rs::Timestamp started = now();
  const uint64_t per_piece = entries_per_piece(estimate);
  const uint64_t byte_cap = m_options.limits.max_bytes > 2 * k_header_room ? m_options.limits.max_bytes - k_header_room
                                                                             : m_options.limits.max_bytes / 2;
  std::vector<std::unique_ptr<Rendered>> pieces;
  auto open_piece = [&]() -> bool {
    auto r = std::make_unique<Rendered>();
    r->body = m_options.dir / ("body-" + std::to_string(first_id) + "-" + std::to_string(++m_generation) + ".tmp");
    r->out.open(r->body, std::ios::binary | std::ios::trunc);
    const bool ok = static_cast<bool>(r->out);
    pieces.push_back(std::move(r));
    return ok;
  };
  auto cleanup = [&]() {
    for (auto& p : pieces) {
      p->out.close();
      std::error_code ec;
      std::filesystem::remove(p->body, ec);
    }
  };
  auto io_error = [&](const std::string& what) {
    cleanup();
    return make_error(ErrorKind::io, "Resource List of set '" + m_set.name + "': " + what);
  };
  if (!open_piece()) {
    return io_error("cannot write in " + m_options.dir.string());
  }
  std::string buf;
  auto flush = [&]() {
    pieces.back()->out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.clear();
  };
  const auto held = held_in(reader, m_set);
  entries = 0;
  bool done = false;
  for (size_t fi = after.feed; fi < m_set.feeds.size() && !done; ++fi) {
    if (until && fi > until->feed) {
      break;
    }
    std::string cursor = fi == after.feed ? after.uri : std::string();
    for (;;) {
      auto page = reader.live_resources(m_set.feeds[fi], cursor, k_page);
      if (!page) {
        cleanup();
        return tl::unexpected(page.error());
      }
      for (const auto& r : *page) {
        Key k{fi, r.uri};
        if (until && *until < k) {
          done = true;
          break;
        }
        const size_t before = buf.size();
        rs::append_entry(buf, resource_entry(m_urls, m_set.name, r, held), rs::RootElement::urlset);
        const uint64_t size = buf.size() - before;
        Rendered* cur = pieces.back().get();
        if (cur->entries > 0 && (cur->entries >= per_piece || cur->bytes + size > byte_cap)) {
          std::string moved = buf.substr(before);
          buf.resize(before);
          flush();
          cur->out.close();
          if (!open_piece()) {
            return io_error("cannot write in " + m_options.dir.string());
          }
          buf = std::move(moved);
          cur = pieces.back().get();
        }
        ++cur->entries;
        cur->bytes += size;
        cur->last = std::move(k);
        ++entries;
        if (buf.size() >= k_flush_bytes) {
          flush();
        }
      }
      if (done || page->size() < k_page) {
        break;
      }
      cursor = page->back().uri;
    }
  }
  flush();
  pieces.back()->out.close();
  for (const auto& p : pieces) {
    if (!p->out) {
      return io_error("cannot write " + p->body.string());
    }
  }
  // Each piece gets its header (now that `completed` and the index are
  // known) and its gzip copy.
  const rs::Timestamp completed = std::max(started, now());
  const bool indexed = others || pieces.size() > 1;
  std::vector<Part> out;
  for (size_t n = 0; n < pieces.size(); ++n) {
    Part part;
    part.id = n == 0 ? first_id : m_next_id++;
    part.after = n == 0 ? after : pieces[n - 1]->last;
    part.entries = pieces[n]->entries;
    part.at = started;
    part.completed = completed;
    part.indexed = indexed;
    auto doc = write_part(*pieces[n], part);
    if (!doc) {
      for (const auto& p : out) {
        retire(p.doc);
      }
      return io_error("cannot write a part in " + m_options.dir.string());
    }
    part.doc = std::move(doc);
    out.push_back(std::move(part));
  }
  cleanup();
  return out;
}

void ResourceListFiles::render_index(rs::Timestamp at) {
  if (m_parts.size() < 2) {
    m_index.reset();
    return;
  }
  rs::Document d = capability_document("resourcelist");
  d.header.root = rs::RootElement::sitemapindex;
  d.header.md->at = at;
  d.header.md->completed = std::max(at, now());
  d.header.links.push_back(link("up", m_urls.capability_list(m_set.name)));
  for (const auto& p : m_parts) {
    rs::Entry e;
    e.loc = m_urls.resource_list_part(m_set.name, p.id);
    e.md = rs::Metadata{};
    e.md->at = p.at;
    e.md->completed = p.completed;
    d.entries.push_back(std::move(e));
  }
  m_index = cached(rs::write_document(d), "application/xml");
}

void ResourceListFiles::retire(const std::shared_ptr<const CachedDocument>& doc) {
  if (doc && !doc->file.empty()) {
    m_retired.emplace_back(std::chrono::steady_clock::now(), doc);
  }
}

void ResourceListFiles::remove_retired(bool all) {
  const auto cutoff = std::chrono::steady_clock::now() - std::chrono::seconds(60);
  auto keep = std::remove_if(m_retired.begin(), m_retired.end(), [&](const auto& r) {
    if (!all && r.first > cutoff) {
      return false;
    }
    std::error_code ec;
    std::filesystem::remove(r.second->file, ec);
    std::filesystem::remove(r.second->gz_file, ec);
    return true;
  });
  m_retired.erase(keep, m_retired.end());
}

} // namespace tributary::pub
