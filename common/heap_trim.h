#pragma once

// Hands the heap's freed memory back to the system, paced for the whole
// process.
#include <chrono>

namespace tributary {

// At least this long between two trims of the process's heap.
inline constexpr std::chrono::seconds k_heap_trim_every{5};

// malloc_trim(0), unless the process trimmed less than k_heap_trim_every
// before `now`; true when it trimmed. A trim walks every thread's arena
// and gives back all its free pages, which the threads still at work
// then fault in again: called after every refresh of the renderer and
// the list keeper, in a baseline of 200,000 the trims' madvise was 5-7%
// of those threads' samples and the page faults after them more. Paced,
// the memory a burst of work freed still goes back within
// k_heap_trim_every of the next call.
bool trim_heap(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

} // namespace tributary
