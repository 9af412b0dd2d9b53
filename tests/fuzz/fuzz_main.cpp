// One libFuzzer executable per target: FUZZ_TARGET names it.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tributary::fuzz::FUZZ_TARGET(data, size);
}
