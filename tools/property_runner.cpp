#include "tools/property_runner.hpp"

#include <rapidcheck.h>

#include <atomic>
#include <chrono>
#include <iostream>

#include "tools/session.hpp"

namespace dcp::tools {
namespace {

std::atomic<int64_t> g_entered{0};  // cases_entered()

class QuietListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// What RapidCheck's result says, in the row: its verdict, the cases that ran and why it ended.
// ran: the cases this run entered (an interrupted one included).
void record_outcome(const rc::detail::TestResult& result, int64_t ran, PropertyRun& row) {
  rc::detail::SuccessResult ok;
  rc::detail::FailureResult fail;
  rc::detail::GaveUpResult gave_up;
  rc::detail::Error error;
  if (result.match(ok)) {
    row.result = "OK";
    row.cases = ok.numSuccess;
  } else if (result.match(fail) && interrupted()) {
    row.result = "INTERRUPTED";
    row.cases = ran - 1;
    row.message = "interrupted after " + std::to_string(ran - 1) + " cases";
  } else if (result.match(fail)) {
    row.result = "FAILED";
    row.cases = fail.numSuccess + 1;
    row.shrinks = static_cast<int64_t>(fail.reproduce.shrinkPath.size());
    row.message = fail.description;
  } else if (result.match(gave_up)) {
    row.result = "GAVE UP";
    row.cases = gave_up.numSuccess;
    row.message = gave_up.description;
  } else if (result.match(error)) {
    row.result = "ERROR";
    row.message = error.description;
  }
}

}  // namespace

void silence_rapidcheck_banner() {
  std::streambuf* err = std::cerr.rdbuf(nullptr);
  rc::detail::configuration();
  std::cerr.rdbuf(err);
}

int64_t cases_entered() { return g_entered.load(); }

PropertyRun run_property(const props::SuiteProperty& p, int64_t cases, uint64_t seed, bool shrink) {
  g_entered.store(0);
  PropertyRun row;
  row.name = p.name;
  row.what = p.what;
  int64_t ran = 0, discarded = 0;
  std::string counterexample;
  const auto body = p.body;
  auto guarded = [&ran, &discarded, &counterexample, body] {
    // Ctrl-C: the case fails at once, before drawing anything, so there is nothing to shrink;
    // the row reports the cases that did run, as interrupted.
    if (interrupted()) RC_FAIL("interrupted");
    g_entered.store(++ran);
    // A failing case keeps its shape; the last one kept is the shrunk counterexample's.
    // Discards and generation failures while shrinking are not failures.
    try {
      body();
    } catch (const rc::detail::CaseResult& r) {
      if (r.type == rc::detail::CaseResult::Type::Failure) counterexample = props::current_case();
      if (r.type == rc::detail::CaseResult::Type::Discard) ++discarded;
      throw;
    } catch (const rc::GenerationFailure&) {
      throw;
    } catch (...) {  // any other exception fails the case too
      counterexample = props::current_case();
      throw;
    }
  };
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = static_cast<int>(cases);
  params.disableShrinking = !shrink;
  rc::detail::TestMetadata meta;
  meta.id = p.name;
  meta.description = p.what;
  const auto t0 = std::chrono::steady_clock::now();
  // RapidCheck's default listener prints its own RC_PARAMS reproduce hint at exit; this command
  // prints its own reproduce line instead.
  QuietListener listener;
  const rc::detail::TestResult result =
      rc::detail::checkProperty(rc::detail::toProperty(guarded), meta, params, listener);
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  record_outcome(result, ran, row);
  if (row.result == "FAILED") row.counterexample = counterexample;
  row.discarded = discarded;
  if (discarded > 0)
    row.what += "; " + std::to_string(discarded) +
                " drawn cases set aside, the claim too coarse to judge them";
  return row;
}

}  // namespace dcp::tools
