# ctest's installed_package: installs hfta from BUILD into a temporary
# prefix, builds tests/package (a program outside the repository) against
# it with find_package(hfta), and runs it on MODELS' members.
#   cmake -DBUILD=... -DSOURCE=... -DMODELS=... -P test_installed.cmake
string(RANDOM LENGTH 8 suffix)
set(base "$ENV{TMPDIR}")
if(NOT base)
  set(base /tmp)
endif()
set(work "${base}/hfta_package_${suffix}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    file(REMOVE_RECURSE "${work}")
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(output "${out}" PARENT_SCOPE)
  set(errors "${err}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${work}/prefix")
file(COPY "${SOURCE}/tests/package/" DESTINATION "${work}/app")
run(${CMAKE_COMMAND} -S "${work}/app" -B "${work}/app/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${work}/prefix")
run(${CMAKE_COMMAND} --build "${work}/app/build")

run("${work}/app/build/fuse_members" "${MODELS}/mlp_0.pt" "${MODELS}/mlp_1.pt" "${MODELS}/mlp_2.pt")
if(NOT output MATCHES "fused 3 members: output \\[3, 8, 10\\]")
  message(FATAL_ERROR "fuse_members said: ${output}")
endif()
message(STATUS "fuse_members: ${output}")

run(${CMAKE_COMMAND} -E env HFTA_LOG=1 "${work}/app/build/run_ensemble" "${MODELS}/ensemble_mlp_averaged_b5.pt")
if(NOT errors MATCHES "1 group\\(s\\) fused" OR NOT output MATCHES "ensemble output \\[8, 10\\]")
  message(FATAL_ERROR "run_ensemble said: ${output}${errors}")
endif()
message(STATUS "run_ensemble: ${output}")

# The installed hfta-fuse runs and names its runtime library, in the prefix.
run("${work}/prefix/bin/hfta-fuse" --print-library)
if(NOT output MATCHES "^${work}/prefix/lib")
  message(FATAL_ERROR "hfta-fuse --print-library: ${output}")
endif()
file(REMOVE_RECURSE "${work}")
message(STATUS "installed_package: OK")
