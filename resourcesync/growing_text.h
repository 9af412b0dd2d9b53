#pragma once

// Room resourcesync/growing_text: a document that only grows at its end
// (our open Change List part), its gzip copy and its SHA-256 brought up to
// date with what was added whenever a version is asked for, so that each
// version costs what was added rather than its whole length (at 50,000
// entries, 13.8 MB gzipped and hashed anew every second of a baseline), and
// text never asked for as a version costs neither.

#include <memory>
#include <string>
#include <string_view>

namespace tributary::rs {

class GrowingText {
public:
  // `gzip_level` as for gzip(): 1 fastest .. 9 smallest, -1 zlib's default.
  explicit GrowingText(int gzip_level);
  ~GrowingText();
  GrowingText(GrowingText&&) noexcept;
  GrowingText& operator=(GrowingText&&) noexcept;
  GrowingText(const GrowingText&) = delete;
  GrowingText& operator=(const GrowingText&) = delete;

  void append(std::string_view s);
  const std::string& text() const;

  struct Version {
    std::string text;       // text() and then the tail
    std::string gzipped;    // one gzip member of it, as gzip() writes
    std::string sha256_hex; // of `text`
  };
  // The text as if `tail` ended it, with its gzip copy and digest; this
  // goes on growing without the tail (the compressor and the digest take
  // what was appended since the last version, then their states are
  // copied, and the copies finished). Not for two threads at once.
  Version with_tail(std::string_view tail) const;

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::rs
