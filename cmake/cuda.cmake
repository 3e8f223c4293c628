# CUDA build of dualkv: kernels under src/cuda, CuTe/CUTLASS headers from the nvidia-cutlass
# Python package (cutlass_library/source/include) unless DUALKV_CUTLASS_INCLUDE_DIR is given.
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 86 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

set(DUALKV_CUTLASS_INCLUDE_DIR "" CACHE PATH "Folder holding cute/ and cutlass/ headers")
if(NOT DUALKV_CUTLASS_INCLUDE_DIR)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
      "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
    OUTPUT_VARIABLE DUALKV_CUTLASS_INCLUDE_DIR
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE cutlass_found)
  if(NOT cutlass_found EQUAL 0)
    message(FATAL_ERROR "CuTe headers not found: pip install nvidia-cutlass, or set DUALKV_CUTLASS_INCLUDE_DIR")
  endif()
endif()
if(NOT EXISTS "${DUALKV_CUTLASS_INCLUDE_DIR}/cute/tensor.hpp")
  message(FATAL_ERROR "DUALKV_CUTLASS_INCLUDE_DIR=${DUALKV_CUTLASS_INCLUDE_DIR} holds no cute/tensor.hpp")
endif()
message(STATUS "dualkv: CuTe/CUTLASS headers from ${DUALKV_CUTLASS_INCLUDE_DIR}")

# Source list per kernel family. Portable (sm80) kernels, the shared code and the entry points
# compile for every architecture in CMAKE_CUDA_ARCHITECTURES; the Hopper family (src/cuda/sm90)
# only for sm_90a, in its own object library: wgmma and setmaxnreg exist on sm_90a alone, and the
# explicit -gencode form is used because nvcc 13.0's -arch=sm_90a shorthand also ran a plain
# sm_90 pass that rejects them.
file(GLOB_RECURSE DUALKV_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu ${PROJECT_SOURCE_DIR}/src/cuda/*.cpp)
file(GLOB_RECURSE DUALKV_SM90_KERNEL_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/sm90/*.cu)
file(GLOB_RECURSE DUALKV_SM90_HOST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/sm90/*.cpp)
list(REMOVE_ITEM DUALKV_CUDA_SOURCES ${DUALKV_SM90_KERNEL_SOURCES} ${DUALKV_SM90_HOST_SOURCES})
target_sources(dualkv PRIVATE ${DUALKV_CUDA_SOURCES})
# The dualkv target exists before this file runs, so it did not see the default set above.
set_target_properties(dualkv PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")

set(dualkv_cuda_flags --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills)
string(REGEX MATCH "(^|;)90" dualkv_builds_sm90 "${CMAKE_CUDA_ARCHITECTURES}")
option(DUALKV_ENABLE_HOPPER "Build the Hopper (sm_90a) kernels when CUDA architecture 90 is selected" ON)
if(DUALKV_ENABLE_HOPPER AND dualkv_builds_sm90)
  message(STATUS "dualkv: Hopper kernels (sm_90a) enabled")
  add_library(dualkv_sm90 OBJECT ${DUALKV_SM90_KERNEL_SOURCES})
  set_target_properties(dualkv_sm90 PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON)
  target_include_directories(dualkv_sm90 PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_include_directories(dualkv_sm90 SYSTEM PRIVATE ${DUALKV_CUTLASS_INCLUDE_DIR})
  target_compile_definitions(dualkv_sm90 PRIVATE DUALKV_WITH_CUDA DUALKV_WITH_SM90)
  target_compile_options(dualkv_sm90 PRIVATE ${dualkv_cuda_flags} -gencode=arch=compute_90a,code=sm_90a)
  target_sources(dualkv PRIVATE $<TARGET_OBJECTS:dualkv_sm90> ${DUALKV_SM90_HOST_SOURCES})
  target_compile_definitions(dualkv PUBLIC DUALKV_WITH_SM90)
endif()
target_include_directories(dualkv SYSTEM PRIVATE ${DUALKV_CUTLASS_INCLUDE_DIR})
target_compile_definitions(dualkv PUBLIC DUALKV_WITH_CUDA)
target_link_libraries(dualkv PUBLIC CUDA::cudart)
target_compile_options(dualkv PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${dualkv_cuda_flags}>)
set_target_properties(dualkv PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
