# Injected by pip builds (pyproject.toml) as CMAKE_PROJECT_dualkv_INCLUDE, i.e. right after
# project(dualkv) and before the root CMakeLists declares DUALKV_ENABLE_CUDA. Decides it when the
# caller did not: the CUDA kernels are built exactly when nvcc exists and the installed torch is
# a CUDA build, since only then can the extension run them. An explicit value (set by
# pyproject.toml from the environment variable DUALKV_CUDA, or by -C cmake.define) wins.
if(NOT DEFINED DUALKV_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  find_package(Python COMPONENTS Interpreter REQUIRED)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c "import torch; print(torch.version.cuda or '')"
    OUTPUT_VARIABLE dualkv_torch_cuda_version
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(CMAKE_CUDA_COMPILER AND dualkv_torch_cuda_version)
    set(dualkv_cuda_default ON)
  else()
    set(dualkv_cuda_default OFF)
  endif()
  message(STATUS "dualkv: nvcc '${CMAKE_CUDA_COMPILER}', torch CUDA '${dualkv_torch_cuda_version}'"
                 " -> DUALKV_ENABLE_CUDA=${dualkv_cuda_default} (set DUALKV_CUDA=0/1 to choose)")
  set(DUALKV_ENABLE_CUDA ${dualkv_cuda_default} CACHE BOOL "Build the CUDA kernels")
endif()

# The architectures must be known before the root CMakeLists creates the dualkv target, whose
# CUDA_ARCHITECTURES property is initialised then: torch's CMake package later resets
# CMAKE_CUDA_ARCHITECTURES to OFF, and CUDAARCHS only applies at enable_language(CUDA), after the
# target exists. An explicit -C cmake.define.CMAKE_CUDA_ARCHITECTURES=... wins, then CUDAARCHS.
if(DUALKV_ENABLE_CUDA AND NOT CMAKE_CUDA_ARCHITECTURES)
  if(DEFINED ENV{CUDAARCHS})
    set(dualkv_cuda_architectures "$ENV{CUDAARCHS}")
  else()
    include(${CMAKE_CURRENT_LIST_DIR}/cuda_architectures.cmake)
    dualkv_pick_cuda_architectures(dualkv_cuda_architectures)
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${dualkv_cuda_architectures}" CACHE STRING "CUDA architectures to compile")
  message(STATUS "dualkv: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES} (set CUDAARCHS or "
                 "-C cmake.define.CMAKE_CUDA_ARCHITECTURES=... to choose)")
endif()
