#pragma once

// Room common/thread_priority: work that may wait (packing our dumps: the
// dump builder is its one caller) yields the processor to work that may not
// (syncing, answering clients) when both want it, and takes all of it when
// it is free.

namespace tributary {

// Lowers the calling thread's scheduling priority (its nice value raised by
// `by`; Linux keeps a nice value per thread). An idle machine runs it as
// fast as before; a busy one runs the others first. A failure changes
// nothing.
void yield_to_foreground(int by = 10);

} // namespace tributary
