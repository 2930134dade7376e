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

# LibTorch's headers dominate compile time on a two-core machine; every
# target precompiles them once. Installed, a target links hfta::libtorch
# instead (made by hftaConfig.cmake: the same wheel's LibTorch).
function(hfta_use_torch target)
  foreach(library ${TORCH_LIBRARIES})
    target_link_libraries(${target} PUBLIC "$<BUILD_INTERFACE:${library}>")
  endforeach()
  target_link_libraries(${target} PUBLIC "$<INSTALL_INTERFACE:hfta::libtorch>")
  target_include_directories(${target} BEFORE PUBLIC "$<BUILD_INTERFACE:${HFTA_FMT_INCLUDE}>")
  target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<torch/script.h$<ANGLE-R>>")
endfunction()
