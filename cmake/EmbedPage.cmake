# Compiles the status page (aggregator/status/page/status.html, with its
# status.css and its scripts common.js, list.js and detail.js, in that order,
# put in place of @STYLE@ and @SCRIPT@) into a C++
# source, so the binary serves one self-contained page. Called as:
#   cmake -DOUT=file.cpp -DDIR=aggregator/status/page -P EmbedPage.cmake
file(READ "${DIR}/status.html" page)
file(READ "${DIR}/status.css" style)
set(script "")
foreach(part common list detail)
  file(READ "${DIR}/${part}.js" text)
  string(APPEND script "${text}")
endforeach()
string(REPLACE "@STYLE@" "${style}" page "${page}")
string(REPLACE "@SCRIPT@" "${script}" page "${page}")
string(FIND "${page}" ")tributary_page\"" bad)
if(NOT bad EQUAL -1)
  message(FATAL_ERROR "the status page contains the raw string delimiter")
endif()
set(content "// Generated from aggregator/status/page/ by cmake/EmbedPage.cmake. Do not edit.\n")
string(APPEND content "#include \"aggregator/status/page.h\"\n\nnamespace tributary::agg {\n\n")
string(APPEND content "std::string_view status_page_html() {\n")
string(APPEND content "  static constexpr std::string_view k_page = R\"tributary_page(${page})tributary_page\";\n")
string(APPEND content "  return k_page;\n}\n\n} // namespace tributary::agg\n")
file(WRITE "${OUT}.tmp" "${content}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
