#include "common/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace tributary {

void yield_to_foreground(int by) {
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno != 0) {
    return;
  }
  ::setpriority(PRIO_PROCESS, tid, now + by); // a courtesy: a failure changes nothing
}

} // namespace tributary
