// libFuzzer target for the whole command line: the input is an argv (NUL-separated words, the
// first naming the subcommand), run by run_cli exactly as dcp-verify runs it, inside a scratch
// folder holding copies of a case, a result and a pinned file. Findings are: anything a sanitizer
// reports, an exception escaping run_cli (main would catch it; here it is a crash), an exit
// status outside 0, 1, 2 and 130, exit 2 with other than exactly one line on stderr, and any
// change to the three input files (the command wrote an input). Inputs naming a path outside the
// scratch folder (a word starting with '/' or holding "..") are skipped: a fuzzed command must
// not write over the corpus or the machine. The limits are tight (kMemoryBytes, kWork), so that
// every command that is not refused ends in a fraction of a second, and an allocation beyond the
// memory limit (-malloc_limit_mb) means a footprint estimate was too low.
//
//   build-asan/bin/fuzz_cli /tmp/corpus fixtures/fuzz/cli -dict=fixtures/fuzz/cli.dict \
//       -max_total_time=60 -malloc_limit_mb=512
// Environment: DCP_FUZZ_FIXTURES (the fixtures folder; default: the source tree's).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "harness/budget.hpp"
#include "tools/cli.hpp"

namespace {

namespace fs = std::filesystem;

// What one fuzzed command may plan: small enough that any accepted command runs in well under a
// second under the sanitizers, large enough to run real (small) DCP cases.
constexpr double kMemoryBytes = 256.0 * (1 << 20);
constexpr double kWork = 2e7;
// Longer argvs add nothing the mutator cannot reach with fewer words.
constexpr size_t kMaxWords = 48;

const char* const kInputs[] = {"case.safetensors", "result.safetensors", "pinned.json"};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct Scratch {
  fs::path dir;
  std::vector<std::string> contents;  // of kInputs, as copied

  Scratch() {
    const char* env = std::getenv("DCP_FUZZ_FIXTURES");
    const fs::path fixtures = env ? env : DCP_FIXTURES_DIR;
    dir = fs::temp_directory_path() / ("dcp-fuzz-cli-" + std::to_string(getpid()));
    fs::create_directories(dir);
    fs::copy_file(fixtures / "cases" / "gqa_causal_bf16.safetensors", dir / kInputs[0],
                  fs::copy_options::overwrite_existing);
    fs::copy_file(fixtures / "fuzz" / "cli_result.safetensors", dir / kInputs[1],
                  fs::copy_options::overwrite_existing);
    fs::copy_file(fixtures / "dcp" / "pinned.json", dir / kInputs[2],
                  fs::copy_options::overwrite_existing);
    for (const char* name : kInputs) contents.push_back(read_file(dir / name));
  }

  // Every input as it was, and nothing else left behind for the next run.
  void check_and_clean() const {
    for (size_t i = 0; i < std::size(kInputs); ++i) {
      if (read_file(dir / kInputs[i]) != contents[i]) {
        std::fprintf(stderr, "fuzz_cli: the command changed its input %s\n", kInputs[i]);
        std::abort();
      }
    }
    for (const auto& e : fs::directory_iterator(dir)) {
      bool input = false;
      for (const char* name : kInputs) input = input || e.path().filename() == name;
      if (!input) fs::remove_all(e.path());
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Scratch scratch;
  std::vector<std::string> words{"dcp-verify"};
  std::string word;
  for (size_t i = 0; i < size && words.size() < kMaxWords; ++i) {
    if (data[i] == '\0') {
      words.push_back(word);
      word.clear();
    } else {
      word.push_back(static_cast<char>(data[i]));
    }
  }
  if (!word.empty() && words.size() < kMaxWords) words.push_back(word);
  for (const std::string& w : words)
    if (w.find("..") != std::string::npos || w.find('/') == 0 || w.find("=/") != std::string::npos)
      return 0;
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());

  dcp::harness::Limits lim;
  lim.memory_bytes = kMemoryBytes;
  lim.work = kWork;
  // The command's own output is not what is tested here.
  std::ostringstream sink, errors;
  std::streambuf* out = std::cout.rdbuf(sink.rdbuf());
  std::streambuf* err = std::cerr.rdbuf(errors.rdbuf());
  // Relative paths name the scratch folder's files, during the command only (libFuzzer itself
  // reads its corpus relative to where it started).
  const fs::path home = fs::current_path();
  fs::current_path(scratch.dir);
  const int code = dcp::tools::run_cli(static_cast<int>(argv.size()), argv.data(), lim);
  fs::current_path(home);
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  if (code != 0 && code != 1 && code != 2 && code != 130) {
    std::fprintf(stderr, "fuzz_cli: exit status %d\n", code);
    std::abort();
  }
  const std::string said = errors.str();
  if (code == 2 && (said.empty() || said.find('\n') != said.size() - 1)) {
    std::fprintf(stderr, "fuzz_cli: exit 2 without exactly one line on stderr:\n%s", said.c_str());
    std::abort();
  }
  scratch.check_and_clean();
  return 0;
}
