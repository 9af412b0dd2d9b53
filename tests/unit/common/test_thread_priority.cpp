// common/thread_priority.h: work that may wait yields the processor.
#include "common/thread_priority.h"

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace {

int nice_of_this_thread() {
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

} // namespace

TEST_CASE("Thread priority: the calling thread's nice value goes up by 10, and no other thread's") {
  const int before = nice_of_this_thread();
  int inside = 0, after_in_thread = 0;
  std::thread t([&] {
    tributary::yield_to_foreground();
    inside = nice_of_this_thread();
    tributary::yield_to_foreground(5);
    after_in_thread = nice_of_this_thread();
  });
  t.join();
  CHECK(inside == std::min(before + 10, 19));
  CHECK(after_in_thread == std::min(before + 15, 19));
  CHECK(nice_of_this_thread() == before);
}
