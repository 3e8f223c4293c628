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

file(GLOB_RECURSE DUALKV_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu ${PROJECT_SOURCE_DIR}/src/cuda/*.cpp)
target_sources(dualkv PRIVATE ${DUALKV_CUDA_SOURCES})
target_include_directories(dualkv SYSTEM PRIVATE ${DUALKV_CUTLASS_INCLUDE_DIR})
target_compile_definitions(dualkv PUBLIC DUALKV_WITH_CUDA)
target_link_libraries(dualkv PUBLIC CUDA::cudart)
target_compile_options(dualkv PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills>)
set_target_properties(dualkv PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
