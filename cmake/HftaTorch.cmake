# LibTorch comes from the pinned torch wheel in the project's virtual
# environment, so the C++ side and the Python oracle are the same build.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
  OUTPUT_VARIABLE _hfta_torch_info OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _hfta_torch_rc)
if(NOT _hfta_torch_rc EQUAL 0)
  message(FATAL_ERROR "hfta: cannot import torch with ${Python3_EXECUTABLE}; run scripts/setup.sh first")
endif()
string(REPLACE "\n" ";" _hfta_torch_info "${_hfta_torch_info}")
list(GET _hfta_torch_info 0 _hfta_torch_prefix)
list(GET _hfta_torch_info 1 HFTA_TORCH_VERSION)
list(GET _hfta_torch_info 2 HFTA_TORCH_ABI)
get_filename_component(HFTA_TORCH_ROOT "${_hfta_torch_prefix}/../.." ABSOLUTE)
list(APPEND CMAKE_PREFIX_PATH "${_hfta_torch_prefix}")
if(HFTA_WITH_CUDA)
  # Torch reads its own arch list; keep it in step with CMAKE_CUDA_ARCHITECTURES.
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  find_package(Torch REQUIRED)
else()
  # The wheel is a CUDA build, and its CMake config stops when it finds no
  # CUDA toolkit. Without one, link the wheel's libraries directly; their
  # CUDA dependencies come from the wheel's own nvidia packages at run time.
  # (This is the one place where how LibTorch is found differs.)
  add_library(hfta_libtorch INTERFACE)
  target_include_directories(hfta_libtorch SYSTEM INTERFACE
    ${HFTA_TORCH_ROOT}/include ${HFTA_TORCH_ROOT}/include/torch/csrc/api/include)
  target_link_libraries(hfta_libtorch INTERFACE
    ${HFTA_TORCH_ROOT}/lib/libtorch.so ${HFTA_TORCH_ROOT}/lib/libtorch_cpu.so ${HFTA_TORCH_ROOT}/lib/libc10.so)
  target_compile_definitions(hfta_libtorch INTERFACE _GLIBCXX_USE_CXX11_ABI=${HFTA_TORCH_ABI})
  set(TORCH_LIBRARIES hfta_libtorch)
endif()
message(STATUS "hfta: LibTorch ${HFTA_TORCH_VERSION} from ${_hfta_torch_prefix}")

# LibTorch's headers dominate compile time on a two-core machine (45 s and
# 590 MB a .gch). They are precompiled once per set of flags that changes
# them, not once per target: once for position-independent code (the
# shared libraries and what goes into them) and once without (the tools and
# tests). hfta_torch_pch(target) gives a target one of the two; a target
# whose flags change the headers otherwise (the runtime's -fopenmp defines
# _OPENMP, which ATen tests) says OWN and compiles its own. Installed, a
# target links hfta::libtorch instead (made by hftaConfig.cmake: the same
# wheel's LibTorch).
function(hfta_use_torch target)
  foreach(library ${TORCH_LIBRARIES})
    target_link_libraries(${target} PUBLIC "$<BUILD_INTERFACE:${library}>")
  endforeach()
  target_link_libraries(${target} PUBLIC "$<INSTALL_INTERFACE:hfta::libtorch>")
  target_include_directories(${target} BEFORE PUBLIC "$<BUILD_INTERFACE:${HFTA_FMT_INCLUDE}>")
  hfta_torch_pch(${target} ${ARGN})
endfunction()

# Which of the two a target gets depends on POSITION_INDEPENDENT_CODE, which
# a later directory may still set (python/ does, for the static libraries
# its module links), so the choice waits for the end of the configure.
function(hfta_torch_pch target)
  if("${ARGN}" STREQUAL "OWN")
    target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<torch/script.h$<ANGLE-R>>")
    return()
  endif()
  get_property(targets GLOBAL PROPERTY HFTA_TORCH_PCH_TARGETS)
  if(NOT targets)
    cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _hfta_share_torch_pch)
  endif()
  set_property(GLOBAL APPEND PROPERTY HFTA_TORCH_PCH_TARGETS ${target})
endfunction()

function(_hfta_share_torch_pch)
  set(source ${CMAKE_BINARY_DIR}/hfta_torch_pch.cpp)
  # (CONFIGURE writes only when the text changes: no rebuild per configure)
  file(CONFIGURE OUTPUT ${source}
    CONTENT "// LibTorch's precompiled headers are built with this file (cmake/HftaTorch.cmake).\n")
  foreach(pic ON OFF)
    set(owner hfta_torch_pch_pic_${pic})
    add_library(${owner} OBJECT ${source})
    set_target_properties(${owner} PROPERTIES POSITION_INDEPENDENT_CODE ${pic})
    hfta_use_torch(${owner} OWN)
  endforeach()
  get_property(targets GLOBAL PROPERTY HFTA_TORCH_PCH_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    if(type MATCHES "SHARED_LIBRARY|MODULE_LIBRARY" OR pic)
      target_precompile_headers(${target} REUSE_FROM hfta_torch_pch_pic_ON)
    else()
      target_precompile_headers(${target} REUSE_FROM hfta_torch_pch_pic_OFF)
    endif()
  endforeach()
endfunction()
