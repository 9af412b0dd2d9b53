#pragma once

// What hostile peers send, shared by the unit and integration tests: a gzip
// bomb, and a process's peak resident set.

#include <zlib.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include <sys/types.h>

namespace tributary::test {

// gzip of `mib` MiB of zeros, made a MiB at a time (about 1 KB sent per MiB
// inflated).
inline std::string gzip_bomb(size_t mib) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  const std::string zeros(1024 * 1024, '\0');
  std::string out;
  char buf[64 * 1024];
  for (size_t i = 0; i < mib; ++i) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    z.avail_in = static_cast<uInt>(zeros.size());
    const int flush = i + 1 == mib ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

// VmHWM of a process (0 for this one), in KiB; 0 when unknown.
inline size_t peak_rss_kib(pid_t pid = 0) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status") : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoul(line.substr(6));
    }
  }
  return 0;
}

} // namespace tributary::test
