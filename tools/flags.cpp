#include "tools/flags.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>

#include "harness/tiers.hpp"
#include "oracle/text.hpp"

namespace dcp::tools {
namespace {

// "1 .. 1024", "0 .. 2^64 - 1": the range as a reader of the message wants it.
std::string range_text(int64_t lo, int64_t hi) {
  return std::to_string(lo) + " .. " + std::to_string(hi);
}

// Decimal digits with an optional leading '-' (for signed targets): the only integer syntax the
// CLI accepts, so "0x10", "1e3", "+4" and " 4" are refused rather than guessed at.
bool decimal_syntax(const std::string& s, bool allow_minus) {
  const size_t first = allow_minus && !s.empty() && s[0] == '-' ? 1 : 0;
  return s.size() > first && s.find_first_not_of("0123456789", first) == std::string::npos;
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi) {
  const std::string expected = "expected an integer in " + range_text(lo, hi);
  return CLI::Validator(
      [lo, hi, expected](std::string& s) -> std::string {
        int64_t v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (!decimal_syntax(s, true) || r.ec != std::errc() || r.ptr != s.data() + s.size() ||
            v < lo || v > hi)
          return expected + ", got '" + oracle::printable(s) + "'";
        return {};
      },
      "INT in " + range_text(lo, hi), kStrictNumber);
}

CLI::Validator real_in(double lo, double hi, bool lo_open) {
  const std::string expected = "expected a finite number in " + std::string(lo_open ? "(" : "[") +
                               CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, lo_open, expected](std::string& s) -> std::string {
        if (s.empty() || s.find_first_of(" \t\n") != std::string::npos)
          return expected + ", got '" + oracle::printable(s) + "'";
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool above_lo = lo_open ? v > lo : v >= lo;
        if (end != s.c_str() + s.size() || !std::isfinite(v) || !above_lo || v > hi)
          return expected + ", got '" + oracle::printable(s) + "'";
        return {};
      },
      expected.substr(std::string("expected ").size()), kStrictNumber);
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (!decimal_syntax(s, false) || r.ec != std::errc() || r.ptr != s.data() + s.size())
          return "expected an integer in 0 .. 2^64 - 1, got '" + oracle::printable(s) + "'";
        return {};
      },
      "SEED in 0 .. 2^64 - 1", kStrictNumber);
}

namespace {

// What --flag=VALUE may say.
CLI::Validator switch_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string v = s;
        for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (const char* ok : {"true", "false", "1", "0", "on", "off", "yes", "no"})
          if (v == ok) return {};
        return "expected true or false (1/0, on/off, yes/no), got '" + oracle::printable(s) + "'";
      },
      "", kStrictSwitch);
}

}  // namespace

CLI::Option* add_switch(CLI::App* cmd, const std::string& name, bool& on,
                        const std::string& description) {
  return cmd->add_flag(name, on, description)->check(switch_value());
}

void add_latent_flag(CLI::App* cmd, std::optional<bool>& latent) {
  cmd->add_flag_function(
         "--latent,!--no-latent", [&latent](int64_t n) { latent = n > 0; },
         "Shared latent (MLA): V is the first Dv components of K, one Dk-wide KV row per token; "
         "--latent=false or --no-latent: a separate V, also for an MLA preset")
      ->check(switch_value());
}

void add_timeout_flag(CLI::App* cmd, int64_t& seconds) {
  cmd->add_option("--timeout", seconds,
                  "Seconds a rank waits for its peers in a collective before it gives up, naming "
                  "the ranks that did not arrive (under mpirun the job ends, exit 124; with ranks "
                  "as threads the case fails)")
      ->check(int_in(1, kMaxTimeoutSeconds))
      ->capture_default_str();
}

void add_bound_flag(CLI::App* cmd, std::string& bound) {
  cmd->add_option("--bound", bound,
                  "The tier of the derived bound that gates the exit code: sound (worst case) or "
                  "statistical (a SUSPECT result fails too); reports show both")
      ->check(CLI::IsMember(harness::bound_names()))
      ->capture_default_str();
}

namespace {
struct FieldFlag {
  std::string_view field, flag;
};
// gpu/dcp_step.cpp, gpu/kernels/layout.hpp, gpu/comm and gpu/cuda name these fields; longer
// names first where one is a prefix of another.
constexpr FieldFlag kFieldFlags[] = {
    {"DcpConfig.tp_size", "--tp-size"},
    {"DcpConfig.tile", "--tile"},
    {"DcpConfig.splits", "--splits"},
    {"DcpConfig.deadline", "--timeout"},
    {"DcpConfig.math.merge", "--merge-dtype"},
    {"DcpLayout.ranks", "--dcp-size"},
    {"DcpLayout.interleave", "--interleave"},
    {"AttentionDims.q_heads", "--heads"},
    {"AttentionDims.kv_heads", "--kv-heads"},
    {"AttentionDims.head_dim", "--head-dim"},
    {"AttentionDims.v_dim", "--v-dim"},
    {"DcpInputs.shared_prefix", "--shared-prefix"},
    {"DcpInputs.retired", "--retired"},
    {"DcpConfig.page_size", "--page-size"},
    {"DcpInputs.seq", "--seq"},
    {"DcpInputs.topk_k", "--topk"},
    {"DcpInputs.window", "--window"},
    {"DcpInputs.softcap", "--softcap"},
    {"DeviceTransport::single_gpu", "--comm single-gpu"},
    {"DeviceTransport::nccl", "--comm nccl"},
};
}  // namespace

std::string in_flag_terms(std::string message) {
  for (const FieldFlag& f : kFieldFlags) {
    for (size_t at = message.find(f.field); at != std::string::npos;
         at = message.find(f.field, at + f.flag.size()))
      message.replace(at, f.field.size(), f.flag);
  }
  return message;
}

}  // namespace dcp::tools
