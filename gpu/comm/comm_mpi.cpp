#include "gpu/comm/comm_mpi.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <thread>
#include <vector>

namespace dcp::gpu {
namespace {

constexpr int kDataTag = 101;    // collective payloads between the members of a group
constexpr int kNoticeTag = 102;  // a rank's failure notice, to every other rank
constexpr int kAgreeTag = 103;   // outcomes and verdicts of mpi_agree
constexpr int kGatherTag = 104;  // sizes and bytes of mpi_gather_bytes
// The longest message carried between ranks (a notice or a verdict): one line, cut beyond this.
constexpr size_t kMaxText = 1000;
// Waits poll: 20 us between tests at first, doubling up to 2 ms, so that a rank waiting for a
// slow peer costs little CPU (four processes on two cores must still make progress).
constexpr auto kFirstPause = std::chrono::microseconds(20);
constexpr auto kLongestPause = std::chrono::microseconds(2000);

bool g_deadline_passed = false;  // a wait of this process reached its deadline
bool g_peer_failed = false;      // a wait ended on another rank's failure notice
bool g_in_flight = false;        // some message of this rank may still be in flight
bool g_job_in_flight = false;    // the last verdict said some rank's may (see mpi_finalize)
bool g_notified = false;         // this rank told the others it failed
// How long a rank may wait for rank 0 to end the job (the last agreement's deadline).
std::chrono::milliseconds g_last_deadline = kDefaultCollectiveDeadline;

GpuStatus mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return {};
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return DCP_GPU_ERROR(call, " failed: ", std::string(msg, static_cast<size_t>(len)));
}
#define DCP_MPI_CHECK(call) DCP_GPU_TRY(mpi_check((call), #call))

// The messages of one exchange. Their buffers live here until every request completes; an
// exchange given up after a failure is kept until the process ends (g_abandoned), so that MPI
// never reads or writes memory that was freed.
struct Flight {
  std::vector<std::vector<uint8_t>> buf;
  std::vector<MPI_Request> req;
  std::vector<int> peer;     // [requests] the world rank each one talks to
  std::vector<char> recv;    // [requests] 1: a receive
  std::vector<size_t> want;  // [requests] bytes a receive must bring
};
std::vector<std::unique_ptr<Flight>> g_abandoned;

void abandon(std::unique_ptr<Flight> f) {
  g_in_flight = true;
  g_abandoned.push_back(std::move(f));
}

// A failure notice from another rank, if one has arrived.
std::optional<std::string> take_notice() {
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(MPI_ANY_SOURCE, kNoticeTag, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag)
    return std::nullopt;
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string text(static_cast<size_t>(std::max(n, 0)), '\0');
  MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, kNoticeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  g_peer_failed = true;
  return "rank " + std::to_string(st.MPI_SOURCE) + " failed: " + text;
}

// Polls every request of `f` until all complete. Ends early, with an error, on another rank's
// failure notice (when `notices`) or at the deadline, naming the ranks not heard from.
GpuStatus wait_flight(std::unique_ptr<Flight>& f, const char* what,
                      std::chrono::milliseconds deadline, bool notices) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  std::vector<char> done(f->req.size(), 0);
  auto pause = kFirstPause;
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < f->req.size(); ++i) {
      if (done[i]) continue;
      int flag = 0;
      MPI_Status st;
      if (const GpuStatus s = mpi_check(MPI_Test(&f->req[i], &flag, &st), "MPI_Test"); !s) {
        abandon(std::move(f));
        return s;
      }
      done[i] = static_cast<char>(flag);
      all = all && flag;
      int got = 0;
      if (flag && f->recv[i] &&
          (MPI_Get_count(&st, MPI_BYTE, &got) != MPI_SUCCESS ||
           static_cast<size_t>(got) != f->want[i])) {
        const int who = f->peer[i];
        const size_t want = f->want[i];
        abandon(std::move(f));
        return DCP_GPU_ERROR(what, ": rank ", who, " sent ", got, " bytes; expected ", want);
      }
    }
    if (all) return {};
    if (notices) {
      if (const auto why = take_notice()) {
        abandon(std::move(f));
        return DCP_GPU_ERROR(what, ": ", *why);
      }
    }
    if (std::chrono::steady_clock::now() >= until) {
      // The peers whose messages have not arrived; only when every receive is in, those that
      // have not taken this rank's messages.
      std::vector<int64_t> missing;
      for (size_t i = 0; i < f->req.size(); ++i)
        if (!done[i] && f->recv[i]) missing.push_back(f->peer[i]);
      if (missing.empty())
        for (size_t i = 0; i < f->req.size(); ++i)
          if (!done[i]) missing.push_back(f->peer[i]);
      std::sort(missing.begin(), missing.end());
      missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
      g_deadline_passed = true;
      abandon(std::move(f));
      return DCP_GPU_ERROR(what, ": ", rank_list(missing), " did not arrive within ",
                           std::chrono::duration<double>(deadline).count(),
                           " s (stopped, hung or dead; DcpConfig.deadline sets the wait)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

// One round of messages within the group of world ranks [first, first + n), where this process
// is member `me`: send[j] goes to member j and recv_bytes[j] bytes come from member j (nothing
// when empty or 0). Returns what arrived, by member (this member's own block copied).
Result<std::vector<std::vector<uint8_t>>> exchange(
    int64_t first, int64_t n, int64_t me, const std::vector<std::span<const uint8_t>>& send,
    const std::vector<size_t>& recv_bytes, int tag, const char* what,
    std::chrono::milliseconds deadline, bool notices) {
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)  // before anything is posted
    if (send[static_cast<size_t>(j)].size() > static_cast<size_t>(INT_MAX) ||
        recv_bytes[static_cast<size_t>(j)] > static_cast<size_t>(INT_MAX))
      return DCP_GPU_ERROR(what, ": a message of more than 2^31 - 1 bytes (MPI's int count)");
  auto f = std::make_unique<Flight>();
  std::vector<size_t> slot(static_cast<size_t>(n), SIZE_MAX);  // member -> receive buffer
  // Posts one message. Once anything is posted, a failure abandons the flight: its buffers must
  // outlive its requests.
  auto post = [&f](bool receive, int peer, std::vector<uint8_t> bytes, int tag_) -> GpuStatus {
    f->buf.push_back(std::move(bytes));
    f->req.emplace_back();
    f->peer.push_back(peer);
    f->recv.push_back(receive ? 1 : 0);
    f->want.push_back(receive ? f->buf.back().size() : 0);
    uint8_t* p = f->buf.back().data();
    const int count = static_cast<int>(f->buf.back().size());
    const int rc = receive
                       ? MPI_Irecv(p, count, MPI_BYTE, peer, tag_, MPI_COMM_WORLD, &f->req.back())
                       : MPI_Isend(p, count, MPI_BYTE, peer, tag_, MPI_COMM_WORLD, &f->req.back());
    if (rc == MPI_SUCCESS) return {};
    f->req.back() = MPI_REQUEST_NULL;  // never posted: tests as complete
    const GpuStatus st = mpi_check(rc, receive ? "MPI_Irecv" : "MPI_Isend");
    abandon(std::move(f));
    return st;
  };
  for (int64_t j = 0; j < n; ++j) {
    const auto& s = send[static_cast<size_t>(j)];
    const size_t want = recv_bytes[static_cast<size_t>(j)];
    if (j == me) {
      out[static_cast<size_t>(j)].assign(s.begin(), s.end());
      continue;
    }
    const int peer = static_cast<int>(first + j);
    if (want > 0) {
      slot[static_cast<size_t>(j)] = f->buf.size();
      DCP_GPU_TRY(post(true, peer, std::vector<uint8_t>(want), tag));
    }
    if (!s.empty()) DCP_GPU_TRY(post(false, peer, std::vector<uint8_t>(s.begin(), s.end()), tag));
  }
  DCP_GPU_TRY(wait_flight(f, what, deadline, notices));
  for (int64_t j = 0; j < n; ++j)
    if (slot[static_cast<size_t>(j)] != SIZE_MAX)
      out[static_cast<size_t>(j)] = std::move(f->buf[slot[static_cast<size_t>(j)]]);
  return out;
}

std::span<const uint8_t> bytes_of(std::span<const float> x) {
  return {reinterpret_cast<const uint8_t*>(x.data()), x.size_bytes()};
}

class MpiGroup final : public Communicator {
 public:
  MpiGroup(int64_t first, int64_t size, std::chrono::milliseconds deadline)
      : first_(first), size_(size), rank_(mpi_world_rank() - first), deadline_(deadline) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  GpuStatus all_gather(std::span<const float> send, std::span<float> recv) override {
    DCP_GPU_TRY(check_collective("all_gather", size_, send.size(), recv.size(), 1, size_));
    const std::vector<std::span<const uint8_t>> out(static_cast<size_t>(size_), bytes_of(send));
    return deliver("all_gather", out, send.size(), recv);
  }
  GpuStatus all_to_all(std::span<const float> send, std::span<float> recv) override {
    DCP_GPU_TRY(check_collective("all_to_all", size_, send.size(), recv.size(), size_, size_));
    const size_t count = send.size() / static_cast<size_t>(size_);
    std::vector<std::span<const uint8_t>> out;
    for (int64_t d = 0; d < size_; ++d)
      out.push_back(bytes_of(send.subspan(static_cast<size_t>(d) * count, count)));
    return deliver("all_to_all", out, count, recv);
  }
  GpuStatus reduce_scatter_sum(std::span<const float> send, std::span<float> recv,
                               const SumSpec& how) override {
    DCP_GPU_TRY(check_collective("reduce_scatter", size_, send.size(), recv.size(), size_, 1));
    std::vector<float> blocks(send.size());
    DCP_GPU_TRY(all_to_all(send, blocks));
    std::vector<const float*> ptrs(static_cast<size_t>(size_));
    for (int64_t s = 0; s < size_; ++s) ptrs[static_cast<size_t>(s)] = &blocks[s * recv.size()];
    return sum_blocks_ordered(ptrs, static_cast<int64_t>(recv.size()), how, recv);
  }

 private:
  // Sends out[j] to member j and places member s's block of `count` floats at recv[s count].
  GpuStatus deliver(const char* what, const std::vector<std::span<const uint8_t>>& out,
                    size_t count, std::span<float> recv) {
    const std::vector<size_t> want(static_cast<size_t>(size_), count * sizeof(float));
    DCP_GPU_ASSIGN(in, exchange(first_, size_, rank_, out, want, kDataTag, what, deadline_, true));
    for (int64_t s = 0; s < size_; ++s)
      std::memcpy(recv.data() + static_cast<size_t>(s) * count, in[static_cast<size_t>(s)].data(),
                  count * sizeof(float));
    return {};
  }

  int64_t first_, size_, rank_;
  std::chrono::milliseconds deadline_;
};

// An outcome or a verdict on the wire: code, rank, and the message cut to kMaxText.
// in_flight: this rank (in an outcome) or some rank (in a verdict) left messages in flight.
struct Outcome {
  int32_t code;
  int32_t in_flight;
  int64_t rank;
  char text[kMaxText + 1];
};

std::vector<uint8_t> encode(const MpiVerdict& v, bool in_flight) {
  Outcome o;
  std::memset(&o, 0, sizeof o);  // no uninitialized padding on the wire
  o.code = v.code;
  o.in_flight = in_flight ? 1 : 0;
  o.rank = v.rank;
  std::strncpy(o.text, v.message.c_str(), kMaxText);
  std::vector<uint8_t> bytes(sizeof o);
  std::memcpy(bytes.data(), &o, sizeof o);
  return bytes;
}

Outcome decode(const std::vector<uint8_t>& bytes) {
  Outcome o;
  std::memset(&o, 0, sizeof o);
  std::memcpy(&o, bytes.data(), std::min(bytes.size(), sizeof o));
  o.text[kMaxText] = '\0';
  return o;
}

}  // namespace

GpuStatus mpi_init(int* argc, char*** argv) {
  int done = 0;
  MPI_Initialized(&done);
  if (done) return {};
  DCP_MPI_CHECK(MPI_Init(argc, argv));
  // Errors are values: an MPI call that fails returns its code (mpi_check) instead of ending
  // the job with MPI's own handler.
  DCP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  return {};
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string v(text, static_cast<size_t>(len));
  const size_t eol = v.find_first_of("\r\n,");
  return eol == std::string::npos ? v : v.substr(0, eol);
}

void mpi_finalize(int code) {
  int done = 0;
  MPI_Finalized(&done);
  if (done) return;
  if (!g_in_flight && !g_job_in_flight) {
    MPI_Finalize();
    return;
  }
  // Rank 0 has printed the line that says why; it ends the job. The others wait for that, so
  // that none of them kills rank 0 before its line is out, and end it themselves only if rank 0
  // is gone or stuck.
  if (mpi_world_rank() != 0) std::this_thread::sleep_for(g_last_deadline);
  mpi_abort(code);
}

int64_t mpi_world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

MpiNode mpi_node() {
  // A launcher's variable, when it holds a plain number at least `least`.
  auto from_env = [](std::initializer_list<const char*> names, long least) -> std::optional<long> {
    for (const char* v : names) {
      const char* text = std::getenv(v);
      if (text == nullptr) continue;
      char* end = nullptr;
      const long n = std::strtol(text, &end, 10);
      if (*end == '\0' && n >= least && n <= INT_MAX) return n;
    }
    return std::nullopt;
  };
  const auto rank = from_env({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, 0);
  const auto size = from_env({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, 1);
  if (rank && size) return {*rank, *size};
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
      MPI_SUCCESS)
    return {mpi_world_rank(), mpi_world_size()};  // the safe side: one node for the whole job
  int r = 0, n = 0;
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return {r, n};
}

int64_t mpi_world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
}

std::unique_ptr<Communicator> mpi_group(int64_t first, int64_t size,
                                        std::chrono::milliseconds deadline) {
  return std::make_unique<MpiGroup>(first, size, deadline);
}

GpuStatus mpi_broadcast_bytes(int64_t first, int64_t size, int64_t root, std::span<uint8_t> bytes,
                              std::chrono::milliseconds deadline) {
  const int64_t me = mpi_world_rank() - first;
  std::vector<std::span<const uint8_t>> out(static_cast<size_t>(size));
  std::vector<size_t> want(static_cast<size_t>(size), 0);
  if (me == root)
    std::fill(out.begin(), out.end(), std::span<const uint8_t>(bytes));
  else
    want[static_cast<size_t>(root)] = bytes.size();
  DCP_GPU_ASSIGN(in, exchange(first, size, me, out, want, kDataTag, "broadcast", deadline, true));
  if (me != root) std::memcpy(bytes.data(), in[static_cast<size_t>(root)].data(), bytes.size());
  return {};
}

void mpi_notify_failure(const std::string& why) {
  if (g_notified || g_peer_failed) return;
  g_notified = true;
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  auto f = std::make_unique<Flight>();
  const std::string text = why.substr(0, kMaxText);
  for (int64_t r = 0; r < world; ++r) {
    if (r == me) continue;
    f->buf.emplace_back(text.begin(), text.end());
    f->req.emplace_back();
    MPI_Isend(f->buf.back().data(), static_cast<int>(text.size()), MPI_CHAR, static_cast<int>(r),
              kNoticeTag, MPI_COMM_WORLD, &f->req.back());
  }
  abandon(std::move(f));  // never waited for: a stopped peer would never take it
}

bool mpi_deadline_passed() { return g_deadline_passed; }

Result<MpiVerdict> mpi_agree(int code, const std::string& message,
                             std::chrono::milliseconds deadline,
                             std::chrono::milliseconds root_work) {
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  g_last_deadline = deadline;
  const std::vector<uint8_t> mine = encode({code, me, message}, g_in_flight);
  // Round 1: every outcome to rank 0. Notices are not taken here: this is where failures meet.
  std::vector<std::span<const uint8_t>> out(static_cast<size_t>(world));
  std::vector<size_t> want(static_cast<size_t>(world), 0);
  if (me == 0)
    std::fill(want.begin(), want.end(), mine.size());
  else
    out[0] = mine;
  out[static_cast<size_t>(me)] = mine;
  want[static_cast<size_t>(me)] = mine.size();
  DCP_GPU_ASSIGN(
      in, exchange(0, world, me, out, want, kAgreeTag, "agreeing on the outcome", deadline, false));
  MpiVerdict v;
  bool in_flight = false;
  if (me == 0) {
    for (const auto& bytes : in) {
      const Outcome o = decode(bytes);
      in_flight = in_flight || o.in_flight != 0;
      if (o.code != 0 && v.code == 0) v = {o.code, o.rank, o.text};
    }
  }
  // Round 2: rank 0's verdict to every rank. The others wait twice as long, so that when a rank
  // never arrives it is rank 0, having waited for it, that names it; and longer by the work rank
  // 0 does before it agrees (it judges the request).
  const std::vector<uint8_t> verdict = encode(v, in_flight);
  std::fill(out.begin(), out.end(), std::span<const uint8_t>());
  std::fill(want.begin(), want.end(), 0);
  if (me == 0)
    std::fill(out.begin(), out.end(), std::span<const uint8_t>(verdict));
  else
    want[0] = verdict.size();
  out[static_cast<size_t>(me)] = verdict;
  want[static_cast<size_t>(me)] = verdict.size();
  DCP_GPU_ASSIGN(back, exchange(0, world, me, out, want, kAgreeTag, "agreeing on the outcome",
                                me == 0 ? deadline : 2 * deadline + root_work, false));
  const Outcome o = decode(back[0]);
  g_job_in_flight = o.in_flight != 0;
  return MpiVerdict{o.code, o.rank, o.text};
}

Result<std::vector<std::vector<uint8_t>>> mpi_gather_bytes(std::span<const uint8_t> mine,
                                                           const char* what,
                                                           std::chrono::milliseconds deadline) {
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  // Round 1: every size to rank 0 (8 bytes each); round 2: the bytes, as many as each said.
  const uint64_t size = mine.size();
  std::vector<uint8_t> size_bytes(sizeof size);
  std::memcpy(size_bytes.data(), &size, sizeof size);
  std::vector<std::span<const uint8_t>> out(static_cast<size_t>(world));
  std::vector<size_t> want(static_cast<size_t>(world), 0);
  if (me == 0)
    std::fill(want.begin(), want.end(), sizeof size);
  else
    out[0] = size_bytes;
  out[static_cast<size_t>(me)] = size_bytes;
  want[static_cast<size_t>(me)] = sizeof size;
  // A sender's message may wait for rank 0 to take it: it waits twice as long, so that a rank
  // that never arrives is named by rank 0.
  const std::chrono::milliseconds wait = me == 0 ? deadline : 2 * deadline;
  DCP_GPU_ASSIGN(sizes, exchange(0, world, me, out, want, kGatherTag, what, wait, false));
  std::fill(want.begin(), want.end(), 0);
  std::fill(out.begin(), out.end(), std::span<const uint8_t>());
  if (me == 0)
    for (int64_t j = 0; j < world; ++j) {
      uint64_t n = 0;
      std::memcpy(&n, sizes[static_cast<size_t>(j)].data(), sizeof n);
      want[static_cast<size_t>(j)] = static_cast<size_t>(n);
    }
  else
    out[0] = mine;
  out[static_cast<size_t>(me)] = mine;
  want[static_cast<size_t>(me)] = mine.size();
  DCP_GPU_ASSIGN(all, exchange(0, world, me, out, want, kGatherTag, what, wait, false));
  if (me != 0) return std::vector<std::vector<uint8_t>>{};
  return all;
}

Result<std::vector<std::vector<uint8_t>>> mpi_gather_same_size(
    std::span<const uint8_t> mine, const char* what, std::chrono::milliseconds root_wait,
    std::chrono::milliseconds sender_wait) {
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  std::vector<std::span<const uint8_t>> out(static_cast<size_t>(world));
  std::vector<size_t> want(static_cast<size_t>(world), 0);
  out[static_cast<size_t>(me)] = mine;
  want[static_cast<size_t>(me)] = mine.size();
  if (me == 0)
    std::fill(want.begin(), want.end(), mine.size());
  else
    out[0] = mine;
  DCP_GPU_ASSIGN(all, exchange(0, world, me, out, want, kDataTag, what,
                               me == 0 ? root_wait : sender_wait, true));
  if (me != 0) return std::vector<std::vector<uint8_t>>{};
  return all;
}

}  // namespace dcp::gpu
