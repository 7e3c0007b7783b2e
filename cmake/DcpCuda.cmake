# CUDA is tri-state. AUTO enables it when nvcc is found; ON requires it; OFF never looks.
# Architectures default to sm_90 (H100/H200) plus PTX for forward compatibility; never `native`,
# which fails on machines without a GPU.
set(DCP_HAVE_CUDA OFF)
if(NOT DCP_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
    endif()
    enable_language(CUDA)
    # The kernels are C++17 (gpu/cuda/kernels.hpp). CMake 3.25 knows no C++20 flag for nvcc 13:
    # a CUDA standard of 20 on a target fails its file-API code model (scikit-build-core's
    # configure of the Python package) though the build itself never asks for it.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(DCP_HAVE_CUDA ON)
  elseif(DCP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DCP_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()
message(STATUS "dcp-verify: CUDA backend ${DCP_HAVE_CUDA} (DCP_CUDA=${DCP_CUDA})")
