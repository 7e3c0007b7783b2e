// bench_dcp_cuda — the CUDA backend's kernels against the device's measured ceilings.
//
// Measures, with CUDA events (median of --iters after --warmup):
//   copy      device-to-device cudaMemcpy of 1 GiB: (read + write bytes) / time, the bandwidth
//             ceiling of a memory-bound kernel;
//   gqa       partial attention of one rank at long context (T 1, 8 gathered heads on 1 KV head,
//             Dk = Dv = 128, 131072 rows: a 1M-token context over N = 8; 64 splits): KV bytes
//             read / time, as a fraction of copy (target >= 0.80);
//   mla       partial attention over the MLA shared latent (T 4, 128 gathered heads, Dk 576,
//             Dv 512, 32768 rows): 2 T H rows (Dk + Dv) flops / time, as a fraction of the bf16
//             tensor-core rate given by --mma-tflops (target >= 0.50; not judged without it);
//   combine   the a2a local merge of N = 8 partials (T 64, 16 heads, Dv 512): bytes read and
//             written / time, as a fraction of copy (target >= 0.65);
//   agrs      the ag_rs scaling of the same partials, likewise.
// Prints a table and, with --json, writes the figures (tools/gpu-check records them). Exit 0
// when it measured, 2 on bad flags or no device; targets are reported, not asserted.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/device_query.hpp"

namespace {

using namespace dcp::gpu;

constexpr size_t kCopyBytes = size_t{1} << 30;
// Units: milliseconds per second, bytes per GB, FLOP per TFLOP.
constexpr double kMsPerS = 1e3, kBytesPerGB = 1e9, kFlopPerTflop = 1e12;
constexpr double kGpuTargetGqa = 0.80, kGpuTargetMla = 0.50, kGpuTargetCombine = 0.65;
// One block per (token, head, split): T 1 x 8 heads needs split-KV to occupy the device; 64
// splits give 512 blocks (about 4 per SM of an H100/H200's 132), each over 2048 rows.
constexpr int64_t kGqaSplits = 64;

struct Options {
  int iters = 20, warmup = 3;
  double mma_tflops = 0.0;  // 0: not measured
  std::string json;
};

struct Row {
  std::string name, unit, ceiling;
  double ms = 0, rate = 0, fraction = -1, target = 0;
};

// Median milliseconds of `iters` runs of body on `s` after `warmup` untimed ones.
Result<double> time_ms(cudaStream_t s, const Options& o, const std::function<GpuStatus()>& body) {
  cudaEvent_t a, b;
  DCP_CUDA_TRY(cudaEventCreate(&a));
  DCP_CUDA_TRY(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    DCP_CUDA_TRY(cudaEventRecord(a, s));
    DCP_GPU_TRY(body());
    DCP_CUDA_TRY(cudaEventRecord(b, s));
    DCP_CUDA_TRY(cudaEventSynchronize(b));
    float t = 0;
    DCP_CUDA_TRY(cudaEventElapsedTime(&t, a, b));
    if (i >= o.warmup) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return static_cast<double>(ms[ms.size() / 2]);
}

// One rank's partial attention over `rows` rows: all positions visible (no causal cut).
Result<double> time_attention(cudaStream_t s, const Options& o, int64_t tokens, int64_t heads,
                              int64_t dk, int64_t dv, bool latent, int64_t rows, int64_t splits) {
  DCP_GPU_ASSIGN(q, DeviceBuffer<float>::create(static_cast<size_t>(tokens * heads * dk), s));
  DCP_GPU_ASSIGN(k, DeviceBuffer<float>::create(static_cast<size_t>(rows * dk), s));
  DCP_GPU_ASSIGN(v, DeviceBuffer<float>::create(latent ? 0 : static_cast<size_t>(rows * dv), s));
  std::vector<int64_t> pos_h(static_cast<size_t>(tokens), rows - 1);
  DCP_GPU_ASSIGN(pos, DeviceBuffer<int64_t>::upload(pos_h, s));
  DCP_GPU_ASSIGN(out, DeviceBuffer<float>::create(static_cast<size_t>(tokens * heads * dv), s));
  DCP_GPU_ASSIGN(lse, DeviceBuffer<float>::create(static_cast<size_t>(tokens * heads), s));
  PartialAttentionParams p;
  p.q = q.data();
  p.tokens = tokens;
  p.heads = heads;
  p.head_dim = dk;
  p.q_heads_total = heads;
  p.kv_heads_total = 1;
  p.q_pos = pos.data();
  p.seq = rows;
  p.layout = {1, 1};
  const KvCacheSpec spec{.layout = p.layout,
                         .rank = 0,
                         .physical_rows = rows,
                         .kv_heads = 1,
                         .head_dim = dk,
                         .v_dim = dv,
                         .shared_latent = latent};
  p.kv = kv_view(spec, k.data(), v.data(), nullptr);
  p.rows = rows;
  p.v_dim = dv;
  p.scale = 0.05f;
  p.causal = false;
  p.splits = splits;
  p.o = out.data();
  p.lse = lse.data();
  return time_ms(s, o, [&] { return launch_partial_attention(p, s); });
}

int run(const Options& o) {
  const DeviceReport dev = query_devices();
  if (dev.devices.empty()) {
    std::fprintf(stderr, "bench_dcp_cuda: no CUDA device: %s\n", dev.why.c_str());
    return 2;
  }
  cudaStream_t s = nullptr;
  std::vector<Row> rows;
  auto fail = [](const GpuStatus& st) {
    std::fprintf(stderr, "bench_dcp_cuda: %s (%s)\n", st.message().c_str(), st.where().c_str());
    return 1;
  };
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return fail(DCP_GPU_ERROR("cannot create a stream"));

  // Ceiling: device-to-device copy.
  auto src = DeviceBuffer<uint8_t>::create(kCopyBytes, s);
  auto dst = DeviceBuffer<uint8_t>::create(kCopyBytes, s);
  if (!src || !dst) return fail(!src ? src.status() : dst.status());
  const auto copy_ms = time_ms(s, o, [&]() -> GpuStatus {
    DCP_CUDA_TRY(
        cudaMemcpyAsync(dst->data(), src->data(), kCopyBytes, cudaMemcpyDeviceToDevice, s));
    return {};
  });
  if (!copy_ms) return fail(copy_ms.status());
  *src = DeviceBuffer<uint8_t>();
  *dst = DeviceBuffer<uint8_t>();
  const double copy_gbs = 2.0 * kCopyBytes / (*copy_ms / kMsPerS) / kBytesPerGB;
  rows.push_back({"copy d2d 1 GiB", "GB/s", "-", *copy_ms, copy_gbs, -1, 0});

  // GQA partial attention, memory-bound: every K and V element read once (fp32 cache).
  {
    constexpr int64_t kT = 1, kH = 8, kD = 128, kRows = 131072, kSplits = kGqaSplits;
    const auto ms = time_attention(s, o, kT, kH, kD, kD, false, kRows, kSplits);
    if (!ms) return fail(ms.status());
    const double gbs = 2.0 * kRows * kD * sizeof(float) / (*ms / kMsPerS) / kBytesPerGB;
    rows.push_back({"gqa attention T1 H8 D128 rows131072 splits64", "GB/s", "copy", *ms, gbs,
                    gbs / copy_gbs, kGpuTargetGqa});
  }
  // MLA partial attention over the shared latent, compute-heavy.
  {
    constexpr int64_t kT = 4, kH = 128, kDk = 576, kDv = 512, kRows = 32768;
    const auto ms = time_attention(s, o, kT, kH, kDk, kDv, true, kRows, 1);
    if (!ms) return fail(ms.status());
    const double tflops = 2.0 * kT * kH * kRows * (kDk + kDv) / (*ms / kMsPerS) / kFlopPerTflop;
    rows.push_back({"mla attention T4 H128 576/512 rows32768", "TFLOP/s", "bf16 mma", *ms, tflops,
                    o.mma_tflops > 0 ? tflops / o.mma_tflops : -1, kGpuTargetMla});
  }
  // Combines over N = 8 partials.
  {
    constexpr int64_t kN = 8, kT = 64, kHl = 16, kDv = 512;
    auto sched = make_schedule<ReduceSchedule>(kN, ReduceOrder::sequential, 0);
    auto recv = DeviceBuffer<float>::create(static_cast<size_t>(kN * kT * kHl * (kDv + 1)), s);
    auto o_buf = DeviceBuffer<float>::create(static_cast<size_t>(kT * kHl * kDv), s);
    auto l_buf = DeviceBuffer<float>::create(static_cast<size_t>(kT * kHl), s);
    if (!sched || !recv || !o_buf || !l_buf) return fail(DCP_GPU_ERROR("combine setup failed"));
    const body::CombineShape shape{kT, kHl, kDv, kN};
    body::A2aCombine<ReduceSchedule> comb;
    comb.shape = shape;
    comb.sched = *sched;
    comb.recv = recv->data();
    comb.o = o_buf->data();
    comb.lse = l_buf->data();
    const auto ms = time_ms(s, o, [&] { return launch_a2a_combine(comb, s); });
    if (!ms) return fail(ms.status());
    const double bytes =
        static_cast<double>((recv->size() + o_buf->size() + l_buf->size()) * sizeof(float));
    const double gbs = bytes / (*ms / kMsPerS) / kBytesPerGB;
    rows.push_back({"a2a combine N8 T64 H16 D512", "GB/s", "copy", *ms, gbs, gbs / copy_gbs,
                    kGpuTargetCombine});

    const int64_t hg = kN * kHl;
    auto po = DeviceBuffer<float>::create(static_cast<size_t>(kT * hg * kDv), s);
    auto pl = DeviceBuffer<float>::create(static_cast<size_t>(kT * hg), s);
    auto la = DeviceBuffer<float>::create(static_cast<size_t>(kN * kT * hg), s);
    auto send = DeviceBuffer<float>::create(static_cast<size_t>(kN * kT * kHl * kDv), s);
    if (!po || !pl || !la || !send) return fail(DCP_GPU_ERROR("ag_rs setup failed"));
    body::AgRsScale<ReduceSchedule> scale;
    scale.shape = shape;
    scale.sched = *sched;
    scale.partial_o = po->data();
    scale.partial_lse = pl->data();
    scale.lse_all = la->data();
    scale.send = send->data();
    scale.lse_out = l_buf->data();
    const auto ms2 = time_ms(s, o, [&] { return launch_agrs_scale(scale, s); });
    if (!ms2) return fail(ms2.status());
    const double bytes2 =
        static_cast<double>((po->size() + pl->size() + la->size() + send->size()) * sizeof(float));
    const double gbs2 = bytes2 / (*ms2 / kMsPerS) / kBytesPerGB;
    rows.push_back({"ag_rs scale N8 T64 H16 D512", "GB/s", "copy", *ms2, gbs2, gbs2 / copy_gbs,
                    kGpuTargetCombine});
  }
  cudaStreamDestroy(s);

  const DeviceInfo& d = dev.devices[0];
  std::printf("# bench_dcp_cuda  device=%s  sm_%d%d  driver=%d  runtime=%d  iters=%d (median)\n",
              d.name.c_str(), d.sm_major, d.sm_minor, dev.driver_version, dev.runtime_version,
              o.iters);
  std::printf("#  %-42s %10s %12s %-9s %9s %7s\n", "kernel", "time(ms)", "rate", "ceiling",
              "fraction", "target");
  for (const Row& r : rows) {
    char frac[32] = "-", tgt[32] = "-";
    if (r.fraction >= 0) std::snprintf(frac, sizeof frac, "%.3f", r.fraction);
    if (r.target > 0) std::snprintf(tgt, sizeof tgt, "%.2f", r.target);
    std::printf("   %-42s %10.4f %8.1f %-7s %-9s %9s %7s\n", r.name.c_str(), r.ms, r.rate,
                r.unit.c_str(), r.ceiling.c_str(), frac, tgt);
  }
  if (o.mma_tflops <= 0)
    std::printf("# mla fraction not judged: pass --mma-tflops (the measured bf16 rate)\n");
  if (!o.json.empty()) {
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "bench_dcp_cuda: --json: cannot write '%s'\n", o.json.c_str());
      return 2;
    }
    std::fprintf(f,
                 "{\"schema\": \"dcp-verify/bench-cuda/1\", \"device\": \"%s\", \"sm\": \"%d%d\", "
                 "\"driver\": %d, \"runtime\": %d, \"mma_tflops\": %.3f, \"rows\": [",
                 d.name.c_str(), d.sm_major, d.sm_minor, dev.driver_version, dev.runtime_version,
                 o.mma_tflops);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f,
                   "%s{\"kernel\": \"%s\", \"ms\": %.6f, \"rate\": %.3f, \"unit\": \"%s\", "
                   "\"ceiling\": \"%s\", \"fraction\": %s, \"target\": %.2f}",
                   i ? ", " : "", r.name.c_str(), r.ms, r.rate, r.unit.c_str(), r.ceiling.c_str(),
                   r.fraction >= 0 ? std::to_string(r.fraction).c_str() : "null", r.target);
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--iters" && has_value)
      o.iters = std::atoi(argv[++i]);
    else if (a == "--warmup" && has_value)
      o.warmup = std::atoi(argv[++i]);
    else if (a == "--mma-tflops" && has_value)
      o.mma_tflops = std::atof(argv[++i]);
    else if (a == "--json" && has_value)
      o.json = argv[++i];
    else {
      std::fprintf(stderr,
                   "bench_dcp_cuda: unknown or incomplete flag '%s'; expected --iters N, "
                   "--warmup N, --mma-tflops X, --json FILE\n",
                   a.c_str());
      return 2;
    }
  }
  if (o.iters < 1 || o.warmup < 0) {
    std::fprintf(stderr, "bench_dcp_cuda: --iters must be >= 1 and --warmup >= 0\n");
    return 2;
  }
  return run(o);
}
