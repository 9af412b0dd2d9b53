#include "sync_engine/fetcher_impl.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace tributary::sync {

namespace {

// Percent-decodes a file URL path ("/data/my%20list.xml").
std::string decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') {
          return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
          return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
          return c - 'A' + 10;
        }
        return -1;
      };
      int hi = hex(s[i + 1]);
      int lo = hex(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

class FileFetcher : public Fetcher {
public:
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options,
                              const BodySink& sink) override {
    auto parsed = parse_url(url);
    if (!parsed) {
      return tl::unexpected(parsed.error());
    }
    std::string path = decode(parsed->target.substr(0, parsed->target.find('?')));
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      int err = errno;
      return make_error(err == ENOENT ? ErrorKind::not_found : ErrorKind::io,
                        "cannot open " + path + ": " + std::strerror(err));
    }
    FetchResponse resp;
    resp.status = 200;
    resp.final_url = url;
    std::vector<char> buf(64 * 1024);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      auto n = static_cast<size_t>(in.gcount());
      if (n == 0) {
        break;
      }
      resp.body_bytes += n;
      if (resp.body_bytes > options.max_body_bytes) {
        return make_error(ErrorKind::permanent, path + " is larger than the limit of " +
                                                    std::to_string(options.max_body_bytes) + " bytes");
      }
      if (!sink(buf.data(), n)) {
        break;
      }
    }
    if (in.bad()) {
      return make_error(ErrorKind::io, "error reading " + path);
    }
    return resp;
  }
};

} // namespace

std::unique_ptr<Fetcher> make_file_fetcher() { return std::make_unique<FileFetcher>(); }

} // namespace tributary::sync
