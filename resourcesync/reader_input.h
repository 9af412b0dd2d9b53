#pragma once

// Room resourcesync/reader_input: a document's bytes on their way in.
// Plain or gzip (by the magic bytes; concatenated members are one stream),
// counted against the size limit, checked as UTF-8 as they arrive (a byte
// that cannot begin or continue a sequence goes on as U+FFFD, and is
// counted), and handed to the sink in pieces. Owns the inflater and what a
// piece's end cut; knows nothing of XML. Internal to the reader.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tributary::rs::reading {

class InputDecoder {
public:
  class Sink {
  public:
    virtual ~Sink() = default;
    // UTF-8 text, in pieces; `terminate` with the last.
    virtual void on_text(const char* data, size_t size, bool terminate) = 0;
    // Whether the reading ended (stopped, or a handler threw): nothing
    // more is decoded.
    virtual bool halted() const = 0;
    // Stops reading for good, for `msg` (over the limit, corrupt gzip).
    virtual void stop(std::string msg) = 0;
  };

  // `sink` must outlive this. `max_bytes`: of uncompressed input.
  InputDecoder(Sink& sink, uint64_t max_bytes);
  ~InputDecoder();
  InputDecoder(const InputDecoder&) = delete;
  InputDecoder& operator=(const InputDecoder&) = delete;

  // The next bytes as they came; `terminate` after the last.
  void push(const char* data, size_t size, bool terminate);

  // Whether any byte came.
  bool any() const { return m_decided || !m_pending.empty(); }
  bool gzip() const { return m_gzip; }
  uint64_t bytes() const { return m_bytes; }                       // uncompressed
  uint64_t compressed_bytes() const { return m_compressed_bytes; } // fed, when gzip
  // Bytes that were not UTF-8, and the first one's offset.
  uint64_t bad_utf8() const { return m_utf8_bad; }
  uint64_t first_bad_utf8() const { return m_utf8_first; }

private:
  void push_decided(const char* data, size_t size, bool terminate);
  void inflate_and_parse(const unsigned char* data, size_t size, bool terminate);
  // Checks the UTF-8 of a piece and hands it on.
  void parse(const char* data, size_t size, bool terminate);

  Sink& m_sink;
  uint64_t m_max_bytes;
  std::string m_pending; // bytes buffered until the gzip magic can be seen
  bool m_decided = false;
  bool m_gzip = false;
  uint64_t m_bytes = 0;
  uint64_t m_compressed_bytes = 0;
  struct Inflater; // zlib's stream, from the first gzip byte on
  std::unique_ptr<Inflater> m_inflater;
  bool m_gzip_member_done = false;
  std::string m_utf8_carry; // a UTF-8 sequence cut by the end of the last piece
  uint64_t m_utf8_pos = 0;  // offset of m_utf8_carry (or of the next piece) in the document
  uint64_t m_utf8_bad = 0;
  uint64_t m_utf8_first = 0;
};

} // namespace tributary::rs::reading
