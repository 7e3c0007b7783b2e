# One INTERFACE target that carries the project's warning flags; every target links it.
add_library(dcp_warnings INTERFACE)
target_compile_options(dcp_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                            -Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
# g++ 12 at -O3 (Release) reports a -Wrestrict overlap inside std::string's own memcpy that cannot
# happen (GCC bug 105329, fixed in 13); only that diagnostic is silenced, only there.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(dcp_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
