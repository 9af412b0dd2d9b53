#include "sync_engine/fetcher_impl.h"

#include "common/percent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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
    // Regular files only, opened without blocking: a FIFO named by a
    // document once hung `explore` for ever, and a device is no document.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      return make_error(err == ENOENT ? ErrorKind::not_found : ErrorKind::io,
                        "cannot open " + path + ": " + std::strerror(err));
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return make_error(ErrorKind::permanent, path + " is not a regular file: not read");
    }
    FetchResponse resp;
    resp.status = 200;
    resp.final_url = url;
    std::vector<char> buf(64 * 1024);
    for (;;) {
      const ssize_t got = ::read(fd, buf.data(), buf.size());
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got < 0) {
        return make_error(ErrorKind::io, "error reading " + path + ": " + std::strerror(errno));
      }
      if (got == 0) {
        break;
      }
      const auto n = static_cast<size_t>(got);
      resp.body_bytes += n;
      if (resp.body_bytes > options.max_body_bytes) {
        return make_error(ErrorKind::permanent, path + " is larger than the limit of " +
                                                    std::to_string(options.max_body_bytes) + " bytes");
      }
      if (!sink(buf.data(), n)) {
        break;
      }
    }
    return resp;
  }
};

} // namespace

std::unique_ptr<Fetcher> make_file_fetcher() { return std::make_unique<FileFetcher>(); }

} // namespace tributary::sync
