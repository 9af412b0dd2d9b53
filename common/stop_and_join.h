#pragma once

// Room common/stop_and_join: how a component that owns threads ends them.
// Its stop flag is set under its lock (a waiter checks the flag under the
// same lock, so it cannot miss the wake-up), every waiter is woken, and each
// thread is joined.

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tributary {

inline void stop_and_join(std::mutex& mutex, bool& stopping, std::condition_variable& cv,
                          std::vector<std::thread>& threads) {
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  cv.notify_all();
  for (auto& t : threads) {
    if (t.joinable()) {
      t.join();
    }
  }
  threads.clear();
}

inline void stop_and_join(std::mutex& mutex, bool& stopping, std::condition_variable& cv, std::thread& thread) {
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  cv.notify_all();
  if (thread.joinable()) {
    thread.join();
  }
}

} // namespace tributary
