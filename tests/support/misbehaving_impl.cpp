// A plug-in (include/dcp_verify/impl.h) that misbehaves as a kernel under development does, for
// tests/bad_input_test.sh: its combine level, or its loading, does what DCPV_MISBEHAVE says.
//   exit0       calls exit(0) inside the level        segv   writes through a null pointer
//   abort       calls abort()                         fpe    raises SIGFPE
//   segv_locked locks stdout, then writes through a null pointer (the report cannot be printed)
//   throw       lets a C++ exception out of the level
//   throw_step  a step level only, which lets std::bad_alloc out
//   thread      starts a thread that still runs its code when the process ends
//   block_load  blocks forever in dcpv_get_impl (loading)
//   name        names itself with a newline and a fake verdict line
// Unset: a correct combine (the merge of the partials), so that a run passes.
#include <dcp_verify/impl.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

std::string mode() {
  const char* m = std::getenv("DCPV_MISBEHAVE");
  return m != nullptr ? m : "";
}

// Element (i[0], ..., i[ndim - 1]) of a strided F32 tensor.
float& at(const dcpv_tensor& t, std::initializer_list<int64_t> index) {
  int64_t offset = 0, d = 0;
  for (const int64_t i : index) offset += i * t.strides[d++];
  return static_cast<float*>(t.data)[offset];
}

int combine(void*, const dcpv_combine_args* args, char* err, size_t err_len) {
  const std::string m = mode();
  if (m == "exit0") std::exit(0);
  if (m == "segv") *static_cast<volatile int*>(nullptr) = 1;
  if (m == "segv_locked") {
    flockfile(stdout);  // held by the crashed thread for good
    *static_cast<volatile int*>(nullptr) = 1;
  }
  if (m == "abort") std::abort();
  if (m == "fpe") std::raise(SIGFPE);
  if (m == "throw") throw std::runtime_error("planted: a C++ exception out of a C level");
  if (m == "thread")
    std::thread([] {
      for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }).detach();
  const dcpv_combine_args& a = *args;
  const double unit = a.lse_base == 0 ? 1.0 : std::log(2.0);
  for (int64_t t = 0; t < a.tokens; ++t)
    for (int64_t h = 0; h < a.heads; ++h) {
      double m_max = -INFINITY;
      for (int64_t r = 0; r < a.ranks; ++r)
        m_max = std::fmax(m_max, at(a.lse_partial, {r, t, h}) * unit);
      double z = 0.0;
      for (int64_t r = 0; r < a.ranks; ++r)
        if (std::isfinite(m_max)) z += std::exp(at(a.lse_partial, {r, t, h}) * unit - m_max);
      for (int64_t i = 0; i < a.v_dim; ++i) {
        double o = 0.0;
        for (int64_t r = 0; r < a.ranks && z > 0.0; ++r)
          o +=
              std::exp(at(a.lse_partial, {r, t, h}) * unit - m_max) * at(a.o_partial, {r, t, h, i});
        at(a.o, {t, h, i}) = static_cast<float>(z > 0.0 ? o / z : 0.0);
      }
      at(a.lse, {t, h}) = static_cast<float>(z > 0.0 ? (m_max + std::log(z)) / unit : -INFINITY);
    }
  (void)err;
  (void)err_len;
  return 0;
}

// The claim of an fp32 CPU merge: adds round to nearest, the default exp and log budgets.
constexpr dcpv_claim kClaim{1, 0, 0, 0.0, 0.0, DCPV_F32, 1, 1, DCPV_F32, DCPV_F32};

int step_throws(void*, dcpv_step_args*, char*, size_t) { throw std::bad_alloc(); }

const dcpv_impl kImpl = {DCPV_ABI_VERSION, "misbehaving", kClaim, nullptr,
                         nullptr,          combine,       nullptr};
const dcpv_impl kStep = {DCPV_ABI_VERSION, "misbehaving step", kClaim, nullptr, nullptr,
                         nullptr,          step_throws};
const dcpv_impl kNamed = {
    DCPV_ABI_VERSION, "misbehaving\n# run: OK", kClaim, nullptr, nullptr, combine, nullptr};

}  // namespace

extern "C" const dcpv_impl* dcpv_get_impl(void) {
  const std::string m = mode();
  if (m == "block_load")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  return m == "name" ? &kNamed : m == "throw_step" ? &kStep : &kImpl;
}
