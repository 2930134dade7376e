# A fresh clone (CI's, a second worktree) builds everything again, and on a
# two-core machine that is 13 minutes, much of it LibTorch's precompiled
# headers (three 590 MB .gch: cmake/HftaTorch.cmake) and nvcc. Where
# ccache is installed (scripts/setup.sh installs it), every compile goes
# through it, so a clone that builds what another clone built takes the
# objects from the cache.
#  - CCACHE_BASEDIR: paths under the source tree are hashed relative to the
#    build directory, so clones in other folders hit the same entries;
#  - CCACHE_SLOPPINESS: what ccache's manual asks for precompiled headers
#    (pch_defines, time_macros), and mtimes that a fresh checkout makes new;
#  - CCACHE_MAXSIZE: each precompiled header is hundreds of MB in the cache,
#    and ccache cleans each of its 16 folders at a 16th of the size, so at
#    the default 5 GB a folder that drew four of them evicted one.
# What it does not speed up: a build folder that already holds a target's
# .gch. CMake compiles the header with `-include` of itself, so ccache
# hashes the .gch found there into that compile, and a new one changes
# every object's hash after it (a build folder made before ccache rebuilt
# everything once, with two hits in 125). Fresh folders find none.
# -DHFTA_CCACHE=OFF builds without it.
option(HFTA_CCACHE "Compile through ccache when it is installed" ON)
if(HFTA_CCACHE)
  find_program(HFTA_CCACHE_PROGRAM ccache)
  if(HFTA_CCACHE_PROGRAM)
    set(_hfta_ccache ${CMAKE_COMMAND} -E env "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}"
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime" CCACHE_MAXSIZE=16G
      ${HFTA_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_hfta_ccache})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_hfta_ccache})
    message(STATUS "hfta: compiling through ${HFTA_CCACHE_PROGRAM}")
  endif()
endif()
