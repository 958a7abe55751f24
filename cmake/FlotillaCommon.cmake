# The build settings every Flotilla entry point shares: the top-level CMakeLists.txt and the
# worker-only GPU build (worker/gpu-check/CMakeLists.txt) include this after project().
#
# Sets: C++20 without extensions, position-independent code, ccache as compiler launcher when
# found, CUDA when nvcc is found (FLOTILLA_CUDA, sm_90 unless CMAKE_CUDA_ARCHITECTURES is set,
# CUDAToolkit found), the flotilla_warnings interface target (FLOTILLA_WERROR makes them
# errors), and FLOTILLA_DEFAULT_DATA_DIR (the shared measured data beside the repository).
# Assumes: FLOTILLA_ROOT_DIR is the repository root.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()

# CUDA is optional: the GPU backend of the worker compiles wherever nvcc is found,
# and everything else builds and tests without it.
include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
# option() wants a boolean: a compiler path as its default reads as OFF.
if(CMAKE_CUDA_COMPILER)
  set(flotilla_cuda_default ON)
else()
  set(flotilla_cuda_default OFF)
endif()
option(FLOTILLA_CUDA "Build the CUDA/NCCL backend" ${flotilla_cuda_default})
if(FLOTILLA_CUDA AND CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit)
else()
  set(FLOTILLA_CUDA OFF)
endif()

find_package(Threads REQUIRED)

option(FLOTILLA_WERROR "Treat warnings as errors" OFF)
add_library(flotilla_warnings INTERFACE)
target_compile_options(flotilla_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FLOTILLA_WERROR}>>:-Werror>)

# Where the shared measured data lives unless FLOTILLA_DATA says otherwise.
set(FLOTILLA_DEFAULT_DATA_DIR "${FLOTILLA_ROOT_DIR}/../shared/data")
