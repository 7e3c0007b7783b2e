#include "tools/probe_cmd.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "gpu/kernels/kernel_math.hpp"
#include "harness/budget.hpp"
#include "oracle/text.hpp"
#include "plugin/plugin.hpp"
#include "properties/probe.hpp"
#include "tools/backends.hpp"
#include "tools/flags.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

struct ProbeOptions {
  std::optional<std::string> impl;
  std::string lse_base = "e";
  // The production path's arithmetic, probed where no --impl is given.
  std::string exp = "libm", p_cast = "none", partial_dtype = "f32", merge_dtype = "f32";
  bool tf32 = false;
  int64_t tile = 64;
  int64_t timeout_s = kDefaultTimeoutSeconds;
  std::optional<std::string> json_path;
};

// A format flag's value: bf16, f16, or no rounding ("none" for --p-cast, "f32" for the others).
oracle::Expected<gpu::StorageFormat> format_of(const char* flag, const std::string& s) {
  const bool cast = std::string(flag) == "--p-cast";
  if (s == (cast ? "none" : "f32")) return gpu::StorageFormat::f32;
  if (s == "bf16") return gpu::StorageFormat::bf16;
  if (s == "f16") return gpu::StorageFormat::f16;
  return DCP_ERROR(flag, ": got '", s, "'; expected ",
                   cast ? "none, bf16 or f16" : "f32, bf16 or f16");
}

int run_probe(const ProbeOptions& o, const harness::Limits& lim) {
  const auto bad = [](const std::string& why) { return refuse("probe", why, std::cerr); };
  if (const auto why = harness::over_limits(props::probe_footprint(), lim)) return bad(*why);
  props::ProbeTarget t;
  t.cfg.base = o.lse_base == "2" ? gpu::LseBase::two : gpu::LseBase::e;
  const auto deadline = std::chrono::seconds(o.timeout_s);
  t.cfg.deadline = deadline;
  if (o.impl) {
    auto b = open_impl(*o.impl, "host", "threads", deadline);
    if (!b) return bad(b.status().message());
    t.backend = b->preferred();
    t.merge = b->merges;
    t.attend = b->attends;
    t.unprobed_step = b->step && b->levels;
    t.label = b->label;
  } else {
    gpu::KernelMath m;
    const auto e = gpu::parse_exp_impl(o.exp);
    if (!e) return bad("--exp: got '" + o.exp + "'; expected " + gpu::names_in(gpu::kExpImplNames));
    m.exp = *e;
    m.tf32 = o.tf32;
    for (const auto& [flag, value, into] :
         {std::tuple{"--p-cast", o.p_cast, &m.p_cast},
          std::tuple{"--partial-dtype", o.partial_dtype, &m.partial},
          std::tuple{"--merge-dtype", o.merge_dtype, &m.merge}}) {
      auto f = format_of(flag, value);
      if (!f) return bad(f.status().message());
      *into = *f;
    }
    const gpu::DcpConfig asked = t.cfg;  // the base and deadline set above
    t = props::production_target(m, o.tile);
    t.cfg.base = asked.base;
    t.cfg.deadline = asked.deadline;
    t.backend = host_threads_backend(deadline);
  }
  // A level that crashes ends the process (plugin/plugin.hpp); first these last words print and
  // write what was measured before the experiment in flight, and that experiment as ERROR.
  props::ProbeReport so_far;
  std::string in_flight;
  const plugin::LastWordsScope scope;  // the last words refer to this frame
  if (o.impl) {
    t.on_experiment = [&](const std::string& experiment, const props::ProbeReport& r) {
      so_far = r;
      in_flight = experiment;
    };
    plugin::set_last_words([&](const std::string& cause) {
      const std::string error = in_flight + ": " + cause;
      std::cout << props::probe_findings_text(so_far) << "# probe: ERROR ("
                << oracle::one_line(error) << "; no claim)\n";
      if (o.json_path) {
        nlohmann::json j = props::probe_json(so_far);
        j["words"] = j["claim_words"] = j["claim"] = nullptr;
        j["error"] = error;
        write_json("probe", *o.json_path, j);
      }
      std::cout.flush();
    });
  }
  auto r = props::probe(t);
  plugin::set_last_words({});  // nothing is in flight any more
  if (!r) {
    std::cerr << "dcp-verify probe: " << oracle::one_line(r.status().message()) << "\n";
    return kExitFail;
  }
  std::cout << props::probe_text(*r);
  if (o.json_path && !write_json("probe", *o.json_path, props::probe_json(*r)))
    return kExitBadInput;
  return kExitOk;
}

}  // namespace

Command add_probe_command(CLI::App& app) {
  auto o = std::make_shared<ProbeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "probe",
      "Measure an implementation's arithmetic with crafted cases and print the claim to state");
  cmd->add_option("--impl", o->impl,
                  "A DCP implementation to probe: a C plug-in (include/dcp_verify/impl.h); "
                  "without it, the production path in the arithmetic of the flags below");
  cmd->add_option("--lse-base", o->lse_base, "The LSE base the implementation is asked for")
      ->check(CLI::IsMember({"e", "2"}))
      ->capture_default_str();
  cmd->add_option("--exp", o->exp, "Production path: its exponential, libm or poly3")
      ->capture_default_str();
  cmd->add_option("--p-cast", o->p_cast, "Production path: P rounded before P.V: none, bf16 or f16")
      ->capture_default_str();
  add_switch(cmd, "--tf32", o->tf32, "Production path: q.k and P.V operands rounded to tf32");
  cmd->add_option("--partial-dtype", o->partial_dtype,
                  "Production path: the partial O's format: f32, bf16 or f16")
      ->capture_default_str();
  cmd->add_option("--merge-dtype", o->merge_dtype,
                  "Production path: the merge's sums (a 16-bit one runs ag_rs): f32, bf16 or f16")
      ->capture_default_str();
  cmd->add_option("--tile", o->tile, "Production path: keys per online-softmax tile")
      ->check(int_in(1, kMaxSeq))
      ->capture_default_str();
  add_timeout_flag(cmd, o->timeout_s);
  cmd->add_option("--json", o->json_path, "Also write the findings and the claim as JSON");
  return {cmd, [o, cmd](const harness::Limits& lim) {
            if (o->impl)
              for (const char* flag :
                   {"--exp", "--p-cast", "--tf32", "--partial-dtype", "--merge-dtype", "--tile"})
                if (cmd->count(flag) > 0)
                  return refuse(
                      "probe",
                      std::string("--impl: the plug-in's arithmetic is what is measured; ") + flag +
                          " sets the production path's",
                      std::cerr);
            return run_probe(*o, lim);
          }};
}

}  // namespace dcp::tools
