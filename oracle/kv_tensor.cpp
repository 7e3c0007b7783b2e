// kv_tensor.cpp — widening stored keys and values (see kv_tensor.hpp).
#include "oracle/kv_tensor.hpp"

#include <algorithm>
#include <cmath>

namespace dcp::oracle {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DCP_WIDEN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DCP_WIDEN_CLONES
#endif

DCP_WIDEN_CLONES void widen_stored(DType dtype, const uint8_t* p, int64_t n, double scale,
                                   double* out) {
  switch (dtype) {
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b) << 16)) * scale;
      }
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = f16_bits_to_double(b) * scale;
      }
      return;
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = static_cast<double>(f) * scale;
      }
      return;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = d * scale;
      }
      return;
    case DType::i8:
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<double>(static_cast<int8_t>(p[i])) * scale;
      return;
    default:  // fp8: every byte's value from its row (dtype.hpp)
      if (!is_fp8(dtype)) break;
      for (int64_t i = 0; i < n; ++i) out[i] = fp8_bits_to_double(dtype, p[i]) * scale;
      return;
  }
  std::fprintf(stderr, "widen_stored: %s is not a floating dtype\n", dtype_name(dtype).data());
  std::abort();
}

void narrow_to_stored(DType dtype, const double* x, int64_t n, uint8_t* out) {
  const auto put = [&](int64_t i, auto word) {
    std::memcpy(out + sizeof word * i, &word, sizeof word);
  };
  switch (dtype) {
    case DType::bf16:
    case DType::f16: {
      const bool bf = dtype == DType::bf16;
      const uint16_t quiet_nan = bf ? 0x7fc0 : 0x7e00;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t sign = std::signbit(x[i]) ? 0x8000 : 0;
        put(i, static_cast<uint16_t>(
                   std::isnan(x[i]) ? (sign | quiet_nan)
                                    : (bf ? double_to_bf16_bits(x[i]) : double_to_f16_bits(x[i]))));
      }
      return;
    }
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) put(i, std::bit_cast<uint32_t>(static_cast<float>(x[i])));
      return;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) put(i, std::bit_cast<uint64_t>(x[i]));
      return;
    case DType::i8:  // a code, rounded and saturated (round_to)
      for (int64_t i = 0; i < n; ++i) put(i, static_cast<int8_t>(round_to(DType::i8, x[i])));
      return;
    default:
      if (!is_fp8(dtype)) break;
      for (int64_t i = 0; i < n; ++i) put(i, double_to_fp8_bits(dtype, x[i]));
      return;
  }
  std::fprintf(stderr, "narrow_to_stored: %s is not a floating dtype\n", dtype_name(dtype).data());
  std::abort();
}

KvTensor KvTensor::to_stored(DType dtype, std::vector<double> scale, ScaleGrain grain) const {
  if (is_stored()) {
    std::fprintf(stderr, "KvTensor::to_stored: already stored\n");
    std::abort();
  }
  auto held =
      std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(numel() * dtype_bytes(dtype)));
  KvTensor t = stored(shape, dtype, held->data(), held, std::move(scale), grain);
  const int64_t w = shape[2], rows = numel() / std::max<int64_t>(1, w);
  std::vector<double> row(static_cast<size_t>(w));
  for (int64_t r = 0; r < rows; ++r) {
    const double s = t.scale_of(r / shape[1], r % shape[1]);
    for (int64_t i = 0; i < w; ++i)
      row[static_cast<size_t>(i)] = data[static_cast<size_t>(r * w + i)] / s;
    narrow_to_stored(dtype, row.data(), w, held->data() + r * w * dtype_bytes(dtype));
  }
  return t;
}

}  // namespace dcp::oracle
