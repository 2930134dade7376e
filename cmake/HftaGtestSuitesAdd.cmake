# Run by hfta_gtest_suites (HftaGtestSuites.cmake) after a test executable
# builds: lists its suites and writes one ctest test for each into OUTPUT.
#   cmake -D EXECUTABLE=... -D SETTINGS=... -D OUTPUT=... -P HftaGtestSuitesAdd.cmake
include(${SETTINGS})  # FILTER, PROPERTIES_TEXT
set(filter_arg)
set(excluded)  # the filter's negative part, kept in each suite's filter
if(FILTER)
  set(filter_arg --gtest_filter=${FILTER})
  if(FILTER MATCHES "-(.*)$")
    set(excluded "-${CMAKE_MATCH_1}")
  endif()
endif()
execute_process(COMMAND ${EXECUTABLE} --gtest_list_tests ${filter_arg}
  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE result TIMEOUT 60)
if(NOT result EQUAL 0)
  file(REMOVE ${OUTPUT})
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests failed (${result}):\n${listing}${errors}")
endif()
set(script)
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  # A suite's line starts in column one: "Suite." or "Suite.  # TypeParam = ..."
  if(line MATCHES "^([^ #][^ ]*)\\.")
    set(suite ${CMAKE_MATCH_1})
    string(APPEND script "add_test([==[${suite}]==] [==[${EXECUTABLE}]==] [==[--gtest_filter=${suite}.*${excluded}]==])\n"
                         "set_tests_properties([==[${suite}]==] PROPERTIES${PROPERTIES_TEXT})\n")
  endif()
endforeach()
file(WRITE ${OUTPUT} "${script}")
