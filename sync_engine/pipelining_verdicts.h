#pragma once

// Room sync_engine/pipelining_verdicts: what each origin was found to do
// with pipelined requests, kept for the life of the process, and how many
// answers came pipelined (the figures /metrics shows).

#include "sync_engine/pipelined_http.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace tributary::sync::pipelining {

// What each origin was found to do with pipelined requests, for the life
// of the process (a verdict of `broken` for a day): every run's
// PipelinedOrigin starts from it, so a server that drops pipelined requests
// costs one probe, not one a run.
enum class Verdict { unknown, works, broken };
struct Known {
  Verdict verdict = Verdict::unknown;
  std::string why;
  std::chrono::steady_clock::time_point at{};
  unsigned inconclusive = 0; // probes cut short by a close
  bool told = false;         // a `broken` verdict was logged (once: a day, every run of every source)
};
// The origin's verdict (a `broken` one older than a day is forgotten).
Known known(const std::string& origin);
// Records what a probe found; returns the origin's verdict now (three
// probes cut short by a close make it `broken`).
Verdict record(const std::string& origin, Verdict v, const std::string& why = {});
// True once for each `broken` verdict (so once per origin per day, however
// many runs and sources meet it): the caller logs it then.
bool first_telling(const std::string& origin);
// Counts answers taken from pipelined bursts.
void count_answered(uint64_t n);
// The answers counted, and the origins pipelining works with or is off for.
PipelineStats stats();

} // namespace tributary::sync::pipelining
