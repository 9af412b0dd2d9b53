#pragma once

// Room common/thread_name: the name the operator sees for a thread of ours
// (`top -H`, `ps -L`, gdb, perf): which of a daemon's threads is busy is
// otherwise anyone's guess, every one of them being "tributary".

#include <string_view>

namespace tributary {

// Names the calling thread. Linux keeps 15 bytes: a longer name is cut.
void name_thread(std::string_view name);

} // namespace tributary
