# ctest driver: runs dualkv_demo with ARGS ("|"-separated: a ;-list would not survive add_test)
# and requires exit code EXIT_CODE and stderr matching STDERR_REGEX, so a bad flag is proven to
# stop the demo with a message naming it; and stdout matching STDOUT_REGEX when one is given.
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(
  COMMAND "${DEMO}" ${ARGS}
  RESULT_VARIABLE exit_code
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT exit_code STREQUAL EXIT_CODE)
  message(FATAL_ERROR "dualkv_demo ${ARGS}: exit code ${exit_code}, expected ${EXIT_CODE}\n${out}\n${err}")
endif()
if(NOT err MATCHES "${STDERR_REGEX}")
  message(FATAL_ERROR "dualkv_demo ${ARGS}: stderr does not match '${STDERR_REGEX}':\n${err}")
endif()
if(DEFINED STDOUT_REGEX AND NOT out MATCHES "${STDOUT_REGEX}")
  message(FATAL_ERROR "dualkv_demo ${ARGS}: stdout does not match '${STDOUT_REGEX}':\n${out}")
endif()
