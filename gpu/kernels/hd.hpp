// hd.hpp — DCP_HD marks functions callable from host and device code.
//
// Headers that the CUDA backend shares with the host backend (layout, merge math, numeric
// formats) mark their functions DCP_HD, so g++ and nvcc compile the same source and CI on CPUs
// tests the code the kernels run.
//
//   DCP_HD constexpr int64_t owner(int64_t pos) const { ... }
#pragma once

#if defined(__CUDACC__)
#define DCP_HD __host__ __device__
#else
#define DCP_HD
#endif
