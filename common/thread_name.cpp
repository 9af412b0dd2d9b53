#include "common/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <string>

namespace tributary {

void name_thread(std::string_view name) {
  const std::string cut(name.substr(0, std::min<size_t>(name.size(), 15)));
  pthread_setname_np(pthread_self(), cut.c_str()); // a name is a courtesy: a failure changes nothing
}

} // namespace tributary
