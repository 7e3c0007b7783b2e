#include "tools/run_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "gpu/run_threads.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#ifdef DCP_HAVE_MPI
#include "gpu/comm_mpi.hpp"
#endif

namespace dcp::tools {
namespace {

using oracle::DType;
using props::CaseSpec;
using props::DcpSetup;

struct Row {
  DcpSetup setup;
  std::string variant;  // what the row exercises, in words
};

std::string variant_of(const CaseSpec& s) {
  std::string v = s.causal ? "causal" : "full";
  if (s.explicit_pos) v += "+pos";
  if (s.window) v += "+win" + std::to_string(s.window);
  if (s.softcap > 0) v += "+cap";
  if (s.sink) v += "+sink";
  if (s.topk) v += "+top" + std::to_string(s.topk);
  if (s.lse_base == oracle::LseBase::two) v += "+b2";
  return v;
}

CaseSpec gqa_shape(uint64_t seed) {
  CaseSpec s;
  s.tokens = 2;
  s.q_heads = 8;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.v_dim = 64;
  s.seq = 1500;
  s.q_dtype = DType::bf16;
  s.kv_dtype = DType::bf16;
  s.seed = seed;
  return s;
}

CaseSpec mla_shape(uint64_t seed) {
  CaseSpec s = gqa_shape(seed);
  s.tokens = 1;
  s.q_heads = 16;
  s.kv_heads = 1;
  s.head_dim = 72;  // a 64-d latent plus 8 rope dims: the K3 576/512 layout scaled down
  s.v_dim = 64;
  s.shared_latent = true;
  return s;
}

DcpSetup make_row(CaseSpec spec, int64_t tp, int64_t n, int64_t il, gpu::CommStrategy st,
                  bool repl) {
  DcpSetup s;
  s.cfg.tp_size = tp;
  s.cfg.layout = {n, il};
  s.cfg.strategy = st;
  s.cfg.replicate_q = repl;
  s.cfg.base = props::to_gpu_base(spec.lse_base);
  s.chunks = props::make_chunks(spec.seq, spec.seed);
  s.spec = spec;
  return s;
}

// The default sweep. Every row sets its own variant on top of a base shape.
std::vector<Row> default_rows(uint64_t seed) {
  using gpu::CommStrategy;
  const auto ag = CommStrategy::ag_rs, a2a = CommStrategy::a2a;
  std::vector<Row> rows;
  auto add = [&](CaseSpec s, int64_t tp, int64_t n, int64_t il, CommStrategy st, bool repl,
                 gpu::ReduceOrder order = gpu::ReduceOrder::sequential, int64_t splits = 1) {
    DcpSetup r = make_row(s, tp, n, il, st, repl);
    r.cfg.order = order;
    r.cfg.order_seed = seed;
    r.cfg.splits = splits;
    rows.push_back({r, variant_of(s)});
  };
  CaseSpec s = gqa_shape(seed);
  add(s, 1, 1, 1, ag, false);  // one rank: the baseline
  add(s, 2, 2, 1, a2a, false);
  s.window = 256;
  add(s, 4, 4, 1, ag, false, gpu::ReduceOrder::pairwise);
  s = gqa_shape(seed + 1);
  s.softcap = 30.0;
  add(s, 4, 4, 16, a2a, true);
  s = gqa_shape(seed + 2);
  s.sink = true;
  add(s, 8, 8, 1, a2a, false, gpu::ReduceOrder::random, 2);
  s = gqa_shape(seed + 3);
  s.topk = 64;
  add(s, 8, 8, 4, ag, false);
  s = gqa_shape(seed + 4);
  s.lse_base = oracle::LseBase::two;
  add(s, 4, 2, 2, a2a, false);  // two DCP groups in a TP group of 4
  s = gqa_shape(seed + 5);
  s.explicit_pos = true;
  s.window = 100;
  s.sink = true;
  s.lse_base = oracle::LseBase::two;
  add(s, 4, 2, 8, ag, true, gpu::ReduceOrder::random, 3);
  s = gqa_shape(seed + 6);
  s.seq = 3;  // shorter than N: ranks with nothing to attend to
  add(s, 8, 8, 1, a2a, false);
  s = mla_shape(seed + 7);
  add(s, 1, 1, 1, a2a, false);
  add(s, 4, 4, 1, a2a, true);
  s.sink = true;
  add(s, 8, 8, 1, a2a, true, gpu::ReduceOrder::pairwise);
  s = mla_shape(seed + 8);
  s.topk = 128;
  add(s, 8, 8, 64, ag, false);
  s = mla_shape(seed + 9);
  s.window = 300;
  s.lse_base = oracle::LseBase::two;
  add(s, 4, 2, 1, ag, false);
  s = mla_shape(seed + 10);
  s.softcap = 4.0;
  add(s, 4, 4, 3, a2a, false, gpu::ReduceOrder::random, 3);
  return rows;
}

template <class T>
T pick(const std::optional<T>& x, T dflt) {
  return x ? *x : dflt;
}

// One configured row from the flags (seed offset k for --cases).
oracle::Expected<Row> configured_row(const RunOptions& o, uint64_t seed, int64_t world) {
  CaseSpec s;
  gpu::DcpConfig cfg;
  const bool k3 = o.preset && *o.preset == "k3-mla";
  if (o.preset && !k3) return DCP_ERROR("--preset: unknown '", *o.preset, "'; expected k3-mla");
  // K3 MLA: 96 query heads over one shared 576-d latent (512 + 64 rope), TP8 x DCP8, A2A,
  // replicate-q (docs/layout-and-flow.md).
  s.tokens = pick(o.tokens, int64_t{1});
  s.q_heads = pick(o.heads, k3 ? int64_t{96} : int64_t{8});
  s.kv_heads = pick(o.kv_heads, k3 ? int64_t{1} : int64_t{2});
  s.head_dim = pick(o.head_dim, k3 ? int64_t{576} : int64_t{64});
  s.v_dim = pick(o.v_dim, k3 ? int64_t{512} : int64_t{64});
  s.shared_latent = k3 || o.latent;
  s.seq = pick(o.seq, k3 ? int64_t{4096} : int64_t{1024});
  const std::string dt = pick(o.dtype, std::string("bf16"));
  const auto d = gpu::parse_dtype(dt);
  if (!d) return DCP_ERROR("--dtype: got '", dt, "'; expected f32, f16 or bf16");
  s.q_dtype = props::to_oracle_dtype(*d);
  s.kv_dtype = s.q_dtype;
  s.window = pick(o.window, int64_t{0});
  s.softcap = pick(o.softcap, 0.0);
  s.sink = o.sink;
  s.topk = pick(o.topk, int64_t{0});
  const std::string base = pick(o.lse_base, std::string("e"));
  const auto b = oracle::parse_lse_base(base);
  if (!b) return DCP_ERROR("--lse-base: got '", base, "'; expected e or 2");
  s.lse_base = *b;
  s.seed = seed;
  if (s.window < 0) return DCP_ERROR("--window: got ", s.window, "; expected >= 0");
  if (s.softcap < 0) return DCP_ERROR("--softcap: got ", s.softcap, "; expected >= 0");
  if (s.topk < 0) return DCP_ERROR("--topk: got ", s.topk, "; expected >= 0");
  if (s.seq < 0) return DCP_ERROR("--seq: got ", s.seq, "; expected >= 0");
  if (s.tokens < 1) return DCP_ERROR("--tokens: got ", s.tokens, "; expected >= 1");
  if (s.head_dim < 1 || s.v_dim < 1) return DCP_ERROR("--head-dim and --v-dim must be >= 1");
  if (s.q_heads < 1 || s.kv_heads < 1) return DCP_ERROR("--heads and --kv-heads must be >= 1");
  if (s.q_heads % s.kv_heads != 0)
    return DCP_ERROR("--heads ", s.q_heads, " is not a multiple of --kv-heads ", s.kv_heads);

  const int64_t n = pick(o.dcp_size, k3 ? int64_t{8} : (world > 0 ? world : int64_t{2}));
  cfg.layout = {n, pick(o.interleave, int64_t{1})};
  cfg.tp_size = pick(o.tp_size, world > 0 ? world : (k3 ? int64_t{8} : n));
  const std::string cb = pick(o.comm_backend, std::string(k3 ? "a2a" : "ag_rs"));
  const auto st = gpu::parse_strategy(cb);
  if (!st) return DCP_ERROR("--comm-backend: got '", cb, "'; expected ag_rs or a2a");
  cfg.strategy = *st;
  cfg.replicate_q = o.replicate_q || k3;
  const std::string ord = pick(o.order, std::string("seq"));
  const auto od = gpu::parse_reduce_order(ord);
  if (!od) return DCP_ERROR("--order: got '", ord, "'; expected seq, pair or rand");
  cfg.order = *od;
  cfg.order_seed = seed;
  cfg.splits = pick(o.splits, int64_t{1});
  cfg.tile = pick(o.tile, int64_t{64});
  const std::string od_s = pick(o.out_dtype, std::string("f32"));
  const auto out = gpu::parse_dtype(od_s);
  if (!out) return DCP_ERROR("--out-dtype: got '", od_s, "'; expected f32, f16 or bf16");
  cfg.out_dtype = *out;
  cfg.base = props::to_gpu_base(s.lse_base);
  DcpSetup setup;
  setup.spec = s;
  setup.cfg = cfg;
  setup.chunks = props::make_chunks(s.seq, seed);
  // Configuration errors (tp % N, heads % tp, N < 1, I < 1) are bad input, found before running.
  const gpu::AttentionDims dims{s.tokens,   s.q_heads, s.kv_heads,
                                s.head_dim, s.v_dim,   s.shared_latent};
  const gpu::Result<gpu::DcpGeometry> geo = gpu::DcpGeometry::create(cfg, dims);
  if (!geo) return DCP_ERROR(geo.status().message());
  return Row{setup, (k3 ? "k3-mla " : "") + variant_of(s)};
}

std::string shape_of(const CaseSpec& s) {
  std::ostringstream os;
  os << s.tokens << "x" << s.q_heads << "/" << s.kv_heads << "x" << s.head_dim << "/" << s.v_dim
     << (s.shared_latent ? "L" : "");
  return os.str();
}

std::string reproduce_line(const RunOptions& o) {
  std::ostringstream os;
  os << (o.comm == "mpi" ? "mpirun -np <tp> " : "") << "dcp-verify run --seed " << o.seed;
  if (o.comm != "threads") os << " --comm " << o.comm;
  if (o.preset) os << " --preset " << *o.preset;
  auto i = [&](const char* f, const std::optional<int64_t>& v) {
    if (v) os << " " << f << " " << *v;
  };
  i("--dcp-size", o.dcp_size);
  i("--tp-size", o.tp_size);
  i("--interleave", o.interleave);
  i("--seq", o.seq);
  i("--tokens", o.tokens);
  i("--heads", o.heads);
  i("--kv-heads", o.kv_heads);
  i("--head-dim", o.head_dim);
  i("--v-dim", o.v_dim);
  i("--window", o.window);
  i("--topk", o.topk);
  i("--splits", o.splits);
  i("--tile", o.tile);
  if (o.softcap) os << " --softcap " << *o.softcap;
  auto s = [&](const char* f, const std::optional<std::string>& v) {
    if (v) os << " " << f << " " << *v;
  };
  s("--comm-backend", o.comm_backend);
  s("--lse-base", o.lse_base);
  s("--dtype", o.dtype);
  s("--out-dtype", o.out_dtype);
  s("--order", o.order);
  if (o.sink) os << " --sink";
  if (o.replicate_q) os << " --replicate-q";
  if (o.latent) os << " --latent";
  if (o.cases != 1) os << " --cases " << o.cases;
  return os.str();
}

}  // namespace

bool RunOptions::configured() const {
  return preset || dcp_size || tp_size || interleave || seq || tokens || heads || kv_heads ||
         head_dim || v_dim || window || topk || splits || tile || softcap || comm_backend ||
         lse_base || dtype || out_dtype || order || sink || replicate_q || latent || cases != 1;
}

int run_dcp(const RunOptions& o, std::ostream& out, std::ostream& err) {
  if (o.backend != "host") {
    err << "dcp-verify run: --backend " << o.backend
        << " is not built in this binary; expected host\n";
    return kExitBadInput;
  }
  int64_t world = 0;  // 0: threads
  bool root = true;
  if (o.comm == "mpi") {
#ifdef DCP_HAVE_MPI
    world = gpu::mpi_world_size();
    root = gpu::mpi_world_rank() == 0;
#else
    err << "dcp-verify run: --comm mpi: this binary was built without MPI (DCP_MPI=OFF)\n";
    return kExitBadInput;
#endif
  } else if (o.comm != "threads") {
    err << "dcp-verify run: --comm: got '" << o.comm << "'; expected threads or mpi\n";
    return kExitBadInput;
  }
  if (o.cases < 1) {
    err << "dcp-verify run: --cases: got " << o.cases << "; expected >= 1\n";
    return kExitBadInput;
  }

  std::vector<Row> rows;
  if (o.configured()) {
    for (int64_t k = 0; k < o.cases; ++k) {
      oracle::Expected<Row> r = configured_row(o, o.seed + static_cast<uint64_t>(k), world);
      if (!r) {
        if (root) err << "dcp-verify run: " << r.status().message() << "\n";
        return kExitBadInput;
      }
      rows.push_back(*r);
    }
  } else {
    for (const Row& r : default_rows(o.seed))
      if (world == 0 || r.setup.cfg.tp_size == world) rows.push_back(r);
    if (rows.empty()) {
      if (root)
        err << "dcp-verify run: --comm mpi: the default sweep has no rows for " << world
            << " processes (it has rows for 1, 2, 4 and 8); pass --dcp-size and --tp-size\n";
      return kExitBadInput;
    }
  }

  if (root) {
    out << "# dcp-verify run  backend=" << o.backend << "  comm=" << o.comm << "  seed=" << o.seed
        << "  rows=" << rows.size() << "\n"
        << "#  shape: T x Hq/Hkv x Dk/Dv (L: shared latent); err, bound: the worst element of "
           "the output (O or LSE); err/bound: worst over output and every rank's partial\n"
        << "#  " << std::left << std::setw(4) << "row" << std::setw(18) << "shape" << std::right
        << std::setw(6) << "S" << std::setw(4) << "tp" << std::setw(4) << "N" << std::setw(4) << "I"
        << "  " << std::left << std::setw(6) << "comm" << std::setw(7) << "q" << std::setw(27)
        << "variant" << std::right << std::setw(11) << "max_err" << std::setw(11) << "bound"
        << std::setw(11) << "err/bound"
        << "  verdict\n";
  }
  int64_t failed = 0;
  double worst = 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < rows.size(); ++i) {
    const DcpSetup& s = rows[i].setup;
    const oracle::Case c = props::make_case(s.spec);
    props::DcpCheck chk;
    if (world == 0) {
      chk = props::check_dcp(c, s.cfg, s.chunks);
    } else {
#ifdef DCP_HAVE_MPI
      gpu::Result<gpu::MpiRun> run = gpu::run_dcp_mpi(props::to_dcp_inputs(c, s.chunks), s.cfg);
      if (!run) {
        err << "dcp-verify run: rank " << gpu::mpi_world_rank() << ": " << run.status().message()
            << "\n";
        gpu::mpi_abort(kExitBadInput);
      }
      if (!root) continue;
      chk = props::judge_dcp(c, s.cfg, run->group, true);
#endif
    }
    worst = std::max(worst, chk.max_ratio);
    if (!chk.pass) ++failed;
    if (o.quiet && chk.pass) continue;
    const oracle::Worst& w =
        chk.full.o_worst.ratio >= chk.full.lse_worst.ratio ? chk.full.o_worst : chk.full.lse_worst;
    char err_s[32], bound_s[32], ratio_s[32];
    std::snprintf(err_s, sizeof err_s, "%.3e", w.error);
    std::snprintf(bound_s, sizeof bound_s, "%.3e", w.bound);
    std::snprintf(ratio_s, sizeof ratio_s, "%.4f", chk.max_ratio);
    out << "   " << std::left << std::setw(4) << i << std::setw(18) << shape_of(s.spec)
        << std::right << std::setw(6) << s.spec.seq << std::setw(4) << s.cfg.tp_size << std::setw(4)
        << s.cfg.layout.ranks << std::setw(4) << s.cfg.layout.interleave << "  " << std::left
        << std::setw(6) << gpu::strategy_name(s.cfg.strategy) << std::setw(7)
        << (s.cfg.replicate_q ? "repl" : "gather") << std::setw(27) << rows[i].variant << std::right
        << std::setw(11) << err_s << std::setw(11) << bound_s << std::setw(11) << ratio_s << "  "
        << (chk.pass ? "OK" : "FAILED") << "\n";
    if (!chk.pass) {
      std::istringstream rep(chk.report);
      for (std::string line; std::getline(rep, line);) out << "#    " << line << "\n";
      out << "#    case: " << props::describe(s) << "\n";
    }
  }
  if (!root) return kExitOk;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char worst_s[32];
  std::snprintf(worst_s, sizeof worst_s, "%.4f", worst);
  out << "# rows: " << rows.size() << "  passed: " << rows.size() - static_cast<size_t>(failed)
      << "  failed: " << failed << "  max err/bound: " << worst_s << "  time: " << std::fixed
      << std::setprecision(1) << secs << " s\n";
  out << "# reproduce: " << reproduce_line(o) << "\n";
  out << "# run: " << (failed == 0 ? "OK" : "FAILED") << "\n";
  return failed == 0 ? kExitOk : kExitFail;
}

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand(
      "run",
      "Run the production DCP path against the oracle: the default sweep, or one configured case "
      "(the default job)");
  run->add_option("--backend", o->backend, "Backend: host")->capture_default_str();
  run->add_option("--comm", o->comm, "Communicator: threads (in-process) or mpi (under mpirun)")
      ->capture_default_str();
  run->add_option("--preset", o->preset,
                  "Model preset: k3-mla (96 heads, 576/512 latent, TP8xDCP8)");
  run->add_option("--dcp-size", o->dcp_size, "N, ranks in a DCP group");
  run->add_option("--tp-size", o->tp_size,
                  "Attention TP size, a multiple of N (default N; mpi: world)");
  run->add_option("--interleave", o->interleave,
                  "I, tokens per block dealt to a rank (1: round-robin)");
  run->add_option("--comm-backend", o->comm_backend, "Combine: ag_rs or a2a");
  run->add_flag("--replicate-q", o->replicate_q,
                "Every rank projects all its group's query heads (no q gather)");
  run->add_option("--seq", o->seq, "S, context length (tokens)");
  run->add_option("--tokens", o->tokens, "T, query tokens per step");
  run->add_option("--heads", o->heads, "Hq, query heads of the model");
  run->add_option("--kv-heads", o->kv_heads, "Hkv, KV heads (divides Hq)");
  run->add_option("--head-dim", o->head_dim, "Dk");
  run->add_option("--v-dim", o->v_dim, "Dv");
  run->add_flag("--latent", o->latent, "Shared latent: V is the first Dv components of K (MLA)");
  run->add_option("--dtype", o->dtype, "Storage of q and KV: f32, f16 or bf16 (default bf16)");
  run->add_option("--out-dtype", o->out_dtype, "Storage of the output: f32, f16 or bf16");
  run->add_option("--window", o->window, "Sliding window W (0: none)");
  run->add_option("--softcap", o->softcap, "Logit softcap c (0: none)");
  run->add_flag("--sink", o->sink, "Per-head sink logits");
  run->add_option("--topk", o->topk, "Top-k sparse attention with K selected positions (0: dense)");
  run->add_option("--lse-base", o->lse_base, "The kernel's LSE base: e or 2");
  run->add_option("--order", o->order, "Combine reduction order: seq, pair or rand");
  run->add_option("--splits", o->splits, "Split-KV pieces inside a rank");
  run->add_option("--tile", o->tile, "Online-softmax tile, keys");
  run->add_option("--cases", o->cases, "Configured cases to run (seeds seed, seed+1, ...)");
  run->add_option("--seed", o->seed, "Seed of the case values and chunk writes")
      ->capture_default_str();
  run->add_flag("--quiet", o->quiet, "Print failing rows and the summary only");
  return {run, [o] {
            if (o->comm != "mpi") return run_dcp(*o, std::cout, std::cerr);
#ifdef DCP_HAVE_MPI
            if (const auto st = gpu::mpi_init(nullptr, nullptr); !st) {
              std::cerr << "dcp-verify run: " << st.message() << "\n";
              return kExitBadInput;
            }
            const int code = run_dcp(*o, std::cout, std::cerr);
            gpu::mpi_finalize();
            return code;
#else
            return run_dcp(*o, std::cout, std::cerr);
#endif
          }};
}

}  // namespace dcp::tools
