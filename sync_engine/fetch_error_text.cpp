#include "sync_engine/fetch_error_text.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

namespace tributary::sync {

std::string http_status_words(int status, const std::string& url) {
  return "HTTP " + std::to_string(status) + " for " + url;
}

std::string authority_of(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

std::string words_for(int err) {
  switch (err) {
  case ECONNREFUSED:
    return "connection refused";
  case EHOSTUNREACH:
  case EHOSTDOWN:
    return "host unreachable";
  case ENETUNREACH:
  case ENETDOWN:
    return "network unreachable";
  case ETIMEDOUT:
    return "connection timed out";
  default:
    return "cannot connect";
  }
}

} // namespace

std::string connect_failure(const std::string& host, int port, int timeout_ms) {
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    return "cannot resolve the host";
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
  int err = 0;
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) {
    return "cannot connect";
  }
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int n = ::poll(&p, 1, timeout_ms);
      if (n == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof err;
        err = 0;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
  }
  ::close(fd);
  return words_for(err);
}

} // namespace tributary::sync
