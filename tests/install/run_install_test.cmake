# cmake -P script behind the install_consumer test (see CMakeLists.txt for its -D inputs).
cmake_minimum_required(VERSION 3.25)

foreach(var ETLC_BUILD_DIR ETLC_LIBRARY CONSUMER_SOURCE_DIR WORK_DIR CONSUMER_GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${step} failed (${rc})\n${out}\n${err}")
  endif()
  string(STRIP "${out}" out)
  message(STATUS "install test: ${step}: ok ${out}")
endfunction()

if(NOT EXISTS "${ETLC_LIBRARY}")
  run("build etlc_coordination" ${CMAKE_COMMAND} --build "${ETLC_BUILD_DIR}"
      --target etlc_coordination)
endif()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Only the library package: other components (tools) need not be built for this test.
set(install_args --install "${ETLC_BUILD_DIR}" --prefix "${prefix}" --component etlc_development)
if(CONSUMER_BUILD_TYPE)
  list(APPEND install_args --config "${CONSUMER_BUILD_TYPE}")
endif()
run("cmake --install into ${prefix}" ${CMAKE_COMMAND} ${install_args})

foreach(installed include/etlc/store.hpp include/etlc/memory_store.hpp)
  if(NOT EXISTS "${prefix}/${installed}")
    message(FATAL_ERROR "install test: ${installed} was not installed under ${prefix}")
  endif()
endforeach()

# A library built with sanitizers needs them at the consumer's link too.
set(flags "")
if(ETLC_SANITIZE)
  set(flags "-fsanitize=${ETLC_SANITIZE} -fno-omit-frame-pointer")
endif()
set(configure_args -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}" -G "${CONSUMER_GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_FLAGS=${flags}"
    "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
if(CONSUMER_CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CONSUMER_CXX_COMPILER}")
endif()
if(CONSUMER_C_COMPILER)
  list(APPEND configure_args "-DCMAKE_C_COMPILER=${CONSUMER_C_COMPILER}")
endif()
if(CONSUMER_BUILD_TYPE)
  list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${CONSUMER_BUILD_TYPE}")
endif()
run("configure the consumer" ${CMAKE_COMMAND} ${configure_args})
run("build the consumer" ${CMAKE_COMMAND} --build "${consumer_build}")
run("run the consumer" "${consumer_build}/etlc_consumer")
