# hfta_gtest_suites(target [FILTER expr] PROPERTIES ...): one ctest test
# per GoogleTest suite of `target` (a parameterized suite's instantiation,
# e.g. VisionNetworks/FusionEquivalence, is one), found after each build as
# gtest_discover_tests finds tests, each run as `target
# --gtest_filter=<suite>.*`, with PROPERTIES on every one.
#
# Why suites, not tests: each process first loads LibTorch (0.4 s of CPU
# on these machines, more under ctest -j), and one ctest test per
# GoogleTest test started 720 of them, a fifth of the suite's time.
# FILTER (a --gtest_filter) leaves out the tests it excludes.
set(_hfta_gtest_suites_script ${CMAKE_CURRENT_LIST_DIR}/HftaGtestSuitesAdd.cmake)

function(hfta_gtest_suites target)
  set(filter)
  set(properties)  # as set_tests_properties' text, each argument bracketed
  set(next)
  foreach(i RANGE 1 ${ARGC})
    if(i EQUAL ARGC)
      break()
    endif()
    # ARGV<i>, not a parsed list: ENVIRONMENT's "A=1;B=2" stays one value.
    set(item "${ARGV${i}}")
    if(next STREQUAL "FILTER")
      set(filter "${item}")
      set(next)
    elseif(item STREQUAL "FILTER" AND NOT next STREQUAL "PROPERTIES")
      set(next FILTER)
    elseif(item STREQUAL "PROPERTIES")
      set(next PROPERTIES)
    else()
      string(APPEND properties " [==[${item}]==]")
    endif()
  endforeach()
  set(base ${CMAKE_CURRENT_BINARY_DIR}/${target})
  set(tests_file ${base}_suites.cmake)
  file(WRITE ${base}_suites_settings.cmake
    "set(FILTER [====[${filter}]====])\nset(PROPERTIES_TEXT [====[${properties}]====])\n")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXECUTABLE=$<TARGET_FILE:${target}> -D SETTINGS=${base}_suites_settings.cmake
            -D OUTPUT=${tests_file} -P ${_hfta_gtest_suites_script}
    BYPRODUCTS ${tests_file} VERBATIM)
  file(WRITE ${base}_suites_include.cmake
    "if(EXISTS [==[${tests_file}]==])\n  include([==[${tests_file}]==])\n"
    "else()\n  add_test([==[${target}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${base}_suites_include.cmake)
endfunction()
