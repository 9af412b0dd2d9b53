# Dependencies point downward only (README, "Architecture"). Folders alone do
# not enforce that, so configure fails on an include that points upward.
#   tributary_check_layering(<module dir> FORBID <prefix>...)
function(tributary_check_layering dir)
  cmake_parse_arguments(ARG "" "" "FORBID" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.h ${PROJECT_SOURCE_DIR}/${dir}/*.cpp)
  foreach(src IN LISTS sources)
    file(STRINGS ${src} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      foreach(prefix IN LISTS ARG_FORBID)
        if(line MATCHES "^#include \"${prefix}")
          message(FATAL_ERROR "${src}: '${line}' points upward (${dir}/ must not include ${prefix}...)")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()

tributary_check_layering(common FORBID "resourcesync/" "store/" "sync_engine/" "republisher/" "aggregator/")
# The HTTP server (common/http/) serves the republisher and the daemon; the
# protocol and the engine have no business with it.
tributary_check_layering(resourcesync FORBID "store/" "sync_engine/" "republisher/" "aggregator/" "common/http/")
tributary_check_layering(sync_engine FORBID "republisher/" "aggregator/" "common/http/")
# The store sits below the engine: it sees none of fetching and syncing.
tributary_check_layering(store FORBID "sync_engine/" "republisher/" "aggregator/" "common/http/")
# The republisher sees the store, nothing of the engine.
tributary_check_layering(republisher FORBID "aggregator/" "sync_engine/")
