# The CUDA architectures a pip build compiles when the caller chose none. Script-mode safe
# (`cmake -P`), so tests can run it with a stand-in nvidia-smi.
#
# The GPUs that nvidia-smi reports, when there are any of sm_80 or newer: a user installing on
# their own machine gets a build for that machine only (the kernels take minutes per
# architecture). Otherwise (no GPU visible, as on CI and most build hosts, or only older GPUs)
# every architecture the project compiles; the Hopper build adds sm_90a itself when present.
set(DUALKV_DEFAULT_CUDA_ARCHITECTURES 80 86 90)

function(dualkv_pick_cuda_architectures out_var)
  find_program(DUALKV_NVIDIA_SMI nvidia-smi)
  set(architectures "")
  if(DUALKV_NVIDIA_SMI)
    execute_process(
      COMMAND "${DUALKV_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
      OUTPUT_VARIABLE capabilities
      RESULT_VARIABLE query_result
      ERROR_QUIET)
    if(query_result EQUAL 0)
      string(REPLACE "\n" ";" capabilities "${capabilities}")
      foreach(capability IN LISTS capabilities)
        string(STRIP "${capability}" capability)
        if(capability MATCHES "^([0-9]+)\\.([0-9])$")
          math(EXPR architecture "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
          if(architecture GREATER_EQUAL 80)
            list(APPEND architectures ${architecture})
          endif()
        endif()
      endforeach()
      list(REMOVE_DUPLICATES architectures)
    endif()
  endif()
  if(NOT architectures)
    set(architectures ${DUALKV_DEFAULT_CUDA_ARCHITECTURES})
  endif()
  set(${out_var} "${architectures}" PARENT_SCOPE)
endfunction()
