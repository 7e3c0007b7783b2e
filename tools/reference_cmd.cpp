#include "tools/reference_cmd.hpp"

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "harness/tiers.hpp"
#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "oracle/text.hpp"
#include "properties/footprint.hpp"
#include "tools/backends.hpp"
#include "tools/flags.hpp"
#include "tools/session.hpp"

#ifdef DCP_HAVE_MPI
#include <mpi.h>

#include "gpu/comm/comm_mpi.hpp"
#include "tools/mpi_jobs.hpp"
#endif

namespace dcp::tools {
namespace {

struct ReferenceOptions {
  std::string case_path, out_path, tier = "fast";
  int64_t timeout_s = kDefaultTimeoutSeconds;  // under mpirun: how long a process waits for peers
};

#ifdef DCP_HAVE_MPI
// Under mpirun -np P: process r computes the fast tier's states of every row over the keys
// [r S / P, (r + 1) S / P) (the sink on process 0), and process 0 merges them in process order,
// which is key order, with the merge monoid (docs/oracle.md, "Over MPI"). Every wait polls, so
// Ctrl-C on any process ends the job.

// A row's state as doubles: m, z and n[Dv], each hi then lo.
constexpr int64_t kStateFixed = 4;

int run_reference_mpi(const ReferenceOptions& o, const harness::Limits& lim, int64_t rank,
                      int64_t size) {
  auto bad = [&](const std::string& why) {
    return refuse("reference", "process " + std::to_string(rank) + ": " + why, std::cerr);
  };
  int code = kExitOk;
  std::string why;
  double work = 0.0;  // the whole case's, which bounds any process's share
  oracle::Expected<oracle::Case> c = oracle::Status();
  std::vector<oracle::MergeState<oracle::dd>> rows;
  InterruptGuard guard;
  if (harness::parse_tier(o.tier) != oracle::Tier::fast) {
    why = "--tier certify runs in one process (the certify tier is for small cases)";
    code = kExitBadInput;
  } else if (const auto out = output_error({"--out", o.out_path}, {{"--case", o.case_path}})) {
    why = *out;
    code = kExitBadInput;
  } else {
    // The node's processes share its memory; each maps the file and pages in its keys only.
    harness::Limits mine = lim;
    mine.memory_bytes /= static_cast<double>(gpu::mpi_node().size);
    props::Footprint need =
        props::file_footprint(harness::file_bytes(o.case_path), props::FileRead::case_in_place);
    c = oracle::load_case(o.case_path);
    if (c) {
      const props::Footprint judge = props::judge_footprint(*c, 1, oracle::Tier::fast);
      need.bytes += judge.bytes;
      work = judge.work;
    }
    if (!c) {
      why = c.status().message(), code = kExitBadInput;
    } else if (const auto over = harness::over_limits(need, mine)) {
      why = "--case " + o.case_path + ": " + *over, code = kExitBadInput;
    } else {
      const int64_t S = c->seq(), lo = S * rank / size, hi = S * (rank + 1) / size;
      std::optional<Progress> progress;
      oracle::Watch watch;
      if (rank == 0)
        watch.progress = [&](int64_t done, int64_t total) {
          if (!progress) progress.emplace("reference", total);
          progress->update(done);
        };
      watch.stop = [] { return interrupted(); };
      auto mine_rows = oracle::attend_rows_watched(
          *c, [lo, hi](int64_t p) { return p >= lo && p < hi; }, rank == 0, watch);
      if (progress) progress->clear();
      if (mine_rows) {
        rows = std::move(*mine_rows);
      } else {
        why = mine_rows.status().message();
        code = interrupted() ? kExitInterrupted : kExitBadInput;
      }
    }
  }
  // Every process reaches this point; the job goes on only if all of them got here whole.
  const std::string stopped =
      "# reference: INTERRUPTED (process " + std::to_string(rank) + "); nothing written\n";
  // The peers may still be computing: a process waits --timeout beyond the case's work.
  const JobWait wait{"reference", stopped, std::chrono::seconds(o.timeout_s) + judging_time(work),
                     "the other processes' shares"};
  const int job = job_code(code, wait);
  if (job != kExitOk) {
    if (code == kExitInterrupted) {
      std::cout << "# reference: INTERRUPTED (process " << rank << ": " << why << "); "
                << oracle::printable(o.out_path) << " not written\n";
    } else if (code != kExitOk) {
      bad(why);
    }
    return job;
  }
  const int64_t T = c->tokens(), Hq = c->q_heads(), dv = c->v_dim, width = kStateFixed + 2 * dv;
  std::vector<double> packed(static_cast<size_t>(T * Hq * width));
  for (int64_t r = 0; r < T * Hq; ++r) {
    const auto& st = rows[static_cast<size_t>(r)];
    double* p = &packed[static_cast<size_t>(r * width)];
    p[0] = st.m.hi, p[1] = st.m.lo, p[2] = st.z.hi, p[3] = st.z.lo;
    for (int64_t i = 0; i < dv; ++i)
      p[kStateFixed + 2 * i] = st.n[i].hi, p[kStateFixed + 2 * i + 1] = st.n[i].lo;
  }
  std::vector<double> all(rank == 0 ? packed.size() * static_cast<size_t>(size) : 0);
  MPI_Request req;
  MPI_Igather(packed.data(), static_cast<int>(packed.size()), MPI_DOUBLE, all.data(),
              static_cast<int>(packed.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD, &req);
  wait_polling(&req, wait);
  if (rank != 0) return kExitOk;
  for (int64_t q = 1; q < size; ++q)  // process q's keys follow process q - 1's
    for (int64_t r = 0; r < T * Hq; ++r) {
      const double* p = &all[static_cast<size_t>((q * T * Hq + r) * width)];
      oracle::MergeState<oracle::dd> st =
          oracle::MergeState<oracle::dd>::identity(dv, oracle::LseBase::e);
      st.m = oracle::dd(p[0], p[1]);
      st.z = oracle::dd(p[2], p[3]);
      for (int64_t i = 0; i < dv; ++i)
        st.n[i] = oracle::dd(p[kStateFixed + 2 * i], p[kStateFixed + 2 * i + 1]);
      rows[static_cast<size_t>(r)] = oracle::combine(rows[static_cast<size_t>(r)], st);
    }
  const oracle::Attention ref = oracle::to_attention(*c, rows);
  if (const auto st = oracle::finite_attention(*c, ref); !st) return bad(st.message());
  if (const auto st = oracle::save_attention(o.out_path, ref); !st) return bad(st.message());
  std::cout << "reference: " << oracle::printable(o.case_path) << " -> "
            << oracle::printable(o.out_path) << "  o " << oracle::shape_string(ref.o.shape)
            << "  lse " << oracle::shape_string(ref.lse.shape) << " (base "
            << oracle::lse_base_name(ref.base) << ", tier fast, " << size << " processes)\n";
  return kExitOk;
}
#endif

int run_reference(const ReferenceOptions& o, const harness::Limits& lim) {
  auto bad = [](const std::string& why) { return refuse("reference", why, std::cerr); };
  if (const auto why = output_error({"--out", o.out_path}, {{"--case", o.case_path}}))
    return bad(*why);
  const props::Footprint file =
      props::file_footprint(harness::file_bytes(o.case_path), props::FileRead::case_in_place);
  if (const auto why = harness::over_limits(file, lim))
    return bad("--case " + o.case_path + ": " + *why);
  auto c = oracle::load_case(o.case_path);
  if (!c) return bad(c.status().message());
  const oracle::Tier tier = harness::parse_tier(o.tier).value_or(oracle::Tier::fast);
  props::Footprint judge = props::judge_footprint(*c, 1, tier);
  judge.bytes += file.bytes;
  if (const auto why = harness::over_limits(judge, lim))
    return bad("--case " + o.case_path + ": " + *why);
  // A progress line on a terminal, and Ctrl-C honoured between blocks of keys (fast tier).
  InterruptGuard guard;
  std::optional<Progress> progress;
  oracle::Watch watch;
  watch.progress = [&](int64_t done, int64_t total) {
    if (!progress) progress.emplace("reference", total);
    progress->update(done);
  };
  watch.stop = [] { return interrupted(); };
  auto ref = oracle::reference(*c, tier, watch);
  if (progress) progress->clear();
  if (!ref && interrupted()) {
    std::cout << "# reference: INTERRUPTED (" << oracle::one_line(ref.status().message()) << "); "
              << oracle::printable(o.out_path) << " not written\n";
    return kExitInterrupted;
  }
  if (!ref) return bad(ref.status().message());
  if (const auto st = oracle::save_attention(o.out_path, *ref); !st) return bad(st.message());
  std::cout << "reference: " << oracle::printable(o.case_path) << " -> "
            << oracle::printable(o.out_path) << "  o " << oracle::shape_string(ref->o.shape)
            << "  lse " << oracle::shape_string(ref->lse.shape) << " (base "
            << oracle::lse_base_name(ref->base) << ", tier " << o.tier << ")\n";
  return kExitOk;
}

}  // namespace

Command add_reference_command(CLI::App& app) {
  auto o = std::make_shared<ReferenceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "reference", "Compute a case's exact attention: o [T, Hq, Dv] and lse [T, Hq] as F64");
  cmd->add_option("--case", o->case_path, "Case file (safetensors, docs/format.md)")->required();
  cmd->add_option("--out", o->out_path, "Output file (safetensors)")->required();
  cmd->add_option("--tier", o->tier, "fast (double-double) or certify (MPFR, 266 bits)")
      ->check(CLI::IsMember(harness::tier_names()))
      ->capture_default_str();
  add_timeout_flag(cmd, o->timeout_s);
  return {cmd, [o](const harness::Limits& lim) {
#ifdef DCP_HAVE_MPI
            if (launched_by_mpirun()) {
              if (const auto st = gpu::mpi_init(nullptr, nullptr); !st)
                return refuse("reference", st.message(), std::cerr);
              const int64_t size = gpu::mpi_world_size();
              int code = kExitOk;
              if (size <= 1) {
                code = run_reference(*o, lim);
              } else if (const auto differ =
                             inputs_differ("reference", std::chrono::seconds(o->timeout_s))) {
                code = refuse("reference", *differ, std::cerr);
              } else {
                code = run_reference_mpi(*o, lim, gpu::mpi_world_rank(), size);
              }
              gpu::mpi_finalize(code);
              return code;
            }
#endif
            return run_reference(*o, lim);
          }};
}

}  // namespace dcp::tools
