# dcp_shipped(TARGET): TARGET is a binary that ships to machines without our packages: the wheel's
# (dcp-verify, the extension module, the bridge plug-in; tools/wheel) and the GPU bundle's
# (dcp-verify, cuda_backend, bench_dcp_cuda; tools/gpu-bundle). In the release build
# (DCP_STATIC_DEPS) it carries the arc4random that keeps it within glibc 2.34
# (cmake/shipping/arc4random.cpp); elsewhere nothing changes.
function(dcp_shipped target)
  if(DCP_STATIC_DEPS)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/shipping/arc4random.cpp)
  endif()
endfunction()
