#include "resourcesync/reader_impl.h"

#include <string>

// Bytes in: plain or gzip (by the magic bytes), checked as UTF-8 as they
// arrive, and handed to libxml2's push parser in chunks.
namespace tributary::rs {

using namespace reading;

// Sitemap documents are UTF-8 (sitemaps.org), and so is every document
// Tributary reads: an encoding declaration is ignored
// (XML_PARSE_IGNORE_ENC), and the bytes are checked here as they arrive.
// Each byte that cannot begin or continue a UTF-8 sequence (overlong
// forms and surrogates included) reaches libxml2 as U+FFFD, and the
// document gets one error at its end, so it is never applied. A sequence
// cut by the end of a piece waits for the next. libxml2's own handling of
// such bytes, and of an unknown declared encoding, depended on where the
// input was cut into pieces (found by fuzzing: the same bytes read whole
// and in pieces gave different entries and errors).
void Reader::Impl::parse(const char* data, size_t size, bool terminate) {
  if (summary.stopped || exception) {
    return;
  }
  summary.bytes += size;
  if (summary.bytes > options.max_bytes) {
    stop("document is larger than the limit of " + std::to_string(options.max_bytes) +
         " bytes (uncompressed); stopped reading");
    return;
  }
  std::string_view in(data, size);
  std::string joined;
  if (!utf8_carry.empty()) {
    joined = utf8_carry;
    joined.append(in);
    utf8_carry.clear();
    in = joined;
  }
  std::string fixed;
  bool replaced = false;
  size_t from = 0;
  size_t end = in.size(); // what goes to the parser now
  for (size_t i = 0; i < in.size();) {
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
        utf8_carry = std::string(in.substr(i));
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
    if (utf8_bad++ == 0) {
      utf8_first = utf8_pos + i;
    }
    from = ++i;
  }
  utf8_pos += end;
  if (replaced) {
    fixed.append(in.substr(from, end - from));
    feed_parser(fixed.data(), fixed.size(), terminate);
  } else {
    feed_parser(in.data(), end, terminate);
  }
}

void Reader::Impl::feed_parser(const char* data, size_t size, bool terminate) {
  if (!ctxt) {
    ctxt = xmlCreatePushParserCtxt(&sax, this, data, static_cast<int>(size), nullptr);
    if (!ctxt) {
      stop("could not create the XML parser");
      return;
    }
    // NOENT: predefined entities and character references in attribute
    // values are decoded (without it libxml2 hands `&` back as `&#38;`).
    // No other entity can exist: a DOCTYPE stops the parser on sight.
    xmlCtxtUseOptions(ctxt, XML_PARSE_NOENT | XML_PARSE_NONET | XML_PARSE_NOCDATA | XML_PARSE_IGNORE_ENC);
    if (terminate) {
      check_parser(xmlParseChunk(ctxt, nullptr, 0, 1));
    }
    return;
  }
  check_parser(xmlParseChunk(ctxt, data, static_cast<int>(size), terminate ? 1 : 0));
}

// The parser's own verdict after a chunk. An error it reports only
// through its generic handler (bytes that do not decode in the declared
// encoding, found when the input came in pieces) never reaches on_error:
// without this the document read as well-formed and empty (found by
// fuzzing: the same bytes read whole failed).
void Reader::Impl::check_parser(int rc) {
  if (summary.stopped || exception || (rc == 0 && ctxt->wellFormed)) {
    return;
  }
  const xmlError* e = xmlCtxtGetLastError(ctxt);
  // Without an error of its own, the parser halted on input it could not
  // take: in libxml2 2.9 xmlParseChunk answers XML_PARSER_EOF (-1) when
  // the bytes do not convert from the declared encoding, and
  // XML_ERR_INVALID_ENCODING when a converted buffer fails.
  std::string msg = e && e->message ? e->message
                    : rc == XML_PARSER_EOF || rc == XML_ERR_INVALID_ENCODING
                        ? "the bytes do not decode in the document's declared encoding"
                        : "the XML parser stopped (libxml2 code " + std::to_string(rc) + ")";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
    msg.pop_back();
  }
  stop("not well-formed XML: " + msg);
}

void Reader::Impl::inflate_and_parse(const unsigned char* data, size_t size, bool terminate) {
  zs.next_in = const_cast<unsigned char*>(data);
  zs.avail_in = static_cast<uInt>(size);
  unsigned char out[k_chunk];
  while (!summary.stopped && !exception) {
    if (gzip_member_done) {
      if (zs.avail_in == 0) {
        break;
      }
      // Concatenated gzip members form one stream (RFC 1952).
      inflateReset(&zs);
      gzip_member_done = false;
    }
    zs.next_out = out;
    zs.avail_out = sizeof out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    size_t produced = sizeof out - zs.avail_out;
    if (produced > 0) {
      parse(reinterpret_cast<const char*>(out), produced, false);
    }
    if (rc == Z_STREAM_END) {
      gzip_member_done = true;
      continue;
    }
    if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && produced < sizeof out)) {
      break; // needs more input
    }
    if (rc != Z_OK) {
      stop(std::string("gzip data is corrupt: ") + (zs.msg ? zs.msg : "inflate failed"));
      return;
    }
  }
  if (terminate && !summary.stopped && !exception) {
    if (!gzip_member_done) {
      stop("gzip data is truncated");
      return;
    }
    parse(nullptr, 0, true);
  }
}

void Reader::Impl::push(const char* data, size_t size, bool terminate) {
  if (!decided) {
    pending.append(data, size);
    if (pending.size() < 4 && !terminate) {
      return;
    }
    decided = true;
    summary.gzip = pending.size() >= 2 && static_cast<unsigned char>(pending[0]) == 0x1f &&
                   static_cast<unsigned char>(pending[1]) == 0x8b;
    if (summary.gzip) {
      if (inflateInit2(&zs, 15 + 16) != Z_OK) {
        stop("could not initialise gzip decompression");
        return;
      }
      zs_open = true;
    }
    std::string first;
    first.swap(pending);
    push_decided(first.data(), first.size(), terminate);
    return;
  }
  push_decided(data, size, terminate);
}

void Reader::Impl::push_decided(const char* data, size_t size, bool terminate) {
  if (summary.gzip) {
    summary.compressed_bytes += size;
    inflate_and_parse(reinterpret_cast<const unsigned char*>(data), size, terminate);
  } else {
    parse(data, size, terminate);
  }
}

} // namespace tributary::rs
