#include "resourcesync/writer.h"

#include "resourcesync/fields.h"
#include "resourcesync/xml_chars.h"

#include <algorithm>
#include <array>
#include <libdeflate.h>

#include <memory>
#include <new>

#include <charconv>
#include <stdexcept>

namespace tributary::rs {

namespace {

// The bytes that may need escaping: '&', '<', '>', '"' and the controls
// (the caller decides). A URL, a hash or a datetime holds none, and the
// whole value is then appended at once.
constexpr xml::chars::StopBytes k_escape("&<>\"");

size_t next_to_escape(std::string_view s, size_t i) {
  return static_cast<size_t>(xml::chars::find_stop(s.data() + i, s.data() + s.size(), k_escape) - s.data());
}

void escape(std::string& out, std::string_view s, bool attribute) {
  size_t start = 0;
  for (size_t i = next_to_escape(s, 0); i < s.size(); i = next_to_escape(s, i + 1)) {
    const char* rep = nullptr;
    switch (s[i]) {
    case '&':
      rep = "&amp;";
      break;
    case '<':
      rep = "&lt;";
      break;
    case '>':
      rep = "&gt;";
      break;
    case '"':
      rep = attribute ? "&quot;" : nullptr;
      break;
    case '\n':
      rep = attribute ? "&#10;" : nullptr;
      break;
    case '\r':
      rep = "&#13;";
      break;
    case '\t':
      rep = attribute ? "&#9;" : nullptr;
      break;
    default:
      // Control characters cannot appear in XML 1.0 at all, not even as
      // character references: drop them rather than write a broken document.
      if (static_cast<unsigned char>(s[i]) < 0x20) {
        rep = "";
      }
      break;
    }
    if (rep) {
      out.append(s.data() + start, i - start);
      out.append(rep);
      start = i + 1;
    }
  }
  out.append(s.data() + start, s.size() - start);
}

} // namespace

void append_xml_escaped(std::string& out, std::string_view s, bool attribute) { escape(out, s, attribute); }

namespace {

void attr(std::string& out, std::string_view name, std::string_view value) {
  out.push_back(' ');
  out.append(name);
  out.append("=\"");
  escape(out, value, true);
  out.push_back('"');
}

void attr_time(std::string& out, std::string_view name, const std::optional<Timestamp>& t) {
  if (t) {
    out.push_back(' ');
    out.append(name);
    out.append("=\"");
    append_w3c_datetime(out, *t);
    out.push_back('"');
  }
}

void attr_uint(std::string& out, std::string_view name, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  attr(out, name, std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

void attr_opt(std::string& out, std::string_view name, const std::optional<std::string>& v) {
  if (v) {
    attr(out, name, *v);
  }
}

// One attribute of the field tables (resourcesync/fields.h), as the XML
// writes it: absent values and empty hash lists are left out; rel and href
// are always written.
struct AttrWriter {
  std::string& out;
  void operator()(std::string_view name, const std::string& v) const { attr(out, name, v); }
  void operator()(std::string_view name, const std::optional<std::string>& v) const { attr_opt(out, name, v); }
  void operator()(std::string_view name, const std::optional<Timestamp>& v) const { attr_time(out, name, v); }
  void operator()(std::string_view name, const std::optional<Change>& v) const {
    if (v) {
      attr(out, name, to_string(*v));
    }
  }
  void operator()(std::string_view name, const std::vector<HashValue>& v) const {
    if (!v.empty()) {
      attr(out, name, format_hash_list(v));
    }
  }
  void operator()(std::string_view name, const std::optional<uint64_t>& v) const {
    if (v) {
      attr_uint(out, name, *v);
    }
  }
  void operator()(std::string_view name, const std::optional<uint32_t>& v) const {
    if (v) {
      attr_uint(out, name, *v);
    }
  }
};

using Declared = std::vector<std::pair<std::string, std::string>>;

// Finds or invents a prefix for `ns`. Namespaces not declared on the root are
// declared on the element being written (`local`).
std::string prefix_for(const std::string& ns, const std::string& wanted, const Declared& root,
                       Declared& local) {
  for (const auto& [p, u] : root) {
    if (u == ns) {
      return p;
    }
  }
  for (const auto& [p, u] : local) {
    if (u == ns) {
      return p;
    }
  }
  std::string p = wanted;
  auto taken = [&](const std::string& candidate) {
    if (candidate.empty() || candidate == "rs" || candidate == "xml" || candidate == "xmlns") {
      return true;
    }
    for (const auto& [q, u] : root) {
      if (q == candidate) {
        return true;
      }
    }
    for (const auto& [q, u] : local) {
      if (q == candidate) {
        return true;
      }
    }
    return false;
  };
  for (int i = 1; taken(p); ++i) {
    p = "x" + std::to_string(i);
  }
  local.emplace_back(p, ns);
  return p;
}

// The namespace declarations a document read carried, as the root element
// we write may repeat them: never the default namespace or `rs` (we bind
// both ourselves: a read document may bind `rs` to another namespace, and
// a second xmlns:rs made what we wrote not XML at all, found by the fuzzer),
// nor a prefix XML reserves, nor one prefix twice. An extension element of
// a namespace dropped here is declared where it is written.
Declared root_namespaces(const Declared& read) {
  Declared out;
  for (const auto& declared : read) {
    const std::string& p = declared.first; // not a structured binding: clang 14 cannot capture one
    const bool reserved = p.empty() || p == "rs" || p.rfind("xml", 0) == 0 || p.rfind("XML", 0) == 0;
    const bool twice = std::any_of(out.begin(), out.end(), [&](const auto& d) { return d.first == p; });
    if (!reserved && !twice) {
      out.push_back(declared);
    }
  }
  return out;
}

void ext_attrs(std::string& out, const std::vector<ExtensionAttribute>& attrs, const Declared& root,
               Declared& local) {
  for (const auto& a : attrs) {
    if (a.ns.empty()) {
      attr(out, a.name, a.value);
    } else if (a.ns == "http://www.w3.org/XML/1998/namespace") {
      attr(out, "xml:" + a.name, a.value);
    } else {
      attr(out, prefix_for(a.ns, a.prefix, root, local) + ":" + a.name, a.value);
    }
  }
}

void declare(std::string& out, const Declared& local) {
  for (const auto& [p, u] : local) {
    attr(out, "xmlns:" + p, u);
  }
}

void write_node(std::string& out, const XmlNode& n, const Declared& root) {
  Declared local;
  std::string qname;
  if (n.ns.empty()) {
    qname = n.name;
  } else if (n.ns == k_sitemap_ns) {
    qname = n.name;
  } else if (n.ns == k_rs_ns) {
    qname = "rs:" + n.name;
  } else {
    qname = prefix_for(n.ns, n.prefix, root, local) + ":" + n.name;
  }
  std::string attrs;
  ext_attrs(attrs, n.attributes, root, local);
  out.push_back('<');
  out.append(qname);
  if (n.ns.empty()) {
    // An element in no namespace inside a default-namespaced document.
    out.append(" xmlns=\"\"");
  }
  declare(out, local);
  out.append(attrs);
  if (n.text.empty() && n.children.empty()) {
    out.append("/>");
    return;
  }
  out.push_back('>');
  escape(out, n.text, false);
  Declared inner = root;
  inner.insert(inner.end(), local.begin(), local.end());
  for (const auto& c : n.children) {
    write_node(out, c, inner);
  }
  out.append("</");
  out.append(qname);
  out.push_back('>');
}

void write_md(std::string& out, const Metadata& md, const Declared& root) {
  Declared local;
  std::string attrs;
  each_md_field(md, AttrWriter{attrs});
  ext_attrs(attrs, md.extensions, root, local);
  out.append("<rs:md");
  declare(out, local);
  out.append(attrs);
  out.append("/>");
}

void write_ln(std::string& out, const Link& l, const Declared& root) {
  Declared local;
  std::string attrs;
  each_ln_field(l, AttrWriter{attrs});
  ext_attrs(attrs, l.extensions, root, local);
  out.append("<rs:ln");
  declare(out, local);
  out.append(attrs);
  out.append("/>");
}

void write_root_open(std::string& out, const DocumentHeader& h) {
  out.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<");
  out.append(to_string(h.root));
  out.append(" xmlns=\"");
  out.append(k_sitemap_ns);
  out.append("\" xmlns:rs=\"");
  out.append(k_rs_ns);
  out.push_back('"');
  for (const auto& [p, u] : h.namespaces) {
    attr(out, p.empty() ? std::string("xmlns") : "xmlns:" + p, u);
  }
  out.append(">\n");
  if (h.md) {
    write_md(out, *h.md, h.namespaces);
    out.push_back('\n');
  }
  for (const auto& l : h.links) {
    write_ln(out, l, h.namespaces);
    out.push_back('\n');
  }
  for (const auto& n : h.extensions) {
    write_node(out, n, h.namespaces);
    out.push_back('\n');
  }
}

void write_root_close(std::string& out, RootElement root) {
  out.append("</");
  out.append(to_string(root));
  out.append(">\n");
}

} // namespace

void append_entry(std::string& out, const Entry& e, RootElement root, const Declared& declared) {
  const char* tag = root == RootElement::urlset ? "url" : "sitemap";
  out.push_back('<');
  out.append(tag);
  out.append("><loc>");
  escape(out, e.loc, false);
  out.append("</loc>");
  if (e.lastmod) {
    out.append("<lastmod>");
    if (e.lastmod_date_only && *e.lastmod == std::chrono::floor<std::chrono::days>(*e.lastmod)) {
      // As the Source wrote it: a time of day would claim a precision it
      // never gave.
      out.append(format_w3c_datetime(*e.lastmod).substr(0, 10));
    } else {
      append_w3c_datetime(out, *e.lastmod);
    }
    out.append("</lastmod>");
  }
  if (e.changefreq) {
    out.append("<changefreq>");
    escape(out, *e.changefreq, false);
    out.append("</changefreq>");
  }
  if (e.priority) {
    out.append("<priority>");
    escape(out, *e.priority, false);
    out.append("</priority>");
  }
  if (e.md) {
    write_md(out, *e.md, declared);
  }
  for (const auto& l : e.links) {
    write_ln(out, l, declared);
  }
  for (const auto& n : e.extensions) {
    write_node(out, n, declared);
  }
  out.append("</");
  out.append(tag);
  out.append(">\n");
}

void DocumentWriter::begin(const DocumentHeader& header) {
  m_header = header;
  m_header.namespaces = root_namespaces(header.namespaces);
  write_root_open(m_out, m_header);
}

void DocumentWriter::entry(const Entry& e) { append_entry(m_out, e, m_header.root, m_header.namespaces); }

void DocumentWriter::end() { write_root_close(m_out, m_header.root); }

std::string write_document(const Document& document) {
  std::string out;
  out.reserve(256 + document.entries.size() * 200);
  DocumentWriter w(out);
  w.begin(document.header);
  for (const auto& e : document.entries) {
    w.entry(e);
  }
  w.end();
  return out;
}

// ---- PartitionedWriter ----------------------------------------------------

PartitionedWriter::PartitionedWriter(DocumentHeader header, std::string index_url, PartUrl part_url,
                                     Sink sink, PartitionLimits limits)
    : m_header(std::move(header)), m_index_url(std::move(index_url)), m_part_url(std::move(part_url)),
      m_sink(std::move(sink)), m_limits(limits) {
  m_header.root = RootElement::urlset;
  m_header.namespaces = root_namespaces(m_header.namespaces);
  auto cap = m_header.capability();
  m_change = cap && is_change_capability(*cap);
  m_part_from = m_header.md ? m_header.md->from : std::nullopt;
}

std::string PartitionedWriter::part_header_xml(bool with_index, std::optional<Timestamp> from,
                                               std::optional<Timestamp> until) const {
  DocumentHeader h = m_header;
  if (m_change && h.md) {
    h.md->from = from;
    h.md->until = until;
  }
  if (with_index) {
    Link index;
    index.rel = "index";
    index.href = m_index_url;
    h.links.push_back(std::move(index));
  }
  std::string out;
  write_root_open(out, h);
  return out;
}

void PartitionedWriter::add(const Entry& e) {
  m_scratch.clear();
  append_entry(m_scratch, e, RootElement::urlset, m_header.namespaces);
  // Room for the header with an index link and the closing tag.
  const uint64_t overhead = 1024 + m_index_url.size() + 64 * m_header.links.size();
  if (m_body_entries > 0 && (m_body_entries + 1 > m_limits.max_entries ||
                             m_body.size() + m_scratch.size() + overhead > m_limits.max_bytes)) {
    flush(false);
  }
  m_body.append(m_scratch);
  ++m_body_entries;
  if (m_change) {
    if (auto t = e.change_time()) {
      m_last_time = t;
    }
  }
}

void PartitionedWriter::flush(bool last) {
  ++m_parts;
  std::optional<Timestamp> until = last ? (m_header.md ? m_header.md->until : std::nullopt)
                                        : m_last_time;
  if (!last && !until) {
    until = m_part_from;
  }
  if (last && m_parts == 1) {
    // Everything fits: a plain document at the index URL.
    std::string xml = part_header_xml(false, m_part_from, until);
    xml.append(m_body);
    write_root_close(xml, RootElement::urlset);
    m_sink(WrittenPart{m_index_url, std::move(xml), m_body_entries, false});
  } else {
    PartInfo info{m_part_url(m_parts), m_part_from, until};
    std::string xml = part_header_xml(true, info.from, info.until);
    xml.append(m_body);
    write_root_close(xml, RootElement::urlset);
    m_sink(WrittenPart{info.url, std::move(xml), m_body_entries, false});
    m_written.push_back(std::move(info));
  }
  m_body.clear();
  m_body_entries = 0;
  if (m_change) {
    m_part_from = until;
  }
}

size_t PartitionedWriter::finish() {
  flush(true);
  if (m_parts == 1) {
    return 1;
  }
  if (m_written.size() > k_max_entries) {
    throw std::length_error("a list of more than " + std::to_string(k_max_entries) +
                            " parts needs an index of indexes, which ResourceSync does not define");
  }
  DocumentHeader ih = m_header;
  ih.root = RootElement::sitemapindex;
  std::string xml;
  write_root_open(xml, ih);
  for (const auto& p : m_written) {
    Entry e;
    e.loc = p.url;
    Metadata md;
    if (m_change) {
      md.from = p.from;
      md.until = p.until;
    } else if (m_header.md) {
      md.at = m_header.md->at;
      md.completed = m_header.md->completed;
    }
    if (md != Metadata{}) {
      e.md = std::move(md);
    }
    append_entry(xml, e, RootElement::sitemapindex, ih.namespaces);
  }
  write_root_close(xml, RootElement::sitemapindex);
  m_sink(WrittenPart{m_index_url, std::move(xml), m_written.size(), true});
  return m_parts;
}

namespace {

// libdeflate's compressor for `level` (its levels 0..9 mean what zlib's
// do; -1 and others: 6, zlib's default). A compressor is hundreds of KiB
// set up: made once a thread and level (made for each call, a 1 KB
// document took twice zlib's time; kept, it takes two thirds of it).
libdeflate_compressor* kept_compressor(int level) {
  if (level < 0 || level > 9) {
    level = 6; // zlib's default
  }
  struct Free {
    void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
  };
  thread_local std::array<std::unique_ptr<libdeflate_compressor, Free>, 10> kept;
  auto& c = kept[static_cast<size_t>(level)];
  if (!c) {
    c.reset(libdeflate_alloc_compressor(level));
    if (!c) {
      throw std::bad_alloc(); // it fails only for want of memory
    }
  }
  return c.get();
}

// `data` compressed by one of libdeflate's formats (its bound and its
// compress function) at `level`.
template <typename Bound, typename Compress>
std::string compressed(std::string_view data, int level, Bound bound, Compress compress) {
  libdeflate_compressor* c = kept_compressor(level);
  std::string out(bound(c, data.size()), '\0');
  const size_t n = compress(c, data.data(), data.size(), out.data(), out.size());
  out.resize(n); // never 0: the bound is enough for any input
  return out;
}

} // namespace

std::string gzip(std::string_view data, int level) {
  // libdeflate compresses a whole buffer at once, faster than zlib and
  // smaller at the same level.
  return compressed(data, level, libdeflate_gzip_compress_bound, libdeflate_gzip_compress);
}

std::string deflate_raw(std::string_view data, int level) {
  return compressed(data, level, libdeflate_deflate_compress_bound, libdeflate_deflate_compress);
}

} // namespace tributary::rs
