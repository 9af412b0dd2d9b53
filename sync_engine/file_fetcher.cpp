#include "sync_engine/fetcher_impl.h"

#include "common/percent.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace tributary::sync {

namespace {

class FileFetcher : public Fetcher {
public:
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options,
                              const BodySink& sink) override {
    if (options.method != "GET") {
      return make_error(ErrorKind::usage, options.method + " " + url + ": a file: URL can only be read");
    }
    auto parsed = parse_url(url);
    if (!parsed) {
      return tl::unexpected(parsed.error());
    }
    auto decoded = percent_decode(parsed->target.substr(0, parsed->target.find('?')));
    if (!decoded) {
      return make_error(ErrorKind::usage, "'" + url + "' has a malformed %-escape");
    }
    const std::string path = *decoded;
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
