#include "plugin/plugin.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/host/host_device.hpp"
#include "gpu/run_threads.hpp"
#include "oracle/text.hpp"

namespace dcp::plugin {
namespace {

// Room for a plug-in's one-line reason.
constexpr size_t kErrBytes = 512;

// The command's last words (set_last_words), spoken at most once. The speaker marks them spoken,
// then takes them under g_words_mu; set_last_words, under it, replaces them only while unspoken
// (and deletes the old ones after it): words are never deleted, nor their frame left, while they
// are spoken.
std::atomic<LastWords*> g_last_words{nullptr};
std::atomic<bool> g_spoken{false};
std::mutex g_words_mu;

// Whether a level's crash, timeout or exit() is already ending the process: the first of them to
// set it ends it (its line, the last words, its status); any other, on another thread, stays out
// of its way (a watchdog firing while a crash's report is written would cut the report and say
// 124). Lock-free: the crash handler sets it.
std::atomic<bool> g_ending{false};
static_assert(std::atomic<bool>::is_always_lock_free, "a signal handler's flag is lock-free");

[[noreturn]] void park_forever() {
  for (;;) ::pause();
}

// Speaks the last words, if any, under an alarm: SIGALRM's default action ends the process if
// they do not finish within kLastWordsSeconds.
void speak_last_words(const std::string& cause) {
  if (g_spoken.exchange(true)) return;
  // First: a crash inside malloc may leave a lock that what follows needs.
  ::alarm(kLastWordsSeconds);
  LastWords* words = nullptr;  // never deleted: the process is ending
  {
    const std::lock_guard<std::mutex> lock(g_words_mu);
    words = g_last_words.exchange(nullptr);
  }
  if (words != nullptr) (*words)(cause);
}

// The signals that end a level, as its line on stderr names them (string literals: the crash
// handler uses them).
const char* crash_cause(int sig) {
  return sig == SIGSEGV   ? "SIGSEGV (invalid memory access)"
         : sig == SIGBUS  ? "SIGBUS (invalid memory access)"
         : sig == SIGFPE  ? "SIGFPE (arithmetic trap)"
         : sig == SIGILL  ? "SIGILL (illegal instruction)"
         : sig == SIGABRT ? "SIGABRT (abort)"
                          : "a fatal signal";
}

// A crash in a level parks its thread and hands the last words to this thread (a signal handler
// may not write a report): the handler stores the level and the signal, then writes a byte to
// the pipe this thread reads.
std::atomic<const char*> g_crashed_level{nullptr};
std::atomic<int> g_crash_signal{0};
int g_undertaker[2] = {-1, -1};

void start_undertaker() {
  if (::pipe(g_undertaker) != 0) return;  // no pipe: a crash ends the process without them
  std::thread([] {
    sigset_t set;
    sigemptyset(&set);
    for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    char byte = 0;
    while (::read(g_undertaker[0], &byte, 1) != 1)
      if (errno != EINTR) return;
    const char* level = g_crashed_level.load();
    speak_last_words(std::string(level != nullptr ? level : "an implementation's level") +
                     " crashed: " + crash_cause(g_crash_signal.load()));
    ::_exit(kExitLevelCrash);
  }).detach();
}

// The level calls in flight, on any thread: one that has not returned by its deadline ends the
// process (kExitLevelTimeout), since nothing can stop a thread inside the plug-in's own code. One
// watchdog thread, started with the first call, over a state never destroyed, so that the
// process's exit cannot race it.
class LevelWatch {
 public:
  using Clock = std::chrono::steady_clock;

  static LevelWatch& get() {
    static LevelWatch* const watch = new LevelWatch();
    return *watch;
  }

  // A call of `what` (the implementation, the level, the rank) allowed `limit`; returns its key.
  uint64_t begin(std::string what, std::chrono::milliseconds limit) {
    const std::lock_guard<std::mutex> lock(m_);
    const Clock::time_point deadline = Clock::now() + limit;
    calls_[next_] = Call{std::move(what), deadline, limit};
    // The watcher wakes by wake_ in any case: only an earlier deadline needs it now (waking it on
    // every call would cost each call a switch to the watcher and back).
    if (deadline < wake_) cv_.notify_one();
    return next_++;
  }

  void end(uint64_t key) {
    const std::lock_guard<std::mutex> lock(m_);
    calls_.erase(key);
  }

 private:
  struct Call {
    std::string what;
    Clock::time_point deadline;
    std::chrono::milliseconds limit;
  };

  LevelWatch() {
    std::thread([this] {
      // The signals that end the process go to the threads that handle them: while the main
      // thread writes a report it holds them back (oracle/file_write), and this thread, which
      // never does, must not take them (a SIGTERM here left the report's temporary behind).
      sigset_t set;
      sigemptyset(&set);
      for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
      watch();
    }).detach();
  }

  [[noreturn]] void watch() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      if (calls_.empty()) {
        wake_ = Clock::now() + kIdleWake;
        cv_.wait_until(lock, wake_);
        continue;
      }
      const auto first = std::min_element(calls_.begin(), calls_.end(), [](auto& a, auto& b) {
        return a.second.deadline < b.second.deadline;
      });
      // A copy: the call may end (and its entry go) while this thread waits.
      const Clock::time_point deadline = first->second.deadline;
      if (Clock::now() < deadline) {
        wake_ = deadline;
        cv_.wait_until(lock, deadline);
        continue;
      }
      // A crash or exit() in another level is already ending the process (its call never ends
      // here): its report is not cut short.
      if (g_ending.exchange(true)) {
        lock.unlock();
        park_forever();
      }
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g",
                    std::chrono::duration<double>(first->second.limit).count());
      const std::string cause =
          first->second.what + " did not return within " + limit + " s (--timeout)";
      const std::string line = "dcp-verify: " + cause +
                               "; the process ends, as nothing can stop a thread inside the " +
                               "plug-in\n";
      // What was printed is kept, unless the hung thread holds stdout (then waiting would hang).
      if (::ftrylockfile(stdout) == 0) {
        ::fflush_unlocked(stdout);
        ::funlockfile(stdout);
      }
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
      lock.unlock();
      speak_last_words(cause);
      std::_Exit(kExitLevelTimeout);
    }
  }

  // How long the watcher sleeps with no call in flight: a call whose limit is at least this (any
  // --timeout, in whole seconds) begins without waking it.
  static constexpr std::chrono::seconds kIdleWake{1};

  std::mutex m_;
  std::condition_variable cv_;
  std::map<uint64_t, Call> calls_;
  uint64_t next_ = 0;
  Clock::time_point wake_ = Clock::time_point::max();  // when the watcher wakes next, at the latest
};

// What ends the process inside a level: a crash (a signal the plug-in's code raised on the level's
// thread: an invalid access, abort(), a trap) or a call of exit(). Either would otherwise end
// dcp-verify silently, or with exit 0 and no verdict; instead one line on stderr names the
// implementation, the level, the rank and the cause, and the process ends with kExitLevelCrash.
// The level's description is the calling thread's (a crash is delivered to the thread that
// raised it); exit() from another thread is named by the calls in flight.
thread_local const char* t_level = nullptr;  // this thread's level call in flight, or null
std::atomic<int> g_levels_in_flight{0};

void write_stderr(const char* s) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, s, std::strlen(s));
}

// The actions the guards replaced, restored for a signal that is not the plug-in's.
struct sigaction g_previous[NSIG];

extern "C" void on_level_crash(int sig, siginfo_t* info, void*) {
  const char* what = t_level;
  if (what == nullptr) {
    // Not inside a plug-in's level: the signal as it was handled before (a fault runs again when
    // the handler returns; a signal sent by raise() or abort() is sent again).
    ::sigaction(sig, &g_previous[sig], nullptr);
    if (info->si_code <= 0) ::raise(sig);
    return;
  }
  // Levels on several ranks may crash at once, or one crash while a timeout is ending the
  // process: the first speaks (one line on stderr, the last words of its level), the others park.
  if (g_ending.exchange(true)) park_forever();
  write_stderr("dcp-verify: ");
  write_stderr(what);
  write_stderr(" crashed: ");
  write_stderr(crash_cause(sig));
  write_stderr("; the process ends, as nothing after a crash in the plug-in can be trusted\n");
  if (g_last_words.load() != nullptr && g_undertaker[1] >= 0) {
    // The undertaker speaks the last words and ends the process; this thread stays parked.
    g_crash_signal.store(sig);
    g_crashed_level.store(what);
    const char byte = 1;
    if (::write(g_undertaker[1], &byte, 1) == 1) park_forever();
  }
  ::_exit(kExitLevelCrash);
}

void on_exit_in_level() {
  if (g_levels_in_flight.load() == 0) return;
  if (g_ending.exchange(true)) park_forever();  // a crash or a timeout is ending the process
  std::fflush(stdout);                          // a normal context: what was printed is kept
  write_stderr("dcp-verify: ");
  write_stderr(t_level != nullptr ? t_level : "an implementation's level");
  write_stderr(
      " called exit() while its level ran; the process ends without a verdict "
      "(status 1, never the plug-in's)\n");
  // No last words here: exit() has already run the destructors registered after this handler
  // (statics first used during the run), which a report may need.
  ::_exit(kExitLevelCrash);
}

// Installed with the first level call (the atexit handler then runs before those registered
// earlier, the process's own).
void install_level_guards() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_level_crash;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      ::sigaction(sig, &sa, &g_previous[sig]);
    std::atexit(on_exit_in_level);
    return true;
  }();
  (void)installed;
}

// Calls a level of the plug-in (fn) under the watch; the call leaves it however fn returns. A C++
// exception the plug-in lets out of its C function is the level's error, not a terminate().
template <class Level>
int watched(std::string what, std::chrono::milliseconds limit, Level fn, std::string* thrown) {
  install_level_guards();
  struct Watched {
    LevelWatch& watch;
    uint64_t key;
    const char* previous;
    ~Watched() {
      t_level = previous;
      --g_levels_in_flight;
      watch.end(key);
    }
  } call{LevelWatch::get(), LevelWatch::get().begin(what, limit), t_level};
  ++g_levels_in_flight;
  t_level = what.c_str();
  try {
    return fn();
  } catch (const std::exception& e) {
    *thrown = std::string("threw a C++ exception out of its C function: ") + e.what();
  } catch (...) {
    *thrown = "threw a C++ exception out of its C function";
  }
  return -1;
}

// A level call as its errors and the watch name it: the implementation, its file, the level and,
// on one rank, the rank.
std::string level_call(const Plugin& p, const char* level, std::optional<int64_t> rank) {
  return "implementation '" + oracle::printable(p.impl->name) + "' (" + oracle::printable(p.path) +
         "): level " + level + (rank ? " on dcp rank " + std::to_string(*rank) : std::string());
}

// What a plug-in wrote into its error buffer, as one line (it may forget the terminator).
std::string reason(char (&err)[kErrBytes]) {
  err[kErrBytes - 1] = '\0';
  return err[0] != '\0' ? oracle::one_line(err) : std::string("(no reason given)");
}

// A plug-in format as the oracle names it; nullopt for one a claim may not use there.
std::optional<oracle::DType> claim_format(dcpv_dtype d) {
  switch (d) {
    case DCPV_F32:
      return oracle::DType::f32;
    case DCPV_BF16:
      return oracle::DType::bf16;
    case DCPV_F16:
      return oracle::DType::f16;
    default:
      return std::nullopt;
  }
}

// The ABI's name of a value format (rows_in hands fp8 and int8 caches over dequantized, in F32).
dcpv_dtype plugin_dtype(gpu::StorageFormat f) {
  return f == gpu::StorageFormat::bf16  ? DCPV_BF16
         : f == gpu::StorageFormat::f16 ? DCPV_F16
                                        : DCPV_F32;
}

dcpv_tensor view(const void* data, dcpv_dtype dtype, std::initializer_list<int64_t> shape,
                 std::initializer_list<int64_t> strides) {
  dcpv_tensor t{};
  t.data = const_cast<void*>(data);  // read-only for the plug-in, as impl.h says
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), t.shape);
  std::copy(strides.begin(), strides.end(), t.strides);
  return t;
}

// A contiguous view of x with the given shape.
template <class T>
dcpv_tensor dense(const T* data, dcpv_dtype dtype, std::initializer_list<int64_t> shape) {
  std::vector<int64_t> st(shape.size(), 1);
  const std::vector<int64_t> sh(shape);
  for (size_t i = sh.size(); i-- > 1;) st[i - 1] = st[i] * sh[i];
  dcpv_tensor t = view(data, dtype, shape, {});
  std::copy(st.begin(), st.end(), t.strides);
  return t;
}

// Rows [rows, heads, width] of elements of format `src` at base (a head every head_stride
// elements, a row every heads * head_stride) as a cache of format f holds them, handed over as a
// tensor: a view of them where they are f's already (a cache is), else converted into `held` (the
// view points into it, so a Rows is moved, never copied). The ABI has no fp8 and no scales: an
// fp8 cache, or one with scales (`scale` of a row and a head, by head or by token; empty: none),
// is handed over dequantized, in F32, each stored value times its scale rounded once (the
// rounding the oracle's bound counts for a scaled cache). `quantize`: the elements are values the
// cache stores as x / scale.
struct Rows {
  std::vector<uint8_t> held;
  dcpv_tensor t{};
  Rows() = default;
  Rows(Rows&&) = default;
  Rows(const Rows&) = delete;
};
using ScaleOf = std::function<float(int64_t row, int64_t head)>;
Rows rows_in(gpu::StorageFormat f, gpu::StorageFormat src, const void* base, int64_t rows,
             int64_t heads, int64_t width, int64_t head_stride, const ScaleOf& scale = {},
             bool quantize = false) {
  Rows r;
  const bool dequantize = gpu::is_cache_only(f) || scale;
  if (src == f && !dequantize && !quantize) {
    r.t = view(base, plugin_dtype(f), {rows, heads, width}, {heads * head_stride, head_stride, 1});
    return r;
  }
  const gpu::StorageFormat out = dequantize ? gpu::StorageFormat::f32 : f;
  r.held.resize(static_cast<size_t>(rows * heads * width * gpu::format_bytes(out)));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const float s = scale ? scale(i, h) : 1.0f;
      for (int64_t c = 0; c < width; ++c) {
        const float x = gpu::load_element(src, base, (i * heads + h) * head_stride + c);
        const float stored = gpu::round_to(f, quantize ? x / s : x);
        gpu::store_element(out, r.held.data(), (i * heads + h) * width + c, stored * s);
      }
    }
  r.t = dense(r.held.data(), plugin_dtype(out), {rows, heads, width});
  return r;
}

// The cache's rows [0, n) of `width` elements each, from its pool at base, in row order (a paged
// cache keeps them in pool pages through its block table; the ABI's tensors are strided views).
std::vector<uint8_t> rows_in_order(const gpu::KvView& kv, const void* base, int64_t n,
                                   int64_t width) {
  const int64_t bytes = width * gpu::format_bytes(kv.dtype);
  std::vector<uint8_t> out(static_cast<size_t>(n * bytes));
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(&out[static_cast<size_t>(r * bytes)],
                static_cast<const uint8_t*>(base) + kv.slot(r) * bytes, static_cast<size_t>(bytes));
  return out;
}

// Version 2's tensors (DLPack's description) of one call: their shapes and strides live here
// until the call has returned (a deque's elements never move).
constexpr dcpv_dldtype kDlF32{DCPV_DL_FLOAT, 32, 1}, kDlI32{DCPV_DL_INT, 32, 1},
    kDlI64{DCPV_DL_INT, 64, 1};
// Each production format as DLPack describes it (version 2 hands caches over as stored): one row a
// format.
struct DlFormat {
  gpu::StorageFormat format;
  dcpv_dldtype dl;
};
constexpr DlFormat kDlFormats[] = {
    {gpu::StorageFormat::f32, kDlF32},
    {gpu::StorageFormat::f16, {DCPV_DL_FLOAT, 16, 1}},
    {gpu::StorageFormat::bf16, {DCPV_DL_BFLOAT, 16, 1}},
    {gpu::StorageFormat::f8e4m3, {DCPV_DL_FLOAT8_E4M3FN, 8, 1}},
    {gpu::StorageFormat::f8e5m2, {DCPV_DL_FLOAT8_E5M2, 8, 1}},
    {gpu::StorageFormat::i8, {DCPV_DL_INT, 8, 1}},
    {gpu::StorageFormat::f8e4m3fnuz, {DCPV_DL_FLOAT8_E4M3FNUZ, 8, 1}}};
static_assert(std::size(kDlFormats) == std::size(gpu::kFormatNames),
              "kDlFormats: one row per production format");
dcpv_dldtype dl_format(gpu::StorageFormat f) {
  for (const DlFormat& row : kDlFormats)
    if (row.format == f) return row.dl;
  return kDlF32;
}
class DlTensors {
 public:
  // A host tensor over data, row-major unless strides are given. An empty tensor is present all
  // the same (data never NULL): NULL data means absent (impl.h).
  dcpv_dltensor of(const void* data, dcpv_dldtype dtype, std::vector<int64_t> shape,
                   std::vector<int64_t> strides = {}) {
    if (strides.empty()) {
      strides.assign(shape.size(), 1);
      for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    }
    dcpv_dltensor t{};
    t.data = const_cast<void*>(data != nullptr ? data : static_cast<const void*>(&empty_));
    t.device = {DCPV_DL_CPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = held_.emplace_back(std::move(shape)).data();
    t.strides = held_.emplace_back(std::move(strides)).data();
    return t;
  }

 private:
  std::deque<std::vector<int64_t>> held_;
  int64_t empty_ = 0;
};

// A pool [pages, page, heads, width] (NHD, elements of `bytes` bytes, a head every head_stride
// elements) rewritten as HND [pages, heads, page, width], dense.
std::vector<uint8_t> hnd_pool(const void* pool, int64_t pages, int64_t page, int64_t heads,
                              int64_t width, int64_t head_stride, int64_t bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(pages * page * heads * width * bytes));
  const auto* src = static_cast<const uint8_t*>(pool);
  for (int64_t pg = 0; pg < pages; ++pg)
    for (int64_t g = 0; g < heads; ++g)
      for (int64_t s = 0; s < page; ++s)
        std::memcpy(&out[static_cast<size_t>((((pg * heads + g) * page + s) * width) * bytes)],
                    src + ((pg * page + s) * heads + g) * head_stride * bytes,
                    static_cast<size_t>(width * bytes));
  return out;
}

// What the partial and paged levels' arguments share, from the production path's parameters.
template <class Args>
void rank_fields(const gpu::PartialAttentionParams& p, Args& a) {
  a.rank = p.rank;
  a.ranks = p.layout.ranks;
  a.tokens = p.tokens;
  a.heads = p.heads;
  a.head_dim = p.head_dim;
  a.v_dim = p.v_dim;
  a.head0 = p.head0;
  a.q_heads_total = p.q_heads_total;
  a.kv_heads_total = p.kv_heads_total;
  a.kv_head0 = p.kv_head0;
  a.kv_heads = p.kv.kv_heads;
  a.shared_latent = p.kv.shared_latent ? 1 : 0;
  a.lse_base = p.base == gpu::LseBase::e ? 0 : 1;
  a.causal = p.causal ? 1 : 0;
  a.window = p.window;
  a.scale = p.scale;
  a.softcap = p.softcap;
}

// The per-head vectors the ABI carries: the sink, and from version 3 ALiBi's slopes (the
// properties do not draw them for a plug-in that lacks them, run --impl refuses them). One handed
// to a level anyway is refused here, by name, rather than dropped.
struct AbiHeadVector {
  std::string_view name;
  int32_t since;  // the ABI version that carries it
};
constexpr AbiHeadVector kAbiHeadVectors[] = {{"sink", DCPV_ABI_VERSION},
                                             {"alibi_slopes", DCPV_ABI_VERSION_3}};
template <class Has>
gpu::GpuStatus head_vectors_carried(const Plugin& p, Has has) {
  for (const gpu::HeadVector& hv : gpu::kHeadVectors) {
    const bool carried =
        std::any_of(std::begin(kAbiHeadVectors), std::end(kAbiHeadVectors),
                    [&](const AbiHeadVector& v) { return v.name == hv.name && p.abi >= v.since; });
    if (has(hv) && !carried)
      return DCP_GPU_ERROR("plug-in: ABI ", p.abi, " does not carry '", hv.name,
                           "', which this step uses");
  }
  return {};
}

// Scales by token reach a version-3 plug-in (a paged level's as a pool of them, the other levels'
// dequantized by the suite); never an earlier one (the properties do not draw them for it, run
// --impl refuses them): handed to a level anyway, refused here.
gpu::GpuStatus scales_carried(const Plugin& p, bool by_token) {
  if (by_token && p.abi < DCPV_ABI_VERSION_3)
    return DCP_GPU_ERROR("plug-in: ABI ", p.abi,
                         " does not carry scales by token (or page), which this step uses");
  return {};
}

// The host device with the plug-in's levels in place of the production kernels.
class PluginDevice : public gpu::HostDevice {
 public:
  PluginDevice(gpu::Communicator& comm, const Plugin& p, std::chrono::milliseconds deadline)
      : HostDevice(&comm), p_(p), deadline_(deadline) {}

  gpu::GpuStatus partial_attention(const gpu::PartialAttentionParams& p) {
    if (!p_.has_paged() && !p_.has_partial()) return HostDevice::partial_attention(p);
    DCP_GPU_TRY(head_vectors_carried(p_, [&](const gpu::HeadVector& hv) { return p.*hv.param; }));
    DCP_GPU_TRY(scales_carried(p_, p.kv.scales_by_row()));
    if (p_.has_paged()) return paged_attention(p);
    if (p.req != nullptr)
      return DCP_GPU_ERROR("plug-in: ABI ", p_.abi,
                           "'s partial level takes one request's keys; this step is a batch");
    const int64_t T = p.tokens, H = p.heads, dk = p.head_dim, dv = p.v_dim, n = p.rows;
    const bool latent = p.kv.shared_latent;
    std::vector<int64_t> k_pos(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) k_pos[static_cast<size_t>(r)] = p.layout.position(p.rank, r);
    const gpu::StorageFormat f = p.kv.dtype;  // the cache's: a view of its rows
    const bool paged = p.kv.block_table != nullptr;
    const std::vector<uint8_t> k_rows =
        paged ? rows_in_order(p.kv, p.kv.k, n, p.kv.kv_heads * p.kv.head_dim)
              : std::vector<uint8_t>{};
    const std::vector<uint8_t> v_rows =
        paged && !latent ? rows_in_order(p.kv, p.kv.v, n, p.kv.kv_heads * p.kv.v_head_stride)
                         : std::vector<uint8_t>{};
    const gpu::KvView& kv = p.kv;
    const ScaleOf k_scale = kv.k_scale != nullptr
                                ? ScaleOf([&](int64_t r, int64_t g) { return kv.k_scale_of(r, g); })
                                : ScaleOf{};
    const ScaleOf v_scale = kv.v_scale != nullptr
                                ? ScaleOf([&](int64_t r, int64_t g) { return kv.v_scale_of(r, g); })
                                : ScaleOf{};
    const Rows k =
        rows_in(f, f, paged ? k_rows.data() : kv.k, n, kv.kv_heads, dk, kv.head_dim, k_scale);
    const Rows v = latent ? Rows{}
                          : rows_in(f, f, paged ? v_rows.data() : kv.v, n, kv.kv_heads, dv,
                                    kv.v_head_stride, v_scale);
    dcpv_partial_args a{};
    rank_fields(p, a);
    a.keys = n;
    a.q = dense(p.q, DCPV_F32, {T, H, dk});
    a.q_pos = dense(p.q_pos, DCPV_I64, {T});
    a.k = k.t;
    a.v = latent ? dcpv_tensor{} : v.t;
    if (latent) a.v.dtype = a.k.dtype;
    a.k_pos = dense(k_pos.data(), DCPV_I64, {n});
    a.sink = p.sink != nullptr ? dense(p.sink, DCPV_F32, {H}) : dcpv_tensor{};
    a.topk = p.topk != nullptr ? dense(p.topk, DCPV_I64, {T, p.topk_k}) : dcpv_tensor{};
    a.o = dense(p.o, DCPV_F32, {T, H, dv});
    a.lse = dense(p.lse, DCPV_F32, {T, H});
    if (p.alibi_slopes != nullptr) a.alibi_slopes = dense(p.alibi_slopes, DCPV_F32, {H});
    char err[kErrBytes] = {};
    const std::string what = level_call(p_, "partial", p.rank);
    const auto call = [&] { return p_.impl->partial(p_.impl->self, &a, err, sizeof err); };
    std::string thrown;
    if (watched(what, deadline_, call, &thrown) != 0)
      return DCP_GPU_ERROR(what, " failed: ", thrown.empty() ? reason(err) : thrown);
    return {};
  }

  // Version 2's paged level: the rank's pool as it is (its pages in the cache's storage format,
  // with its scales), the block tables and the requests' lengths.
  gpu::GpuStatus paged_attention(const gpu::PartialAttentionParams& p) {
    const gpu::KvView& kv = p.kv;
    const bool batch = p.req != nullptr;
    if (kv.block_table == nullptr && !batch && p.rows > 0)  // (an empty cache has no table)
      return DCP_GPU_ERROR("plug-in: the paged level needs a paged cache (plugin_config pages it)");
    if (kv.scale_grain == gpu::ScaleGrain::page && kv.scales_by_row() &&
        p_.abi < DCPV_ABI_VERSION_4)
      return DCP_GPU_ERROR("plug-in: ABI ", p_.abi, "'s paged level carries no scales by page, ",
                           "which this step's cache keeps (version 4 does)");
    const int64_t T = p.tokens, H = p.heads, dk = p.head_dim, dv = p.v_dim, P = kv.page,
                  G = kv.kv_heads, pages = kv.pool_rows / P, all = batch ? p.requests : 1;
    const bool latent = kv.shared_latent, hnd = p_.page_layout == DCPV_PAGES_HND;
    // The requests with queries in this step, as engines pass a batch (those that finished before
    // it, their pages freed, left out): their queries' rows (tokens come in request order),
    // lengths and block tables.
    std::vector<int64_t> queries(static_cast<size_t>(all), 0);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = batch ? p.req[t] : 0;
      if (b < 0 || b >= all || (t > 0 && batch && b < p.req[t - 1]))
        return DCP_GPU_ERROR("plug-in: the paged level takes tokens in request order");
      ++queries[static_cast<size_t>(b)];
    }
    const int64_t table_pages = batch                       ? p.table_stride
                                : kv.block_table == nullptr ? 0
                                                            : (p.rows + P - 1) / P;
    std::vector<int32_t> starts{0}, seq, local, tables;
    for (int64_t b = 0; b < all; ++b) {
      if (batch && queries[static_cast<size_t>(b)] == 0) continue;
      starts.push_back(starts.back() + static_cast<int32_t>(queries[static_cast<size_t>(b)]));
      const int64_t s = batch ? p.req_seq[b] : p.seq;
      seq.push_back(static_cast<int32_t>(s));
      local.push_back(static_cast<int32_t>(p.layout.count(p.rank, s)));
      const int32_t* row = batch ? p.req_tables + b * p.table_stride : kv.block_table;
      if (row != nullptr) tables.insert(tables.end(), row, row + table_pages);
    }
    const auto B = static_cast<int64_t>(seq.size());
    // The pool in the layout the plug-in asked for.
    const int64_t e = gpu::format_bytes(kv.dtype);
    const std::vector<uint8_t> k_hnd =
        hnd ? hnd_pool(kv.k, pages, P, G, dk, kv.head_dim, e) : std::vector<uint8_t>{};
    const std::vector<uint8_t> v_hnd = hnd && !latent
                                           ? hnd_pool(kv.v, pages, P, G, dv, kv.v_head_stride, e)
                                           : std::vector<uint8_t>{};
    DlTensors dl;
    const auto pool = [&](const void* nhd, const std::vector<uint8_t>& held, int64_t width,
                          int64_t head_stride) {
      if (hnd) return dl.of(held.data(), dl_format(kv.dtype), {pages, G, P, width});
      return dl.of(nhd, dl_format(kv.dtype), {pages, P, G, width},
                   {P * G * head_stride, G * head_stride, head_stride, 1});
    };
    dcpv_paged_args a{};
    rank_fields(p, a);
    a.interleave = p.layout.interleave;
    a.requests = B;
    a.page_size = P;
    a.page_layout = p_.page_layout;
    a.q = dl.of(p.q, kDlF32, {T, H, dk});
    a.q_pos = dl.of(p.q_pos, kDlI64, {T});
    a.query_start_loc = dl.of(starts.data(), kDlI32, {B + 1});
    a.seq_lens = dl.of(seq.data(), kDlI32, {B});
    a.local_seq_lens = dl.of(local.data(), kDlI32, {B});
    a.block_table = dl.of(tables.data(), kDlI32, {B, table_pages});
    a.k_cache = pool(kv.k, k_hnd, dk, kv.head_dim);
    if (!latent) a.v_cache = pool(kv.v, v_hnd, dv, kv.v_head_stride);
    // Scales by head [G]; by token a pool of them, a token's in its slot (impl.h, version 3);
    // by page one a pool page (version 4).
    const auto scales = [&](const float* x) {
      if (kv.scale_grain == gpu::ScaleGrain::head) return dl.of(x, kDlF32, {G});
      if (kv.scale_grain == gpu::ScaleGrain::page) return dl.of(x, kDlF32, {pages, kv.scale_heads});
      if (kv.scale_heads == 1) return dl.of(x, kDlF32, {pages, P});
      return dl.of(x, kDlF32, {pages, P, kv.scale_heads});
    };
    a.scale_grain = kv.scale_grain == gpu::ScaleGrain::head    ? DCPV_SCALES_BY_HEAD
                    : kv.scale_grain == gpu::ScaleGrain::token ? DCPV_SCALES_BY_TOKEN
                                                               : DCPV_SCALES_BY_PAGE;
    if (kv.k_scale != nullptr) a.k_scale = scales(kv.k_scale);
    if (kv.v_scale != nullptr && !latent) a.v_scale = scales(kv.v_scale);
    if (p.alibi_slopes != nullptr) a.alibi_slopes = dl.of(p.alibi_slopes, kDlF32, {H});
    if (p.sink != nullptr) a.sink = dl.of(p.sink, kDlF32, {H});
    if (p.topk != nullptr) a.topk = dl.of(p.topk, kDlI64, {T, p.topk_k});
    a.o = dl.of(p.o, kDlF32, {T, H, dv});
    a.lse = dl.of(p.lse, kDlF32, {T, H});
    char err[kErrBytes] = {};
    const std::string what = level_call(p_, "paged", p.rank);
    const auto call = [&] { return p_.paged(p_.impl->self, &a, err, sizeof err); };
    std::string thrown;
    if (watched(what, deadline_, call, &thrown) != 0)
      return DCP_GPU_ERROR(what, " failed: ", thrown.empty() ? reason(err) : thrown);
    return {};
  }

  gpu::GpuStatus a2a_combine(const gpu::body::A2aCombine<Schedule>& c) {
    if (!p_.has_combine()) return HostDevice::a2a_combine(c);
    const int64_t N = c.shape.ranks, T = c.shape.tokens, H = c.shape.local_heads,
                  dv = c.shape.v_dim, w = dv + 1;
    dcpv_combine_args a{};
    a.ranks = N;
    a.tokens = T;
    a.heads = H;
    a.v_dim = dv;
    a.lse_base = c.base == gpu::LseBase::e ? 0 : 1;
    // recv [N, T, H, Dv + 1]: each partial's O and then its LSE.
    a.o_partial = view(c.recv, DCPV_F32, {N, T, H, dv}, {T * H * w, H * w, w, 1});
    a.lse_partial = view(c.recv + dv, DCPV_F32, {N, T, H}, {T * H * w, H * w, w});
    a.o = dense(c.o, DCPV_F32, {T, H, dv});
    a.lse = dense(c.lse, DCPV_F32, {T, H});
    char err[kErrBytes] = {};
    const std::string what = level_call(p_, "combine", rank());
    const auto call = [&] { return p_.impl->combine(p_.impl->self, &a, err, sizeof err); };
    std::string thrown;
    if (watched(what, deadline_, call, &thrown) != 0)
      return DCP_GPU_ERROR(what, " failed: ", thrown.empty() ? reason(err) : thrown);
    return {};
  }

 private:
  const Plugin& p_;
  std::chrono::milliseconds deadline_;
};

// A claim field outside its range, named as impl.h names it.
oracle::Status check_claim(const std::string& path, const dcpv_claim& c) {
  const auto bad = [&](const char* field, const std::string& expected) {
    return DCP_ERROR("--impl ", path, ": claim.", field, " ", expected);
  };
  const auto flag = [](int32_t x) { return x == 0 || x == 1; };
  if (!flag(c.accum_rounding_nearest)) return bad("accum_rounding_nearest", "must be 0 or 1");
  if (!flag(c.tf32)) return bad("tf32", "must be 0 or 1");
  if (!flag(c.ftz)) return bad("ftz", "must be 0 or 1");
  for (const auto& [name, x] :
       {std::pair{"exp_rel_err", c.exp_rel_err}, std::pair{"log_rel_err", c.log_rel_err}})
    if (!(x >= 0.0 && x < 0.5)) return bad(name, "must be in [0, 0.5) (0: the default budget)");
  if (!claim_format(c.p_cast)) return bad("p_cast", "must be DCPV_F32, DCPV_BF16 or DCPV_F16");
  if (!claim_format(c.partial_o))
    return bad("partial_o", "must be DCPV_F32, DCPV_BF16 or DCPV_F16");
  if (!claim_format(c.combine_accum))
    return bad("combine_accum", "must be DCPV_F32, DCPV_BF16 or DCPV_F16");
  if (c.tile < 1) return bad("tile", "must be >= 1 (1: any tiling)");
  if (c.splits < 1) return bad("splits", "must be >= 1 (1: no split-KV)");
  return {};
}

// What every level of the plug-in brings to the claim `a`: its adds' rounding, flush to zero, and
// its exp and log budgets where they are coarser than the production path's.
void apply_roundings(const dcpv_claim& c, oracle::Arithmetic& a) {
  const auto coarser = [](std::optional<double> ours, double theirs) -> std::optional<double> {
    if (theirs <= 0.0) return ours;
    return std::max(ours.value_or(0.0), theirs);
  };
  a.truncating_mma = a.truncating_mma || c.accum_rounding_nearest == 0;
  a.ftz = a.ftz || c.ftz != 0;
  a.exp_rel_err = coarser(a.exp_rel_err, c.exp_rel_err);
  a.log_rel_err = coarser(a.log_rel_err, c.log_rel_err);
}

// The claim's arithmetic of a partial (and, with `merged`, of the merge it takes part in) on top
// of the production path's claim `a` for a step of N ranks.
void apply_claim(const dcpv_claim& c, int64_t n, bool partial, bool merged, oracle::Arithmetic& a) {
  apply_roundings(c, a);
  // The ABI has no word for a dot's order or a merge's form: the plug-in's are any.
  a.dot_lanes = 0;
  if (merged) a.merge_scaled = false;
  a.tf32 = c.tf32 != 0;
  a.p_cast = c.p_cast == DCPV_F32 ? std::nullopt : claim_format(c.p_cast);
  a.tile = c.tile;
  if (partial) {
    a.shards = c.splits;
    a.out = *claim_format(c.partial_o);
    return;
  }
  a.shards = n * c.splits;
  a.merge_terms = n;
  a.partial_o = *claim_format(c.partial_o);
  if (c.splits > 1) a.layout.reset();  // a rank's keys are split further
  if (merged) a.merge_accum = *claim_format(c.combine_accum);
}

// DCPV_LACKS_* as `properties --without` names the features: bit i, name i.
constexpr const char* kLackNames[] = DCPV_LACKS_NAMES;
constexpr uint32_t kLackMask = (1u << std::size(kLackNames)) - 1;
// The bits versions 2 and 3 know; a plug-in lacks every later one.
constexpr uint32_t kLackMaskV2 = (1u << DCPV_LACKS_V2_COUNT) - 1;
constexpr uint32_t kLackMaskV3 = (1u << DCPV_LACKS_V3_COUNT) - 1;
static_assert(DCPV_LACKS_PAGE_SCALES == 1u << (std::size(kLackNames) - 1), "a name for every bit");
static_assert(DCPV_LACKS_BATCH == 1u << (DCPV_LACKS_V2_COUNT - 1), "version 2's bits");
static_assert(DCPV_LACKS_TOKEN_SCALES == 1u << (DCPV_LACKS_V3_COUNT - 1), "version 3's bits");
// The bits a plug-in of ABI `abi` (2 or later) knows.
constexpr uint32_t known_lacks(int32_t abi) {
  return abi >= DCPV_ABI_VERSION_4   ? kLackMask
         : abi >= DCPV_ABI_VERSION_3 ? kLackMaskV3
                                     : kLackMaskV2;
}

// A version-2, 3 or 4 plug-in's fields beyond version 1's, one-line errors naming them as impl.h
// does.
oracle::Status check_v2_fields(const std::string& path, const dcpv_impl_v2& v) {
  if (v.kv_dequant != DCPV_F32 && v.kv_dequant != DCPV_BF16 && v.kv_dequant != DCPV_F16)
    return DCP_ERROR("--impl ", path, ": kv_dequant must be DCPV_F32, DCPV_BF16 or DCPV_F16");
  const uint32_t known = known_lacks(v.abi_version);
  if ((v.lacks & ~known) != 0)
    return DCP_ERROR("--impl ", path, ": lacks has bits outside DCPV_LACKS_* of ABI version ",
                     v.abi_version, " (", v.lacks, ")");
  if (v.page_layout != DCPV_PAGES_NHD && v.page_layout != DCPV_PAGES_HND)
    return DCP_ERROR("--impl ", path, ": page_layout must be DCPV_PAGES_NHD or DCPV_PAGES_HND");
  return {};
}

// A combine of one partial is not exact with a 16-bit partial or sum or a coarse exponential
// (dcp_bridge.cpp, host_claim): then it counts as a merge of two parts, one empty.
void single_partial_merge(const dcpv_claim& c, oracle::Arithmetic& a) {
  if (a.shards == 1 &&
      (c.partial_o != DCPV_F32 || c.combine_accum != DCPV_F32 || c.exp_rel_err > 0.0))
    a.shards = 2;
}

// The names of the bits of `mask`.
std::vector<std::string> lack_names(uint32_t mask) {
  std::vector<std::string> out;
  for (size_t i = 0; i < std::size(kLackNames); ++i)
    if ((mask & (1u << i)) != 0) out.emplace_back(kLackNames[i]);
  return out;
}

}  // namespace

void set_last_words(LastWords words) {
  static std::once_flag undertaker;
  LastWords* fresh = words ? new LastWords(std::move(words)) : nullptr;
  LastWords* old = nullptr;
  bool spoken = false;
  {
    const std::lock_guard<std::mutex> lock(g_words_mu);
    spoken = g_spoken.load();
    if (!spoken) old = g_last_words.exchange(fresh);
  }
  // Once spoken, the words are the speaker's, and the frame they refer to must outlive them:
  // this thread waits for the speaker to end the process.
  if (spoken) park_forever();
  delete old;  // (outside the lock: a crash inside malloc must not hold the speaker up)
  if (fresh != nullptr) std::call_once(undertaker, start_undertaker);
}

std::string Plugin::levels() const {
  std::string s;
  for (const auto& [has, name] :
       {std::pair{has_paged(), "paged"}, std::pair{has_partial(), "partial"},
        std::pair{has_combine(), "combine"}, std::pair{has_step(), "step"}})
    if (has) s += (s.empty() ? "" : "+") + std::string(name);
  return s;
}

uint32_t Plugin::uncarried() const { return kLackMask & ~known_lacks(abi); }

std::vector<std::string> Plugin::lacked_features() const { return lack_names(lacks | uncarried()); }
std::vector<std::string> Plugin::uncarried_features() const { return lack_names(uncarried()); }

oracle::Expected<Plugin> load_plugin(const std::string& path, std::chrono::milliseconds limit) {
  // A bare file name would make dlopen search the library path; a plug-in is named by its path.
  const std::string where = path.find('/') == std::string::npos ? "./" + path : path;
  // dlopen of a FIFO or a device waits for a writer: only a regular file is opened.
  struct stat st {};
  if (::stat(where.c_str(), &st) != 0)
    return DCP_ERROR("--impl ", path, ": cannot load: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return DCP_ERROR("--impl ", path, ": not a regular file; expected a shared library");
  // Loading runs the library's constructors, and dcpv_get_impl is its code: both under the
  // watch, as a level is. The library is never unloaded (RTLD_NODELETE): a thread it started may
  // still be running its code when the process ends.
  const std::string what = "implementation " + oracle::printable(path) + ": loading it";
  std::string thrown;
  void* h = nullptr;
  const dcpv_impl* impl = nullptr;
  const dcpv_impl_v2* impl_v2 = nullptr;
  bool exported = true, exported_v2 = false;
  watched(
      what, limit,
      [&] {
        h = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h == nullptr) return 0;
        using GetImplV2 = const dcpv_impl_v2* (*)();
        if (const auto get_v2 = reinterpret_cast<GetImplV2>(dlsym(h, "dcpv_get_impl_v2"))) {
          exported_v2 = true;
          impl_v2 = get_v2();
          return 0;
        }
        using GetImpl = const dcpv_impl* (*)();
        const auto get = reinterpret_cast<GetImpl>(dlsym(h, "dcpv_get_impl"));
        exported = get != nullptr;
        if (exported) impl = get();
        return 0;
      },
      &thrown);
  if (!thrown.empty()) return DCP_ERROR("--impl ", path, ": loading it ", thrown);
  if (h == nullptr) return DCP_ERROR("--impl ", path, ": cannot load: ", dlerror());
  Plugin p;
  p.path = path;
  p.handle = std::shared_ptr<void>(h, [](void* x) { dlclose(x); });
  if (!exported)
    return DCP_ERROR("--impl ", path,
                     ": exports no dcpv_get_impl_v2 or dcpv_get_impl (include/dcp_verify/impl.h; "
                     "declare it extern \"C\" in C++)");
  if (exported_v2) {
    if (impl_v2 == nullptr) return DCP_ERROR("--impl ", path, ": dcpv_get_impl_v2 returned NULL");
    if (impl_v2->abi_version < DCPV_ABI_VERSION_2 || impl_v2->abi_version > DCPV_ABI_VERSION_4)
      return DCP_ERROR("--impl ", path, ": dcpv_get_impl_v2 gave ABI version ",
                       impl_v2->abi_version, "; expected ", DCPV_ABI_VERSION_2, ", ",
                       DCPV_ABI_VERSION_3, " or ", DCPV_ABI_VERSION_4);
    DCP_TRY(check_v2_fields(path, *impl_v2));
    if (impl_v2->paged != nullptr && impl_v2->partial != nullptr)
      return DCP_ERROR("--impl ", path,
                       ": provides both paged and partial; a rank's attention is one of them");
    p.abi = impl_v2->abi_version;
    p.paged = impl_v2->paged;
    p.kv_dequant = impl_v2->kv_dequant;
    p.lacks = impl_v2->lacks;
    p.page_layout = static_cast<dcpv_page_layout>(impl_v2->page_layout);
    p.v2_fields = std::make_shared<const dcpv_impl>(
        dcpv_impl{DCPV_ABI_VERSION, impl_v2->name, impl_v2->claim, impl_v2->self, impl_v2->partial,
                  impl_v2->combine, impl_v2->step});
    impl = p.v2_fields.get();
  } else if (impl == nullptr) {
    return DCP_ERROR("--impl ", path, ": dcpv_get_impl returned NULL");
  } else if (impl->abi_version != DCPV_ABI_VERSION) {
    return DCP_ERROR("--impl ", path, ": dcpv_get_impl gave ABI version ", impl->abi_version,
                     "; expected ", DCPV_ABI_VERSION, " (versions ", DCPV_ABI_VERSION_2, " to ",
                     DCPV_ABI_VERSION_4, " export dcpv_get_impl_v2)");
  }
  p.impl = impl;
  if (p.impl->name == nullptr || p.impl->name[0] == '\0')
    return DCP_ERROR("--impl ", path, ": the implementation has no name");
  if (!p.attends() && !p.has_combine() && !p.has_step())
    return DCP_ERROR("--impl ", path, ": '", p.impl->name, "' provides no level (",
                     p.abi != DCPV_ABI_VERSION ? "paged, " : "",
                     "partial, combine and step are all NULL)");
  DCP_TRY(check_claim(path, p.impl->claim));
  return p;
}

gpu::DcpConfig plugin_config(const Plugin& p, gpu::DcpConfig cfg) {
  cfg.math = {};
  if (p.attends()) cfg.splits = 1;  // the plug-in's own split-KV is its claim's
  if (p.has_paged() && cfg.page_size == 0) {
    const int64_t I = cfg.layout.interleave;
    cfg.page_size = (kPagedLevelRows + I - 1) / I * I;
  }
  return cfg;
}

oracle::Arithmetic plugin_claim(const Plugin& p, const gpu::DcpConfig& cfg, bool partial) {
  const gpu::DcpConfig run = plugin_config(p, cfg);
  oracle::Arithmetic a = props::host_claim(run, partial);
  const dcpv_claim& c = p.impl->claim;
  const bool combines = p.has_combine() && run.strategy == gpu::CommStrategy::a2a;
  if (p.attends()) {
    apply_claim(c, run.layout.ranks, partial, combines, a);
    // The paged level reads the cache as stored and dequantizes it itself.
    if (p.has_paged() && p.kv_dequant != DCPV_F32) a.kv_dequant = claim_format(p.kv_dequant);
  } else if (combines && !partial) {  // the production partials, the plug-in's merge
    apply_roundings(c, a);
    a.merge_accum = *claim_format(c.combine_accum);
    a.merge_scaled = false;  // the plug-in's merge, of any form
  }
  if (!partial && (p.attends() || combines)) single_partial_merge(c, a);
  return a;
}

oracle::Arithmetic plugin_step_claim(const Plugin& p, const gpu::DcpConfig& cfg, bool partial) {
  gpu::DcpConfig run = cfg;
  run.math = {};
  run.splits = 1;
  oracle::Arithmetic a = props::host_claim(run, partial);
  apply_claim(p.impl->claim, run.layout.ranks, partial, true, a);
  if (!partial) single_partial_merge(p.impl->claim, a);
  return a;
}

props::DcpBackend plugin_step_backend(const Plugin& p, std::chrono::milliseconds deadline) {
  auto run = [p, deadline](const gpu::DcpInputs& in,
                           const gpu::DcpConfig& cfg) -> gpu::Result<gpu::GroupRun> {
    DCP_GPU_TRY(gpu::validate_inputs(in, cfg));
    DCP_GPU_TRY(head_vectors_carried(
        p, [&](const gpu::HeadVector& hv) { return !(in.*hv.values).empty(); }));
    DCP_GPU_TRY(scales_carried(p, in.kv_scale_grain == gpu::ScaleGrain::token &&
                                      !(in.k_scale.empty() && in.v_scale.empty())));
    if (in.batched())
      return DCP_GPU_ERROR("plug-in: ABI ", p.abi,
                           "'s step level takes one request; this step is a batch of ",
                           in.requests());
    DCP_GPU_ASSIGN(geo, gpu::DcpGeometry::create(cfg, in.dims));
    const gpu::AttentionDims& d = in.dims;
    const int64_t N = cfg.layout.ranks, T = d.tokens, Hq = d.q_heads, dv = d.v_dim, S = in.seq;
    const auto scale_of = [&](const std::vector<float>& s) {
      return s.empty() ? ScaleOf{} : ScaleOf([&s, &in](int64_t j, int64_t g) {
        return gpu::input_scale(in, s, j, g);
      });
    };
    const Rows k = rows_in(in.kv_dtype, in.k.dtype, in.k.data, S, d.kv_heads, d.head_dim,
                           d.head_dim, scale_of(in.k_scale), in.k.quantize);
    const Rows v = d.shared_latent ? Rows{}
                                   : rows_in(in.kv_dtype, in.v.dtype, in.v.data, S, d.kv_heads, dv,
                                             dv, scale_of(in.v_scale), in.v.quantize);
    std::vector<float> o(static_cast<size_t>(T * Hq * dv)), lse(static_cast<size_t>(T * Hq));
    std::vector<float> op(static_cast<size_t>(N * T * Hq * dv)),
        lp(static_cast<size_t>(N * T * Hq));
    dcpv_step_args a{};
    a.ranks = N;
    a.interleave = cfg.layout.interleave;
    a.tokens = T;
    a.q_heads = Hq;
    a.kv_heads = d.kv_heads;
    a.head_dim = d.head_dim;
    a.v_dim = dv;
    a.seq = S;
    a.shared_latent = d.shared_latent ? 1 : 0;
    a.lse_base = cfg.base == gpu::LseBase::e ? 0 : 1;
    a.causal = in.causal ? 1 : 0;
    a.window = in.window;
    a.scale = in.scale;
    a.softcap = in.softcap;
    a.q = dense(in.q.data(), DCPV_F32, {T, Hq, d.head_dim});
    a.q_pos = dense(in.q_pos.data(), DCPV_I64, {T});
    a.k = k.t;
    a.v = d.shared_latent ? dcpv_tensor{} : v.t;
    if (d.shared_latent) a.v.dtype = a.k.dtype;
    a.sink = in.sink.empty() ? dcpv_tensor{} : dense(in.sink.data(), DCPV_F32, {Hq});
    a.topk = in.topk.empty() ? dcpv_tensor{} : dense(in.topk.data(), DCPV_I64, {T, in.topk_k});
    a.o = dense(o.data(), DCPV_F32, {T, Hq, dv});
    a.lse = dense(lse.data(), DCPV_F32, {T, Hq});
    a.o_partial = dense(op.data(), DCPV_F32, {N, T, Hq, dv});
    a.lse_partial = dense(lp.data(), DCPV_F32, {N, T, Hq});
    if (!in.alibi_slopes.empty()) a.alibi_slopes = dense(in.alibi_slopes.data(), DCPV_F32, {Hq});
    char err[kErrBytes] = {};
    const std::string what = level_call(p, "step", std::nullopt);
    const auto call = [&] { return p.impl->step(p.impl->self, &a, err, sizeof err); };
    std::string thrown;
    if (watched(what, deadline, call, &thrown) != 0)
      return DCP_GPU_ERROR(what, " failed: ", thrown.empty() ? reason(err) : thrown);
    gpu::GroupRun out = gpu::empty_group_run(geo, d);
    out.o = std::move(o);
    out.lse = std::move(lse);
    if (a.wrote_partials != 1) {  // judged on its output alone
      out.partial_o.clear();
      out.partial_lse.clear();
      return out;
    }
    // Each TP rank's partial: its DCP rank's, over its group's Hg heads.
    for (int64_t tp = 0; tp < geo.tp; ++tp) {
      const int64_t r = geo.dcp_rank(tp), h0 = geo.group_head0(tp), hg = geo.hg;
      auto& po = out.partial_o[static_cast<size_t>(tp)];
      auto& pl = out.partial_lse[static_cast<size_t>(tp)];
      po.resize(static_cast<size_t>(T * hg * dv));
      pl.resize(static_cast<size_t>(T * hg));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < hg; ++h) {
          const int64_t from = (r * T + t) * Hq + h0 + h, to = t * hg + h;
          pl[static_cast<size_t>(to)] = lp[static_cast<size_t>(from)];
          std::copy_n(&op[static_cast<size_t>(from * dv)], dv, &po[static_cast<size_t>(to * dv)]);
        }
    }
    return out;
  };
  auto claim = [p](const gpu::DcpConfig& cfg, bool partial) {
    return plugin_step_claim(p, cfg, partial);
  };
  return props::DcpBackend(std::move(run), std::move(claim));
}

props::DcpBackend plugin_backend(const Plugin& p, std::chrono::milliseconds deadline) {
  auto run = [p, deadline](const gpu::DcpInputs& in, const gpu::DcpConfig& given) {
    gpu::DcpConfig cfg = plugin_config(p, given);
    cfg.deadline = deadline;
    const gpu::RankStep step = [&p](gpu::Communicator& comm, const gpu::DcpInputs& inputs,
                                    const gpu::DcpConfig& c, int64_t tp_rank) {
      PluginDevice dev(comm, p, c.deadline);
      return gpu::device_step(dev, inputs, c, tp_rank);
    };
    return gpu::run_dcp_threads(in, cfg, step);
  };
  auto claim = [p](const gpu::DcpConfig& cfg, bool partial) {
    return plugin_claim(p, cfg, partial);
  };
  return props::DcpBackend(std::move(run), std::move(claim));
}

}  // namespace dcp::plugin
