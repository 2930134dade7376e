# LibTorch comes from the pinned torch wheel in the project's virtual
# environment, so the C++ side and the Python oracle are the same build.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__)"
  OUTPUT_VARIABLE _hfta_torch_info OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _hfta_torch_rc)
if(NOT _hfta_torch_rc EQUAL 0)
  message(FATAL_ERROR "hfta: cannot import torch with ${Python3_EXECUTABLE}; run scripts/setup.sh first")
endif()
string(REPLACE "\n" ";" _hfta_torch_info "${_hfta_torch_info}")
list(GET _hfta_torch_info 0 _hfta_torch_prefix)
list(GET _hfta_torch_info 1 HFTA_TORCH_VERSION)
list(APPEND CMAKE_PREFIX_PATH "${_hfta_torch_prefix}")
if(NOT HFTA_WITH_CUDA)
  # A CUDA build of torch must not go looking for a toolkit we do not have.
  set(CAFFE2_USE_CUDNN OFF)
endif()
# Torch reads its own arch list; keep it in step with CMAKE_CUDA_ARCHITECTURES.
set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
find_package(Torch REQUIRED)
message(STATUS "hfta: LibTorch ${HFTA_TORCH_VERSION} from ${_hfta_torch_prefix}")

# LibTorch's headers dominate compile time on a two-core machine; every
# target precompiles them once.
function(hfta_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  target_include_directories(${target} BEFORE PUBLIC ${HFTA_FMT_INCLUDE})
  target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<torch/script.h$<ANGLE-R>>")
endfunction()
