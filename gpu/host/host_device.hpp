// host_device.hpp — the host backend: device_step.hpp's Device in host memory, each kernel's
// body (bodies.hpp) run block by block on the calling thread, the collectives through any
// Communicator (threads or MPI). It runs the code the CUDA kernels run; only the hardware
// differs. An attention block is one thread that owns all Dv output components (HostBlock), so
// the host has none of the CUDA kernel's limits on Dv, shared memory or splits, and its merge
// kernels hold kMaxHostRanks ranks.
//
//   HostDevice dev(comm);
//   Result<RankStepOutput> r = device_step(dev, inputs, cfg, tp_rank);   // or run_tp_rank
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gpu/comm/communicator.hpp"
#include "gpu/dcp_step.hpp"
#include "gpu/device_step.hpp"
#include "gpu/kernels/bodies.hpp"

namespace dcp::gpu {

// The largest DCP group the host device merges: --dcp-size's cap (tools/flags.hpp).
inline constexpr int kMaxHostRanks = 1024;

// An attention block of one thread: barriers are no-ops, the block max is the thread's own, and
// the thread accumulates all Dv components in the block's storage.
class HostBlock {
 public:
  explicit HostBlock(int64_t v_dim) : acc_(static_cast<size_t>(v_dim > 0 ? v_dim : 1)) {}
  int tid() const { return 0; }
  int size() const { return 1; }
  void sync() {}
  float max(float v) const { return v; }
  int64_t v_slots(int64_t v_dim) const { return v_dim; }
  float* accumulators(float*) { return acc_.data(); }

 private:
  std::vector<float> acc_;
};

class HostDevice {
 public:
  template <class T>
  using Buffer = std::vector<T>;
  using Schedule = ReduceScheduleOf<kMaxHostRanks>;

  // comm: the rank's DCP-group communicator; nullptr for a device that only builds caches.
  // stop: polled between the attention's rows (DcpConfig::stop); empty: never.
  explicit HostDevice(Communicator* comm, std::function<bool()> stop = {})
      : comm_(comm), stop_(std::move(stop)) {}

  int64_t rank() const { return comm_ != nullptr ? comm_->rank() : 0; }
  int64_t size() const { return comm_ != nullptr ? comm_->size() : 1; }
  template <class T>
  Result<Buffer<T>> alloc(size_t n) {
    return Buffer<T>(n, T{});
  }
  template <class T>
  Result<Buffer<T>> upload(const std::vector<T>& host) {
    return host;
  }
  template <class T>
  Result<Buffer<T>> upload(std::vector<T>&& host) {  // host memory already: no copy
    return std::move(host);
  }
  template <class T>
  Result<std::vector<T>> download(const Buffer<T>& b) {
    return b;
  }
  GpuStatus sync() { return {}; }
  GpuStatus copy_rows(const RowCopy& c);
  GpuStatus kv_write(const body::KvWrite& a);
  GpuStatus partial_attention(const PartialAttentionParams& p);
  // partial_attention's first kernel: every (token, head, split) block of p into the split
  // partials split_o [splits, T, heads, Dv] and split_lse [splits, T, heads] (sized here); an
  // error, part done, once stop says so.
  GpuStatus attention_blocks(const PartialAttentionParams& p, std::vector<float>& split_o,
                             std::vector<float>& split_lse);
  GpuStatus agrs_scale(const body::AgRsScale<Schedule>& a);
  GpuStatus a2a_pack(const body::A2aPack& a);
  GpuStatus a2a_combine(const body::A2aCombine<Schedule>& a);
  GpuStatus round(float* x, int64_t n, StorageFormat dtype);
  GpuStatus all_gather(const float* send, int64_t count, float* recv);
  GpuStatus all_to_all(const float* send, int64_t count, float* recv);
  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv, const SumSpec& how);

 private:
  Result<Communicator*> comm(const char* what);
  Communicator* comm_;
  std::function<bool()> stop_;
};

// A rank's cache in host memory.
using HostKvCache = DeviceCache<HostDevice>;

// The rank's cache after replaying in.chunks (for inspection: the MLA slice, tests).
Result<HostKvCache> build_rank_cache(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank);

// One TP rank's step on the host device. comm must be the rank's DCP-group communicator (size N,
// rank tp_rank mod N). q: as device_step takes it.
Result<RankStepOutput> run_tp_rank(Communicator& comm, const DcpInputs& in, const DcpConfig& cfg,
                                   int64_t tp_rank, const std::vector<float>* q = nullptr);

}  // namespace dcp::gpu
