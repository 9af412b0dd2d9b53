#pragma once

// Whether the disk of the daemon's data directory is full: a condition of
// the node, not of what was being written when it filled. While it is, no
// run starts (the runs it stopped applied nothing of the batch that hit
// it, and no resource is charged a retry for it); the free space is looked
// at every second, and every run waiting goes again within a second of
// space returning. Said once in the log when it fills, once a minute while
// it stays full, and once when space returns; the status API and /metrics
// show it.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

namespace tributary::agg {

class DiskHealth {
public:
  using Clock = std::chrono::system_clock;

  explicit DiskHealth(std::filesystem::path dir = {}) : m_dir(std::move(dir)) {}
  void set_dir(std::filesystem::path dir);

  // A run stopped because the disk is full (`why`: its error).
  void full(const std::string& why);
  // While full, at most once a second: whether space returned (the
  // condition is then over, and the caller starts what waited). Space has
  // returned when the free bytes grew past what they were when it filled
  // by min(64 MiB, 5% of the file system), at least 1 MiB: a few bytes
  // freed by a temporary file going do not restart runs only to fill it
  // again.
  bool space_returned();

  struct Condition {
    Clock::time_point since;
    std::string why;
    uint64_t free_bytes = 0; // as last looked at
  };
  std::optional<Condition> condition() const;
  bool is_full() const { return condition().has_value(); }

private:
  std::optional<std::pair<uint64_t, uint64_t>> free_and_size() const; // statvfs of m_dir

  mutable std::mutex m_mutex;
  std::filesystem::path m_dir;
  std::optional<Condition> m_condition;
  uint64_t m_free_when_full = 0;
  std::chrono::steady_clock::time_point m_looked{};
  std::chrono::steady_clock::time_point m_said{};
};

} // namespace tributary::agg
