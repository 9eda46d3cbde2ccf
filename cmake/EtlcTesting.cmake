include(GoogleTest)

# etlc_add_test(<name> SOURCES ... [LIBS ...] [LABELS ...])
# One GoogleTest executable; every TEST / RC_GTEST_PROP becomes its own ctest test.
function(etlc_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE etlc::coordination etlc_project_options
                        GTest::gtest GTest::gmock GTest::gtest_main rapidcheck_gtest rapidcheck
                        ${T_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}")
endfunction()
