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
tributary_check_layering(sync_engine FORBID "republisher/" "aggregator/" "common/http/" "store/pg/" "store/s3/")
# The store sits below the engine: it sees none of fetching and syncing.
tributary_check_layering(store FORBID "sync_engine/" "republisher/" "aggregator/" "common/http/")
# The republisher sees the store, nothing of the engine.
tributary_check_layering(republisher FORBID "aggregator/" "sync_engine/" "store/pg/" "store/s3/")
# The backends: the blob store knows no database and no bucket; the bucket
# tier reaches its index through store::ObjectIndex; PostgreSQL knows no
# blob store. Only aggregator/ (and tests, benchmarks) names pg/ and s3/.
tributary_check_layering(store/blob FORBID "store/pg/" "store/s3/")
tributary_check_layering(store/s3 FORBID "store/pg/")
tributary_check_layering(store/pg FORBID "store/blob/" "store/s3/")
# `tributary simulate` is a test tool: a fake Source and hub over the
# protocol, the HTTP server and the fetcher. The product library never
# includes it; only the CLI's main.cpp does.
tributary_check_layering(tools/simulate FORBID "aggregator/" "store/pg/" "store/s3/")
file(GLOB_RECURSE aggregator_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/aggregator/*.h ${PROJECT_SOURCE_DIR}/aggregator/*.cpp)
foreach(src IN LISTS aggregator_sources)
  if(NOT src MATCHES "/aggregator/main\\.cpp$")
    file(STRINGS ${src} named REGEX "^#include \"tools/")
    if(named)
      message(FATAL_ERROR "${src}: '${named}': the product library does not include tools/ (only main.cpp)")
    endif()
  endif()
endforeach()
# aggregator/ by job (README, "Architecture"): cli/ on top; the daemon wires
# the status API and the subscriber; the status API reads the daemon's state
# but never the daemon's wiring; the config and the subscriber see none of
# the rooms above them.
tributary_check_layering(aggregator/setup FORBID "aggregator/cli/" "aggregator/daemon/" "aggregator/status/" "aggregator/push/")
tributary_check_layering(aggregator/push FORBID "aggregator/cli/" "aggregator/daemon/" "aggregator/status/" "aggregator/setup/")
tributary_check_layering(aggregator/status FORBID "aggregator/cli/" "aggregator/push/" "aggregator/daemon/daemon.h")
tributary_check_layering(aggregator/daemon FORBID "aggregator/cli/")
foreach(module sync_engine republisher)
  file(STRINGS ${PROJECT_SOURCE_DIR}/${module}/CMakeLists.txt named REGEX "tributary_store_pg|tributary_s3")
  if(named)
    message(FATAL_ERROR "${module}/CMakeLists.txt links a storage backend (${named}): it sees store/ interfaces only")
  endif()
endforeach()

# Each third-party storage library is seen by one backend folder alone
# (README, "Architecture"): configure fails when a use of it appears
# anywhere else in the product.
#   tributary_confine(<regex> ONLY_UNDER <dir> NAME <what>)
set(tributary_product_dirs common resourcesync store sync_engine republisher aggregator tools)
function(tributary_confine regex)
  cmake_parse_arguments(ARG "" "ONLY_UNDER;NAME" "" ${ARGN})
  foreach(dir IN LISTS tributary_product_dirs)
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.h ${PROJECT_SOURCE_DIR}/${dir}/*.cpp)
    foreach(src IN LISTS sources)
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
      if(rel MATCHES "^${ARG_ONLY_UNDER}/")
        continue()
      endif()
      file(STRINGS ${src} hits REGEX "${regex}")
      if(hits)
        list(GET hits 0 first)
        message(FATAL_ERROR "${rel}: '${first}' uses ${ARG_NAME}, which only ${ARG_ONLY_UNDER}/ may see")
      endif()
    endforeach()
  endforeach()
endfunction()

tributary_confine("#include <pqxx|pqxx::" ONLY_UNDER store/pg NAME "libpqxx")
tributary_confine("#include <lmdb\\.h>|MDB_[a-z]|mdb_[a-z]" ONLY_UNDER store/blob NAME "LMDB")
tributary_confine("#include <curl/|curl_[a-z]|CURL[A-Z]*[ *]" ONLY_UNDER store/s3 NAME "libcurl")
