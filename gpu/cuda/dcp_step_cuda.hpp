// dcp_step_cuda.hpp — one DCP decode step of one TP rank on a GPU (the CUDA backend of
// dcp_step.hpp, same inputs, same outputs, same math).
//
// The rank replays the KV writes into its device cache (launch_kv_write), takes its queries
// (AllGather over the device communicator, or replicated), runs the partial attention kernel,
// combines by ag_rs (LSE AllGather, scale kernel, ReduceScatter) or a2a (pack kernel,
// All-to-All, combine kernel), rounds to out_dtype, and copies O, LSE and its partial back to
// the host for judging.
//
//   Result<RankStepOutput> r = cuda_run_tp_rank(comm, inputs, cfg, tp_rank);
#pragma once

#include <cstdint>

#include "gpu/cuda/device_comm.hpp"
#include "gpu/dcp_step.hpp"

namespace dcp::gpu {

// comm must be the rank's DCP-group communicator (size N, rank tp_rank mod N); the step runs
// on comm.device() and comm.stream().
Result<RankStepOutput> cuda_run_tp_rank(DeviceCommunicator& comm, const DcpInputs& in,
                                        const DcpConfig& cfg, int64_t tp_rank);

}  // namespace dcp::gpu
