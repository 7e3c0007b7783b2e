// device_headers_check.cu — compiles the headers the CUDA backend will share with the host
// backend (layout, merge math, conventions, storage formats) as device code, so a change that
// makes them host-only fails the build wherever nvcc is present. Nothing here is launched.
#include "gpu/convention.hpp"
#include "gpu/dtype.hpp"
#include "gpu/layout.hpp"
#include "gpu/merge.hpp"

namespace dcp::gpu {

// One thread per position: owner/row/position round trip, count, a merge and a rounding.
__global__ void DeviceHeadersCheckKernel(DcpLayout lay, int64_t n, int64_t* bad, float* out) {
  const int64_t pos = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (pos >= n) return;
  const int64_t r = lay.owner(pos);
  if (lay.position(r, lay.row(pos)) != pos || lay.count(r, pos + 1) != lay.row(pos) + 1) *bad = pos;
  MergeAcc a = MergeAcc::from_partial(1.0f), b = MergeAcc::from_partial(kEmptyLseF);
  float na = 2.0f, nb = 0.0f;
  merge_into(LseBase::two, a, &na, b, &nb, 1);
  out[pos] = round_to(Dtype::bf16, finish(LseBase::two, a, &na, 1) + na);
}

}  // namespace dcp::gpu
