# Read by ctest after the discovered tests (tests/CMakeLists.txt): the
# longest integration tests get a COST, which `ctest -j` starts first, so
# that none is left running alone at the end. On a clean clone ctest has no
# timings of its own and runs tests in order: CI's Stalls test (153 s)
# started 28 tests from the end and ran its last 55 s beside an idle slot.
foreach(t IN LISTS integration_tests_TESTS)
  if(t MATCHES "Stalls: beside four|History randomized|Operator view: quiet|OAI hostile: after a 30 s|Status page: 200 sources|Database outage: 35 s")
    set_tests_properties("${t}" PROPERTIES COST 1000)
  endif()
endforeach()
