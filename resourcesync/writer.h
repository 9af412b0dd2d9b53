#pragma once

#include "resourcesync/model.h"

#include <functional>
#include <string>
#include <string_view>

namespace tributary::rs {

// Appends `s` as XML text (or, with `attribute`, as a double-quoted
// attribute value): markup characters escaped, control characters that
// XML 1.0 cannot carry dropped. For the other XML we write (OAI-PMH).
void append_xml_escaped(std::string& out, std::string_view s, bool attribute = false);

// Streams one document into a string: begin(), entry() for each entry,
// end(). The Sitemap namespace is the default namespace and `rs` is declared
// once on the root, with any extension namespaces of the header; extension
// namespaces not declared there are declared on the element that uses them.
// Text and attribute values are escaped; datetimes are written canonically.
class DocumentWriter {
public:
  // Appends to `out`, which must outlive the writer.
  explicit DocumentWriter(std::string& out) : m_out(out) {}

  void begin(const DocumentHeader& header);
  void entry(const Entry& entry);
  void end();

private:
  std::string& m_out;
  DocumentHeader m_header;
};

// The whole document as XML.
std::string write_document(const Document& document);

// Serialises one entry as it would appear inside a document with `root`.
void append_entry(std::string& out, const Entry& entry, RootElement root,
                  const std::vector<std::pair<std::string, std::string>>& declared = {});

struct PartitionLimits {
  uint64_t max_entries = k_max_entries;
  uint64_t max_bytes = k_max_document_bytes;
};

// A document the partitioned writer produced, with the URL it is to be
// published at.
struct WrittenPart {
  std::string url;
  std::string xml;
  uint64_t entries = 0;
  bool is_index = false;
};

// Writes a list that may outgrow one document: entries go into parts of at
// most `limits` entries and bytes; each part links to the index
// (`rel="index"`) and carries the header's links (`up`, ...). When everything
// fits in one part, that part is published at `index_url` as a plain document
// without an index. Otherwise the index, published at `index_url`, lists
// the parts: for snapshot documents with the header's `at`/`completed`, for
// change documents with each part's `from`/`until` (the last part keeps the
// header's `until`, so an open list stays open).
// Parts reach `sink` as they fill; only one part is held in memory.
class PartitionedWriter {
public:
  using PartUrl = std::function<std::string(size_t part_number)>; // 1-based
  using Sink = std::function<void(WrittenPart&&)>;

  PartitionedWriter(DocumentHeader header, std::string index_url, PartUrl part_url, Sink sink,
                    PartitionLimits limits = {});

  void add(const Entry& entry);
  // Changes the header of what is still to be written (parts not yet
  // flushed, and the index): e.g. `completed`, known only at the end.
  void update_header(const std::function<void(DocumentHeader&)>& edit) { edit(m_header); }
  // Flushes the last part and writes the index if there is more than one
  // part. Returns the number of parts (1 when no index was needed).
  size_t finish();

private:
  void flush(bool last);
  std::string part_header_xml(bool with_index, std::optional<Timestamp> from,
                              std::optional<Timestamp> until) const;

  DocumentHeader m_header;
  std::string m_index_url;
  PartUrl m_part_url;
  Sink m_sink;
  PartitionLimits m_limits;
  bool m_change = false;

  std::string m_body;
  std::string m_scratch;
  uint64_t m_body_entries = 0;
  std::optional<Timestamp> m_part_from;  // from of the part being filled
  std::optional<Timestamp> m_last_time;  // newest change time seen
  size_t m_parts = 0;
  // Parts already written (url, from, until) for the index; the first part
  // is held back until we know whether an index is needed at all.
  struct PartInfo {
    std::string url;
    std::optional<Timestamp> from;
    std::optional<Timestamp> until;
  };
  std::vector<PartInfo> m_written;
};

// `data` gzip-compressed (one member) at `level` (1 fastest .. 9 smallest;
// -1: 6, zlib's default), by libdeflate: for `.xml.gz` sitemaps and
// `Content-Encoding: gzip` bodies. It keeps one compressor (hundreds of
// KiB) per calling thread and level, for the thread's life: call it from
// long-lived threads (the renderer, the list keeper, the server's
// workers, as today). A thread made for one call would set one up and
// free it each time, the cost the kept one is there to avoid.
std::string gzip(std::string_view data, int level = -1);

// `data` as a raw DEFLATE stream (RFC 1951: no gzip or zlib wrapper, as a
// ZIP entry holds it), by libdeflate and on the same terms as gzip().
std::string deflate_raw(std::string_view data, int level = -1);

} // namespace tributary::rs
