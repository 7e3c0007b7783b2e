#include "tests/cuda_emulated/block_emulator.hpp"

#include <cmath>
#include <exception>

namespace dcp::gpu::emu {
namespace {

// Each fiber's stack: the attention body keeps well under 1 KiB of locals; the rest is margin
// for the call frames around it (unoptimized builds included).
constexpr size_t kFiberStackBytes = 64 * 1024;
// The emulator running on this OS thread (makecontext passes no pointer portably).
thread_local BlockEmulator* t_running = nullptr;

}  // namespace

int EmulatedThread::size() const { return b_->n_; }

void EmulatedThread::sync() {
  b_->state_[static_cast<size_t>(tid_)] = BlockEmulator::State::waiting;
  b_->yield_to_scheduler();
}

float EmulatedThread::max(float v) {
  b_->slots_[static_cast<size_t>(tid_)] = v;
  sync();
  float m = b_->slots_[0];
  for (int i = 1; i < b_->n_; ++i) m = std::fmax(m, b_->slots_[static_cast<size_t>(i)]);
  sync();  // nobody rewrites a slot before every thread has read them all
  return m;
}

BlockEmulator::BlockEmulator(int threads, ThreadOrder order)
    : n_(threads),
      order_(order),
      ctx_(static_cast<size_t>(threads)),
      state_(static_cast<size_t>(threads), State::done),
      slots_(static_cast<size_t>(threads), 0.0f) {
  for (int i = 0; i < threads; ++i) stacks_.emplace_back(new char[kFiberStackBytes]);
}

BlockEmulator::~BlockEmulator() = default;

void BlockEmulator::trampoline() {
  BlockEmulator* b = t_running;
  EmulatedThread t(b, b->current_);
  // An exception must not unwind past this frame (there is no caller to catch it).
  try {
    (*b->body_)(t);
  } catch (const std::exception& e) {
    if (b->thrown_.empty()) b->thrown_ = e.what();
  } catch (...) {
    if (b->thrown_.empty()) b->thrown_ = "an exception that is not a std::exception";
  }
  b->state_[static_cast<size_t>(t.tid())] = State::done;
  // Returning resumes uc_link: the scheduler.
}

// Apart from run(): getcontext returns twice, which would put run()'s locals at risk.
bool BlockEmulator::make_fiber(int i) {
  ucontext_t& c = ctx_[static_cast<size_t>(i)];
  if (getcontext(&c) != 0) return false;
  c.uc_stack.ss_sp = stacks_[static_cast<size_t>(i)].get();
  c.uc_stack.ss_size = kFiberStackBytes;
  c.uc_link = &scheduler_;
  makecontext(&c, &BlockEmulator::trampoline, 0);
  state_[static_cast<size_t>(i)] = State::ready;
  return true;
}

void BlockEmulator::yield_to_scheduler() {
  swapcontext(&ctx_[static_cast<size_t>(current_)], &scheduler_);
}

GpuStatus BlockEmulator::run(const std::function<void(EmulatedThread&)>& body) {
  body_ = &body;
  thrown_.clear();
  BlockEmulator* outer = t_running;
  t_running = this;
  for (int i = 0; i < n_; ++i) {
    if (!make_fiber(i)) {
      t_running = outer;
      return DCP_GPU_ERROR("block emulator: getcontext failed");
    }
  }
  GpuStatus st;
  for (int64_t phase = 0;; ++phase) {
    for (int k = 0; k < n_; ++k) {
      const int i = order_ == ThreadOrder::ascending ? k : n_ - 1 - k;
      if (state_[static_cast<size_t>(i)] != State::ready) continue;
      current_ = i;
      swapcontext(&scheduler_, &ctx_[static_cast<size_t>(i)]);
    }
    int waiting = 0, done = 0;
    for (const State s : state_) (s == State::waiting ? waiting : done) += 1;
    if (waiting == 0) break;  // every thread returned
    if (done > 0) {
      st = DCP_GPU_ERROR("block emulator: after barrier phase ", phase, ", ", done,
                         " thread(s) returned while ", waiting,
                         " wait at a barrier (divergent __syncthreads)");
      break;  // the waiting fibers are abandoned; their contexts are rebuilt by the next run
    }
    for (State& s : state_) s = State::ready;  // the barrier releases everyone
  }
  t_running = outer;
  body_ = nullptr;
  if (st && !thrown_.empty()) return DCP_GPU_ERROR("block emulator: a thread threw: ", thrown_);
  return st;
}

}  // namespace dcp::gpu::emu
