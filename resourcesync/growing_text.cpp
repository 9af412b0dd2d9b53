#include "resourcesync/growing_text.h"

#include "resourcesync/hash.h"
#include "resourcesync/writer.h"

#include <zlib.h>

#include <new>

namespace tributary::rs {

namespace {

// Runs `zs` over its input with `flush`, appending what it writes to `out`.
void drain(z_stream& zs, int flush, std::string& out) {
  char buf[64 * 1024];
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    const int rc = deflate(&zs, flush);
    if (rc == Z_STREAM_ERROR) {
      throw std::bad_alloc(); // only a state that is not initialised; never with ours
    }
    out.append(buf, sizeof buf - zs.avail_out);
  } while (zs.avail_out == 0 || zs.avail_in > 0);
}

} // namespace

// Below this the gzip copy is made whole for each version (a fraction of a
// millisecond); past it the compressor keeps its state (about 270 KB) and
// takes only what is added: a daemon of hundreds of small sets holds no
// compressor for any.
constexpr size_t k_stream_from = 256 * 1024;

struct GrowingText::Impl {
  int level;
  std::string text;
  std::string gzipped; // what the compressor wrote of the text so far
  size_t fed = 0;      // the text's bytes the digest and the compressor have taken
  bool streaming = false;
  z_stream zs{};
  Hasher digest{HashAlgorithm::sha256};

  explicit Impl(int l) : level(l < -1 || l > 9 ? Z_DEFAULT_COMPRESSION : l) {}
  ~Impl() {
    if (streaming) {
      deflateEnd(&zs);
    }
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void compress(std::string_view s) {
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
    zs.avail_in = static_cast<uInt>(s.size());
    drain(zs, Z_NO_FLUSH, gzipped);
  }

  // The digest and the compressor take what was appended since they last
  // did. Only when a version is asked for: a part that fills up and closes
  // between two versions (every part of a baseline, whose refreshes each
  // bring thousands of changes) is neither compressed nor hashed here, since
  // its closed document is made from the text alone.
  void catch_up() {
    if (fed == text.size()) {
      return;
    }
    const std::string_view added(text.data() + fed, text.size() - fed);
    digest.update(added);
    if (streaming) {
      compress(added);
    } else if (text.size() >= k_stream_from) {
      if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        throw std::bad_alloc(); // only for want of memory with these arguments
      }
      streaming = true;
      compress(text);
    }
    fed = text.size();
  }
};

GrowingText::GrowingText(int gzip_level) : m_impl(std::make_unique<Impl>(gzip_level)) {}
GrowingText::~GrowingText() = default;
GrowingText::GrowingText(GrowingText&&) noexcept = default;
GrowingText& GrowingText::operator=(GrowingText&&) noexcept = default;

void GrowingText::append(std::string_view s) { m_impl->text.append(s); }

const std::string& GrowingText::text() const { return m_impl->text; }

GrowingText::Version GrowingText::with_tail(std::string_view tail) const {
  m_impl->catch_up();
  Version v;
  v.text.reserve(m_impl->text.size() + tail.size());
  v.text.append(m_impl->text).append(tail);
  v.sha256_hex = m_impl->digest.peek_hex(tail);
  if (!m_impl->streaming) {
    v.gzipped = gzip(v.text, m_impl->level);
    return v;
  }
  z_stream copy{};
  if (deflateCopy(&copy, &m_impl->zs) != Z_OK) {
    throw std::bad_alloc();
  }
  v.gzipped.reserve(m_impl->gzipped.size() + tail.size() + 64 * 1024);
  v.gzipped = m_impl->gzipped;
  copy.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(tail.data()));
  copy.avail_in = static_cast<uInt>(tail.size());
  char buf[64 * 1024];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    copy.next_out = reinterpret_cast<Bytef*>(buf);
    copy.avail_out = sizeof buf;
    rc = deflate(&copy, Z_FINISH);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&copy);
      throw std::bad_alloc();
    }
    v.gzipped.append(buf, sizeof buf - copy.avail_out);
  }
  deflateEnd(&copy);
  return v;
}

} // namespace tributary::rs
