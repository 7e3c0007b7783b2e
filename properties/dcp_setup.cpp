#include "properties/dcp_setup.hpp"

#include <random>
#include <sstream>

#include "properties/dcp_bridge.hpp"

namespace dcp::props {

std::vector<int64_t> make_chunks(int64_t seq, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int64_t> out;
  for (int64_t done = 0; done < seq;) {
    const int64_t left = seq - done;
    const int64_t len = std::bernoulli_distribution(0.4)(g)
                            ? 1
                            : std::uniform_int_distribution<int64_t>(1, left)(g);
    out.push_back(len);
    done += len;
  }
  return out;
}

std::string describe(const DcpSetup& s) {
  std::ostringstream os;
  os << describe(s.spec) << " | " << describe(s.cfg) << " | chunks=" << s.chunks.size();
  return os.str();
}

namespace {

const char* kStyles[] = {"normal", "peaked", "wide", "ties", "tiny", "extreme"};

std::string dt(oracle::DType d) { return std::string(oracle::dtype_name(d)); }

}  // namespace

nlohmann::json to_json(const DcpSetup& s) {
  const CaseSpec& c = s.spec;
  nlohmann::json spec = {{"tokens", c.tokens},
                         {"q_heads", c.q_heads},
                         {"kv_heads", c.kv_heads},
                         {"head_dim", c.head_dim},
                         {"v_dim", c.v_dim},
                         {"seq", c.seq},
                         {"shared_latent", c.shared_latent},
                         {"q_dtype", dt(c.q_dtype)},
                         {"kv_dtype", dt(c.kv_dtype)},
                         {"causal", c.causal},
                         {"explicit_pos", c.explicit_pos},
                         {"window", c.window},
                         {"softcap", c.softcap},
                         {"sink", c.sink},
                         {"topk", c.topk},
                         {"lse_base", std::string(oracle::lse_base_name(c.lse_base))},
                         {"explicit_scale", c.explicit_scale},
                         {"values", kStyles[static_cast<int>(c.values)]},
                         {"seed", c.seed}};
  const gpu::DcpConfig& g = s.cfg;
  nlohmann::json cfg = {{"tp_size", g.tp_size},
                        {"dcp_size", g.layout.ranks},
                        {"interleave", g.layout.interleave},
                        {"comm", std::string(gpu::strategy_name(g.strategy))},
                        {"replicate_q", g.replicate_q},
                        {"order", std::string(gpu::reduce_order_name(g.order))},
                        {"order_seed", g.order_seed},
                        {"tile", g.tile},
                        {"splits", g.splits},
                        {"out_dtype", std::string(gpu::dtype_name(g.out_dtype))}};
  return {{"spec", spec}, {"config", cfg}, {"chunks", s.chunks}};
}

oracle::Expected<DcpSetup> setup_from_json(const nlohmann::json& j) {
  DcpSetup s;
  try {
    const auto& c = j.at("spec");
    CaseSpec& p = s.spec;
    p.tokens = c.at("tokens");
    p.q_heads = c.at("q_heads");
    p.kv_heads = c.at("kv_heads");
    p.head_dim = c.at("head_dim");
    p.v_dim = c.at("v_dim");
    p.seq = c.at("seq");
    p.shared_latent = c.at("shared_latent");
    auto dtype = [](const std::string& n) -> std::optional<oracle::DType> {
      return oracle::parse_dtype(n);
    };
    const auto qd = dtype(c.at("q_dtype")), kd = dtype(c.at("kv_dtype"));
    if (!qd || !kd) return DCP_ERROR("setup: unknown q_dtype or kv_dtype");
    p.q_dtype = *qd;
    p.kv_dtype = *kd;
    p.causal = c.at("causal");
    p.explicit_pos = c.at("explicit_pos");
    p.window = c.at("window");
    p.softcap = c.at("softcap");
    p.sink = c.at("sink");
    p.topk = c.at("topk");
    const auto base = oracle::parse_lse_base(c.at("lse_base").get<std::string>());
    if (!base) return DCP_ERROR("setup: lse_base must be \"e\" or \"2\"");
    p.lse_base = *base;
    p.explicit_scale = c.at("explicit_scale");
    const std::string style = c.at("values");
    bool found = false;
    for (int i = 0; i < 6; ++i)
      if (style == kStyles[i]) p.values = static_cast<ValueStyle>(i), found = true;
    if (!found) return DCP_ERROR("setup: unknown value style '", style, "'");
    p.seed = c.at("seed");

    const auto& g = j.at("config");
    gpu::DcpConfig& q = s.cfg;
    q.tp_size = g.at("tp_size");
    q.layout.ranks = g.at("dcp_size");
    q.layout.interleave = g.at("interleave");
    const auto strat = gpu::parse_strategy(g.at("comm").get<std::string>());
    const auto order = gpu::parse_reduce_order(g.at("order").get<std::string>());
    const auto out = gpu::parse_dtype(g.at("out_dtype").get<std::string>());
    if (!strat || !order || !out) return DCP_ERROR("setup: bad comm, order or out_dtype");
    q.strategy = *strat;
    q.order = *order;
    q.out_dtype = *out;
    q.replicate_q = g.at("replicate_q");
    q.order_seed = g.at("order_seed");
    q.tile = g.at("tile");
    q.splits = g.at("splits");
    q.base = to_gpu_base(p.lse_base);
    s.chunks = j.at("chunks").get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    return DCP_ERROR("setup: ", e.what());
  }
  return s;
}

}  // namespace dcp::props
