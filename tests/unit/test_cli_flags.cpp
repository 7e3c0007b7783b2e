// Every numeric flag of every subcommand is read strictly (tools/flags.hpp): a test that walks
// the command line finds any option converted to a number without a range validator, and the
// validators themselves refuse what CLI11 alone would clamp or guess at.
#include <gtest/gtest.h>

#include <string>

#include "gpu/dcp_step.hpp"
#include "tools/cli.hpp"
#include "tools/flags.hpp"

namespace dcp::tools {
namespace {

bool has(CLI::Option* o, const char* validator) {
  try {
    o->get_validator(validator);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

TEST(CliFlags, EveryNumericFlagHasARangeValidator) {
  CLI::App app;
  add_commands(app);
  int numeric = 0, switches = 0;
  for (CLI::App* cmd : app.get_subcommands({})) {
    for (CLI::Option* o : cmd->get_options()) {
      if (o->get_name() == "--help") continue;  // CLI11's own
      if (o->get_expected_max() == 0) {         // an on/off flag: takes no value
        ++switches;
        EXPECT_TRUE(has(o, kStrictSwitch))
            << cmd->get_name() << " " << o->get_name() << " takes any --flag=VALUE";
        continue;
      }
      const std::string type = o->get_type_name();
      const bool number = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0 ||
                          type.rfind("FLOAT", 0) == 0 || type.rfind("SEED", 0) == 0;
      if (!number) continue;
      ++numeric;
      EXPECT_TRUE(has(o, kStrictNumber)) << cmd->get_name() << " " << o->get_name() << " (" << type
                                         << ") is converted without a range check";
    }
  }
  EXPECT_GT(numeric, 40);   // the walk saw the flags (run alone has over twenty)
  EXPECT_GT(switches, 10);  // --quiet on five commands, --sink, --latent, ...
}

std::string check(const CLI::Validator& v, std::string text) { return v(text); }

TEST(CliFlags, IntegersOutsideTheirRangeOrSyntaxAreRefused) {
  const CLI::Validator v = int_in(1, 1024);
  EXPECT_EQ(check(v, "1"), "");
  EXPECT_EQ(check(v, "1024"), "");
  for (const char* bad : {"0", "1025", "-1", "99999999999999999999", "0x10", "1e3", "+4", " 4",
                          "4 ", "4.0", "", "-", "four"})
    EXPECT_NE(check(v, bad), "") << "'" << bad << "' was accepted";
  EXPECT_NE(check(v, "99999999999999999999").find("expected an integer in 1 .. 1024"),
            std::string::npos);
}

TEST(CliFlags, SeedsCoverExactlyTheUnsigned64BitRange) {
  const CLI::Validator v = seed_value();
  EXPECT_EQ(check(v, "0"), "");
  EXPECT_EQ(check(v, "18446744073709551615"), "");
  for (const char* bad : {"18446744073709551616", "-1", "1.5", ""})
    EXPECT_NE(check(v, bad), "") << "'" << bad << "' was accepted";
}

TEST(CliFlags, RealsMustBeFiniteAndInRange) {
  const CLI::Validator v = real_in(1.0, 1024.0, true);
  EXPECT_EQ(check(v, "2"), "");
  EXPECT_EQ(check(v, "1024"), "");
  for (const char* bad : {"1", "0.5", "1025", "1e999", "inf", "nan", "2x", ""})
    EXPECT_NE(check(v, bad), "") << "'" << bad << "' was accepted";
}

// The libraries name fields; a command prints them as the flags that set them.
TEST(CliFlags, LibraryErrorsAreSaidInFlags) {
  auto said = [](const gpu::DcpConfig& cfg, const gpu::AttentionDims& d) {
    const gpu::Result<gpu::DcpGeometry> g = gpu::DcpGeometry::create(cfg, d);
    return g ? std::string("accepted") : in_flag_terms(g.status().message());
  };
  gpu::DcpConfig cfg;
  gpu::AttentionDims d;
  cfg.tp_size = 6;
  cfg.layout = {4, 1};
  EXPECT_NE(said(cfg, d).find("--tp-size 6 is not a multiple of --dcp-size 4"), std::string::npos)
      << said(cfg, d);
  cfg.layout = {2, 0};
  EXPECT_NE(said(cfg, d).find("--interleave: got 0; expected >= 1"), std::string::npos)
      << said(cfg, d);
  cfg.layout = {2, 1};
  cfg.tp_size = 4;
  d.q_heads = 6;
  d.kv_heads = 2;
  EXPECT_NE(said(cfg, d).find("--heads 6 is not a multiple of --tp-size 4"), std::string::npos)
      << said(cfg, d);
  EXPECT_EQ(said(cfg, d).find("DcpConfig"), std::string::npos) << said(cfg, d);
}

}  // namespace
}  // namespace dcp::tools
