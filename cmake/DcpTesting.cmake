# dcp_add_gtest(NAME SOURCES... LIBS... LABELS... [TIMEOUT s])
# Builds one GoogleTest binary and registers its tests with ctest, with labels that say what the
# tests need (cpu, gpu, mpi, slow, properties). RC_TIER sets RapidCheck's case count through
# RC_PARAMS unless the caller's environment already sets RC_PARAMS (for replaying a failure).
include(GoogleTest)

set(DCP_RC_TIER "ci" CACHE STRING "RapidCheck tier for properties: quick, ci or nightly")
set_property(CACHE DCP_RC_TIER PROPERTY STRINGS quick ci nightly)
set(DCP_RC_SEED "" CACHE STRING "Fixed RapidCheck seed (empty: random, printed on every run)")

function(dcp_rc_params out_var tier)
  if(tier STREQUAL "quick")
    set(n 20)
  elseif(tier STREQUAL "ci")
    set(n 100)
  elseif(tier STREQUAL "nightly")
    set(n 2000)
  else()
    message(FATAL_ERROR "unknown RapidCheck tier '${tier}' (quick, ci, nightly)")
  endif()
  set(params "max_success=${n}")
  if(DCP_RC_SEED)
    string(APPEND params " seed=${DCP_RC_SEED}")
  endif()
  set(${out_var} "${params}" PARENT_SCOPE)
endfunction()

function(dcp_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${CMAKE_SOURCE_DIR}/tests/support/rc_main.cpp)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} rapidcheck_gtest rapidcheck GTest::gmock
                                        GTest::gtest dcp_warnings)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  # Labels go on the directory: gtest_discover_tests (PRE_TEST, CMake 3.25) loses the separators
  # of a list-valued test property, so each folder of tests holds tests with the same needs.
  set_property(DIRECTORY APPEND PROPERTY LABELS ${ARG_LABELS})
  set(props "")
  if(ARG_TIMEOUT)
    list(APPEND props TIMEOUT ${ARG_TIMEOUT})
  endif()
  dcp_rc_params(rc "${DCP_RC_TIER}")
  # The launcher keeps an RC_PARAMS given by the caller (reproduce=...) and otherwise uses the tier.
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    TEST_PREFIX "${name}."
    PROPERTIES ${props} ENVIRONMENT "DCP_RC_TIER_PARAMS=${rc}")
endfunction()
