// kv_tensor.cpp — widening stored keys and values (see kv_tensor.hpp).
#include "oracle/kv_tensor.hpp"

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
    case DType::f8e4m3:
    case DType::f8e5m2:
      for (int64_t i = 0; i < n; ++i) out[i] = fp8_bits_to_double(dtype, p[i]) * scale;
      return;
    case DType::i64:
      break;
  }
  std::fprintf(stderr, "widen_stored: %s is not a floating dtype\n", dtype_name(dtype).data());
  std::abort();
}

}  // namespace dcp::oracle
