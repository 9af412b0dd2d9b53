#include "common/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>

namespace tributary {

std::string temp_file_name(std::string_view prefix, std::string_view suffix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
         std::string(suffix);
}

size_t remove_orphaned_temp_files(const std::filesystem::path& dir, std::initializer_list<std::string_view> prefixes) {
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    for (std::string_view prefix : prefixes) {
      if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
          name[prefix.size()] != '-') {
        continue;
      }
      const char* first = name.data() + prefix.size() + 1;
      const char* last = name.data() + name.size();
      int pid = 0;
      auto [end, err] = std::from_chars(first, last, pid);
      if (err != std::errc() || end == last || *end != '-' || pid <= 0) {
        break; // not one of ours
      }
      if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) {
        break; // its process lives
      }
      std::error_code rm;
      if (std::filesystem::remove(e.path(), rm)) {
        ++removed;
      }
      break;
    }
  }
  return removed;
}

} // namespace tributary
