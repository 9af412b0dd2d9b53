#include "store/s3/s3_client.h"

#include <curl/curl.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace tributary::store {

namespace {

std::once_flag g_curl_init;

struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Headers = std::unique_ptr<curl_slist, SlistFree>;

Headers headers_with(const std::vector<std::string>& lines) {
  curl_slist* list = nullptr;
  for (const auto& l : lines) {
    list = curl_slist_append(list, l.c_str());
  }
  return Headers(list);
}

// S3 error bodies are `<Error><Code>NoSuchKey</Code>...`: the code says
// more than the status.
std::string error_code(const std::string& body) {
  const auto a = body.find("<Code>");
  const auto b = body.find("</Code>");
  if (a == std::string::npos || b == std::string::npos || b < a) {
    return {};
  }
  return body.substr(a + 6, std::min<size_t>(b - a - 6, 100));
}

} // namespace

// Idle libcurl handles: each keeps its connection alive for the next
// request. Taken and given back under a mutex, so calls may come from any
// thread.
struct S3Client::Handle {
  std::mutex mutex;
  std::vector<CURL*> idle;
  ~Handle() {
    for (CURL* c : idle) {
      curl_easy_cleanup(c);
    }
  }
  CURL* take() {
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        CURL* c = idle.back();
        idle.pop_back();
        curl_easy_reset(c);
        return c;
      }
    }
    return curl_easy_init();
  }
  void give(CURL* c) {
    std::lock_guard lock(mutex);
    if (idle.size() < 16) {
      idle.push_back(c);
    } else {
      curl_easy_cleanup(c);
    }
  }
};

namespace {

// One request: method, URL, headers, an optional body source, a body sink.
struct Call {
  std::string method;
  std::string url;
  std::vector<std::string> headers;
  std::function<size_t(char*, size_t)> read; // the request body, if any
  curl_off_t body_size = -1;
  std::function<bool(const char*, size_t)> sink; // the 2xx response body
  bool head = false;
};

struct Outcome {
  long status = 0;
  std::string error_body; // the body of a response that is not 2xx (capped)
  curl_off_t content_length = -1;
  uint64_t received = 0;
  bool sink_stopped = false;
};

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* ctx = static_cast<std::pair<const Call*, Outcome*>*>(user);
  const size_t bytes = size * n;
  Outcome& out = *ctx->second;
  if (out.status == 0 || out.status >= 300) {
    if (out.error_body.size() < 4096) {
      out.error_body.append(data, std::min<size_t>(bytes, 4096 - out.error_body.size()));
    }
    return bytes;
  }
  out.received += bytes;
  if (ctx->first->sink && !ctx->first->sink(data, bytes)) {
    out.sink_stopped = true;
    return 0;
  }
  return bytes;
}

// The status line (the last one wins, after a 100 Continue).
size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* p = static_cast<std::pair<const Call*, Outcome*>*>(user);
  const size_t bytes = size * n;
  if (bytes > 9 && std::memcmp(data, "HTTP/", 5) == 0) {
    const char* sp = static_cast<const char*>(std::memchr(data, ' ', bytes));
    if (sp && sp + 4 <= data + bytes) {
      p->second->status = std::strtol(sp + 1, nullptr, 10);
      p->second->error_body.clear();
    }
  }
  return bytes;
}

size_t on_read(char* buffer, size_t size, size_t n, void* user) {
  auto* call = static_cast<const Call*>(user);
  return call->read(buffer, size * n);
}

} // namespace

S3Client::S3Client(S3Config config) : m_config(std::move(config)), m_handles(std::make_unique<Handle>()) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  while (!m_config.endpoint.empty() && m_config.endpoint.back() == '/') {
    m_config.endpoint.pop_back();
  }
}

S3Client::~S3Client() = default;

const S3Config& S3Client::config() const { return m_config; }

void S3Client::set_credentials(std::string access_key, std::string secret_key) {
  std::lock_guard lock(m_handles->mutex);
  m_config.access_key = std::move(access_key);
  m_config.secret_key = std::move(secret_key);
}

std::string S3Client::url(const std::string& key) const {
  std::string base = m_config.endpoint;
  if (!m_config.path_style) {
    const auto scheme = base.find("://");
    const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    base.insert(host, m_config.bucket + ".");
    return key.empty() ? base + "/" : base + "/" + key;
  }
  return base + "/" + m_config.bucket + (key.empty() ? "" : "/" + key);
}

namespace {

// Signs and sends one request on a pooled handle. Transport failures are
// io errors; the status is the caller's to judge.
Result<Outcome> perform(S3Client::Handle& pool, const S3Config& config, Call& call) {
  CURL* c = pool.take();
  if (!c) {
    return make_error(ErrorKind::io, "S3: cannot create a libcurl handle");
  }
  Outcome out;
  std::pair<const Call*, Outcome*> ctx{&call, &out};
  char error[CURL_ERROR_SIZE] = {0};
  const std::string sigv4 = "aws:amz:" + config.region + ":s3";
  std::string userpwd;
  {
    std::lock_guard lock(pool.mutex);
    userpwd = config.access_key + ":" + config.secret_key;
  }
  curl_easy_setopt(c, CURLOPT_URL, call.url.c_str());
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, config.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, config.timeout_ms);
  // A transfer that stalls (under 1 KiB/s for 15 s) is abandoned rather
  // than held for the whole timeout: seen once against RGW under load, a
  // GET waiting with no byte coming, which also held up shutdown.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 15L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &ctx);
  if (call.head) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (call.read) {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &call);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, call.body_size);
  } else if (call.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  }
  if (call.read && call.method != "PUT") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  }
  // No header-removal lines ("Expect:"): libcurl's SigV4 signs the custom
  // headers as given, an empty one included, and then does not send it,
  // so the server's signature differs (measured against RGW).
  Headers headers = headers_with(call.headers);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  // on_write must tell a body from an error document before the end: the
  // status line is read as the headers arrive (the last one wins, after a
  // 100 Continue).
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &ctx);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_off_t length = -1;
  curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  if (rc == CURLE_OK) {
    pool.give(c);
  } else {
    curl_easy_cleanup(c); // its connection may be broken: not reused
  }
  out.status = status;
  out.content_length = length;
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && out.sink_stopped)) {
    return make_error(ErrorKind::io, "S3 " + call.method + " " + call.url + ": " +
                                         (error[0] ? std::string(error) : curl_easy_strerror(rc)));
  }
  return out;
}

Error failure(const std::string& method, const std::string& url, const Outcome& o) {
  const std::string code = error_code(o.error_body);
  return Error{o.status == 404 ? ErrorKind::not_found : ErrorKind::io,
               "S3 " + method + " " + url + ": HTTP " + std::to_string(o.status) + (code.empty() ? "" : " " + code)};
}

} // namespace

Result<void> S3Client::create_bucket() {
  Call call{.method = "PUT", .url = url("")};
  call.read = [](char*, size_t) -> size_t { return 0; };
  call.body_size = 0;
  call.headers.push_back("x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  auto o = perform(*m_handles, m_config, call);
  if (!o) {
    return tl::unexpected(o.error());
  }
  if (o->status == 200 || (o->status == 409 && error_code(o->error_body) == "BucketAlreadyOwnedByYou")) {
    return {};
  }
  return tl::unexpected(failure(call.method, call.url, *o));
}

Result<void> S3Client::put(const std::string& key, std::string_view body, const std::string& sha256_hex) {
  Call call{.method = "PUT", .url = url(key)};
  size_t at = 0;
  call.read = [&](char* buf, size_t n) -> size_t {
    const size_t k = std::min(n, body.size() - at);
    std::memcpy(buf, body.data() + at, k);
    at += k;
    return k;
  };
  call.body_size = static_cast<curl_off_t>(body.size());
  call.headers.push_back("x-amz-content-sha256: " + sha256_hex);
  auto o = perform(*m_handles, m_config, call);
  if (!o) {
    return tl::unexpected(o.error());
  }
  if (o->status != 200) {
    return tl::unexpected(failure(call.method, call.url, *o));
  }
  return {};
}

Result<void> S3Client::put_file(const std::string& key, const std::filesystem::path& file, uint64_t offset,
                                uint64_t length, const std::string& sha256_hex) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorKind::io, "S3 PUT " + key + ": cannot open " + file.string() + ": " + std::strerror(errno));
  }
  Call call{.method = "PUT", .url = url(key)};
  uint64_t done = 0;
  bool read_failed = false;
  call.read = [&](char* buf, size_t n) -> size_t {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, length - done));
    if (want == 0) {
      return 0;
    }
    const ssize_t got = ::pread(fd, buf, want, static_cast<off_t>(offset + done));
    if (got <= 0) {
      read_failed = true;
      return CURL_READFUNC_ABORT;
    }
    done += static_cast<uint64_t>(got);
    return static_cast<size_t>(got);
  };
  call.body_size = static_cast<curl_off_t>(length);
  call.headers.push_back("x-amz-content-sha256: " + sha256_hex);
  auto o = perform(*m_handles, m_config, call);
  ::close(fd);
  if (read_failed) {
    return make_error(ErrorKind::io, "S3 PUT " + key + ": reading " + file.string() + " failed");
  }
  if (!o) {
    return tl::unexpected(o.error());
  }
  if (o->status != 200) {
    return tl::unexpected(failure(call.method, call.url, *o));
  }
  return {};
}

Result<void> S3Client::get(const std::string& key, uint64_t offset, uint64_t length,
                           const std::function<bool(const char*, size_t)>& sink) {
  Call call{.method = "GET", .url = url(key)};
  call.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (length == 0) {
    return {};
  }
  call.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1));
  uint64_t got = 0;
  call.sink = [&](const char* d, size_t n) {
    if (got + n > length) {
      return false; // more than asked: the server ignored the range
    }
    got += n;
    return sink(d, n);
  };
  // A transport failure before any byte arrived (a stale kept-alive
  // connection, a stall) is tried once more on a new connection.
  auto o = perform(*m_handles, m_config, call);
  if (!o && got == 0) {
    o = perform(*m_handles, m_config, call);
  }
  if (!o) {
    return tl::unexpected(o.error());
  }
  if (o->status != 206 && !(o->status == 200 && offset == 0)) {
    return tl::unexpected(failure(call.method, call.url, *o));
  }
  if (got != length) {
    return make_error(ErrorKind::io, "S3 GET " + call.url + ": " + std::to_string(got) + " bytes of " +
                                         std::to_string(length) + " from " + std::to_string(offset));
  }
  return {};
}

Result<std::optional<uint64_t>> S3Client::head(const std::string& key) {
  Call call{.method = "HEAD", .url = url(key), .head = true};
  call.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  auto o = perform(*m_handles, m_config, call);
  if (!o) {
    return tl::unexpected(o.error());
  }
  if (o->status == 404) {
    return std::optional<uint64_t>();
  }
  if (o->status != 200) {
    return tl::unexpected(failure(call.method, call.url, *o));
  }
  return std::optional<uint64_t>(o->content_length < 0 ? 0 : static_cast<uint64_t>(o->content_length));
}

Result<void> S3Client::remove(const std::string& key) {
  Call call{.method = "DELETE", .url = url(key)};
  call.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  auto o = perform(*m_handles, m_config, call);
  if (!o) {
    return tl::unexpected(o.error());
  }
  if (o->status != 204 && o->status != 200 && o->status != 404) {
    return tl::unexpected(failure(call.method, call.url, *o));
  }
  return {};
}

} // namespace tributary::store
