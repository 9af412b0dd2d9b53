#pragma once

// Headless Chromium (Debian's `chromium`) against a page we serve: the DOM
// once its scripts have run, or a screenshot.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../common/files.h"

namespace tributary::test {

inline const char* k_chromium = "chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage ";

// The DOM of `url` after `budget_ms` of virtual time, also left in `out`.
inline std::string chromium_dom(const std::string& url, const std::filesystem::path& out, int budget_ms) {
  const std::string cmd = std::string(k_chromium) + "--virtual-time-budget=" + std::to_string(budget_ms) +
                          " --dump-dom '" + url + "' > " + out.string() + " 2>/dev/null";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "chromium failed: is Debian's chromium installed?");
  return slurp(out);
}

// A screenshot of `url`, `width` × `height`, after `budget_ms` of virtual time.
inline void chromium_screenshot(const std::string& url, const std::filesystem::path& png, int width, int height,
                                int budget_ms) {
  const std::string cmd = std::string(k_chromium) + "--hide-scrollbars --virtual-time-budget=" +
                          std::to_string(budget_ms) + " --window-size=" + std::to_string(width) + "," +
                          std::to_string(height) + " --screenshot=" + png.string() + " '" + url + "' >/dev/null 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "chromium failed: is Debian's chromium installed?");
}

} // namespace tributary::test
