// common/thread_name.h: the name an operator sees for one of our threads.
#include "common/thread_name.h"

#include <doctest/doctest.h>

#include <pthread.h>

#include <string>
#include <thread>

TEST_CASE("Thread names: the calling thread is named, cut to Linux's 15 bytes") {
  auto name_of_named = [](const std::string& name) {
    std::string seen;
    std::thread t([&] {
      tributary::name_thread(name);
      char buf[32] = {};
      pthread_getname_np(pthread_self(), buf, sizeof buf);
      seen = buf;
    });
    t.join();
    return seen;
  };
  CHECK(name_of_named("renderer") == "renderer");
  CHECK(name_of_named("sync a-source-with-a-long-name") == "sync a-source-w");
}
