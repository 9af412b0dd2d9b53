#include "resourcesync/reader_input.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <zlib.h>

#include <string_view>

namespace tributary::rs::reading {

namespace {

constexpr size_t k_chunk = 64 * 1024;

} // namespace

struct InputDecoder::Inflater {
  z_stream zs{};
  bool open = false;
  ~Inflater() {
    if (open) {
      inflateEnd(&zs);
    }
  }
};

InputDecoder::InputDecoder(Sink& sink, uint64_t max_bytes) : m_sink(sink), m_max_bytes(max_bytes) {}

InputDecoder::~InputDecoder() = default;

// Sitemap documents are UTF-8 (sitemaps.org), and so is every document
// Tributary reads: an encoding declaration is ignored (the XML scanner
// reads UTF-8 only), and the bytes are checked here as they arrive. Each
// byte that cannot begin or continue a UTF-8 sequence (overlong forms and
// surrogates included) reaches the scanner as U+FFFD, and the document
// gets one error at its end, so it is never applied. A sequence cut by the
// end of a piece waits for the next. (libxml2, the parser before the
// scanner, handled such bytes and unknown declared encodings differently
// depending on where the input was cut into pieces: found by fuzzing.)
void InputDecoder::parse(const char* data, size_t size, bool terminate) {
  if (m_sink.halted()) {
    return;
  }
  m_bytes += size;
  if (m_bytes > m_max_bytes) {
    m_sink.stop("document is larger than the limit of " + std::to_string(m_max_bytes) +
         " bytes (uncompressed); stopped reading");
    return;
  }
  std::string_view in(data, size);
  std::string joined;
  if (!m_utf8_carry.empty()) {
    joined = m_utf8_carry;
    joined.append(in);
    m_utf8_carry.clear();
    in = joined;
  }
  std::string fixed;
  bool replaced = false;
  size_t from = 0;
  size_t end = in.size(); // what goes to the parser now
  for (size_t i = 0; i < in.size();) {
    // ASCII 32 bytes at a time where there is SSE2 (every x86-64), else
    // eight (a byte-wise loop was a tenth of reading a Change List).
#if defined(__SSE2__)
    while (i + 32 <= in.size()) {
      const auto* at = reinterpret_cast<const __m128i*>(in.data() + i);
      if (_mm_movemask_epi8(_mm_or_si128(_mm_loadu_si128(at), _mm_loadu_si128(at + 1))) != 0) {
        break;
      }
      i += 32;
    }
#endif
    while (i + 8 <= in.size()) {
      uint64_t w;
      std::memcpy(&w, in.data() + i, 8);
      if (w & 0x8080808080808080ull) {
        break;
      }
      i += 8;
    }
    if (i >= in.size()) {
      break;
    }
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      lo = c == 0xE0 ? 0xA0 : 0x80;
      hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      lo = c == 0xF0 ? 0x90 : 0x80;
      hi = c == 0xF4 ? 0x8F : 0xBF;
    }
    bool ok = n > 0;
    size_t j = 1;
    for (; ok && j < n && i + j < in.size(); ++j) {
      const auto d = static_cast<unsigned char>(in[i + j]);
      ok = j == 1 ? d >= lo && d <= hi : d >= 0x80 && d <= 0xBF;
    }
    if (ok && j < n) { // cut by the end of this piece
      if (!terminate) {
        m_utf8_carry = std::string(in.substr(i));
        end = i;
        break;
      }
      ok = false;
    }
    if (ok) {
      i += n;
      continue;
    }
    fixed.append(in.substr(from, i - from));
    fixed += "\xEF\xBF\xBD";
    replaced = true;
    if (m_utf8_bad++ == 0) {
      m_utf8_first = m_utf8_pos + i;
    }
    from = ++i;
  }
  m_utf8_pos += end;
  if (replaced) {
    fixed.append(in.substr(from, end - from));
    m_sink.on_text(fixed.data(), fixed.size(), terminate);
  } else {
    m_sink.on_text(in.data(), end, terminate);
  }
}

void InputDecoder::inflate_and_parse(const unsigned char* data, size_t size, bool terminate) {
  z_stream& zs = m_inflater->zs;
  zs.next_in = const_cast<unsigned char*>(data);
  zs.avail_in = static_cast<uInt>(size);
  unsigned char out[k_chunk];
  while (!m_sink.halted()) {
    if (m_gzip_member_done) {
      if (zs.avail_in == 0) {
        break;
      }
      // Concatenated gzip members form one stream (RFC 1952).
      inflateReset(&zs);
      m_gzip_member_done = false;
    }
    zs.next_out = out;
    zs.avail_out = sizeof out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    size_t produced = sizeof out - zs.avail_out;
    if (produced > 0) {
      parse(reinterpret_cast<const char*>(out), produced, false);
    }
    if (rc == Z_STREAM_END) {
      m_gzip_member_done = true;
      continue;
    }
    if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && produced < sizeof out)) {
      break; // needs more input
    }
    if (rc != Z_OK) {
      m_sink.stop(std::string("gzip data is corrupt: ") + (zs.msg ? zs.msg : "inflate failed"));
      return;
    }
  }
  if (terminate && !m_sink.halted()) {
    if (!m_gzip_member_done) {
      m_sink.stop("gzip data is truncated");
      return;
    }
    parse(nullptr, 0, true);
  }
}

void InputDecoder::push(const char* data, size_t size, bool terminate) {
  if (!m_decided) {
    m_pending.append(data, size);
    if (m_pending.size() < 4 && !terminate) {
      return;
    }
    m_decided = true;
    m_gzip = m_pending.size() >= 2 && static_cast<unsigned char>(m_pending[0]) == 0x1f &&
                   static_cast<unsigned char>(m_pending[1]) == 0x8b;
    if (m_gzip) {
      m_inflater = std::make_unique<Inflater>();
      if (inflateInit2(&m_inflater->zs, 15 + 16) != Z_OK) {
        m_sink.stop("could not initialise gzip decompression");
        return;
      }
      m_inflater->open = true;
    }
    std::string first;
    first.swap(m_pending);
    push_decided(first.data(), first.size(), terminate);
    return;
  }
  push_decided(data, size, terminate);
}

void InputDecoder::push_decided(const char* data, size_t size, bool terminate) {
  if (m_gzip) {
    m_compressed_bytes += size;
    inflate_and_parse(reinterpret_cast<const unsigned char*>(data), size, terminate);
  } else {
    parse(data, size, terminate);
  }
}

} // namespace tributary::rs::reading
