#include "tools/mpi_jobs.hpp"

#include <algorithm>
#include <cstdint>

#ifdef DCP_HAVE_MPI
#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <span>
#include <thread>
#include <vector>

#include "tools/command.hpp"
#include "tools/session.hpp"
#endif

namespace dcp::tools {

std::chrono::milliseconds judging_time(double work) {
  const double ms = std::min(work / kSlowestJudgeRate * 1e3, 1e12);  // finite, whatever the work
  return std::chrono::milliseconds(static_cast<int64_t>(ms > 0 ? ms : 0));
}

#ifdef DCP_HAVE_MPI
namespace {

// A file's contents for the comparison: whole up to this size, else three samples of kSample.
constexpr int64_t kWholeFileBytes = int64_t{64} << 20;
constexpr int64_t kSample = int64_t{1} << 20;

// FNV-1a, 64 bits: enough to tell two inputs apart (no adversary here).
uint64_t fnv1a(const char* p, size_t n, uint64_t h = 14695981039346656037ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
  return h;
}

// "size=N hash=H" of the file (its hash over what kWholeFileBytes says), or why it cannot be read
// (the command itself then says it better, after the processes agree they were given the same).
std::string file_digest(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "unreadable";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "unreadable";
  const int64_t size = st.st_size;
  uint64_t h = fnv1a(nullptr, 0);
  std::vector<char> buf(static_cast<size_t>(std::min(size, kWholeFileBytes)));
  const auto take = [&](int64_t at, int64_t n) {
    if (std::fseek(f, static_cast<long>(at), SEEK_SET) != 0) return;
    const size_t got = std::fread(buf.data(), 1, static_cast<size_t>(n), f);
    h = fnv1a(buf.data(), got, h);
  };
  if (size <= kWholeFileBytes) {
    take(0, size);
  } else {
    for (const int64_t at : {int64_t{0}, size / 2 - kSample / 2, size - kSample}) take(at, kSample);
  }
  std::fclose(f);
  return "size=" + std::to_string(size) + " hash=" + std::to_string(h);
}

// What this process runs, one item a line: "flag=value" for each flag, then "flag file=digest"
// for each input file.
std::vector<std::string> canonical_inputs(const std::string& command) {
  std::vector<std::string> items{"command=" + command};
  const JobInputs& in = job_inputs();
  items.insert(items.end(), in.flags.begin(), in.flags.end());
  for (const auto& [flag, path] : in.files) items.push_back(flag + " file=" + file_digest(path));
  return items;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& x : items) s += x + '\n';
  return s;
}

std::vector<std::string> lines_of(const std::vector<uint8_t>& bytes) {
  std::vector<std::string> out;
  std::string line;
  for (const uint8_t b : bytes) {
    if (b == '\n') {
      out.push_back(line);
      line.clear();
    } else {
      line += static_cast<char>(b);
    }
  }
  return out;
}

// The item's name (before '=', or before " file=") and its value: a flag named as on the
// command line (--seed), a value without the quotes the command line's write-back gives strings,
// and an empty one said to be the default.
std::pair<std::string, std::string> split_item(const std::string& item) {
  const size_t file = item.find(" file=");
  if (file != std::string::npos) return {item.substr(0, file), item.substr(file + 6)};
  const size_t at = item.find('=');
  if (at == std::string::npos) return {item, ""};
  std::string name = item.substr(0, at), value = item.substr(at + 1);
  if (name != "command") name = "--" + name;
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
    value = value.substr(1, value.size() - 2);
  return {name, value.empty() ? "nothing (the default)" : value};
}

// The first item on which process q differs from process 0, named; empty when none does.
std::string first_difference(const std::vector<std::vector<uint8_t>>& all) {
  const std::vector<std::string> root = lines_of(all.front());
  for (size_t q = 1; q < all.size(); ++q) {
    const std::vector<std::string> other = lines_of(all[q]);
    const std::string who = "process " + std::to_string(q);
    for (size_t i = 0; i < std::max(root.size(), other.size()); ++i) {
      const std::string mine = i < root.size() ? root[i] : "",
                        theirs = i < other.size() ? other[i] : "";
      if (mine == theirs) continue;
      const auto [name, value0] = split_item(mine.empty() ? theirs : mine);
      const auto [other_name, value_q] = split_item(theirs);
      if (name != other_name)
        return "process 0 and " + who + " were given different flags (" + name + " against " +
               (theirs.empty() ? "nothing" : other_name) +
               "); every process of the job must be given the same command line";
      if (mine.find(" file=") != std::string::npos)
        return name + ": " + who + "'s file is not process 0's (" + value_q + " against " + value0 +
               "); every process must read the same file";
      return name + ": " + who + " was given " + value_q + ", process 0 " + value0 +
             "; every process of the job must be given the same flags";
    }
  }
  return "";
}

}  // namespace

void wait_polling(MPI_Request* req, const JobWait& w) {
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  while (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    if (interrupted()) {
      std::cout << w.interrupted_line << std::flush;
      gpu::mpi_abort(kExitInterrupted);
    }
    if (w.deadline.count() > 0 && std::chrono::steady_clock::now() - start > w.deadline) {
      std::fflush(stdout);
      refuse(w.command,
             "process " + std::to_string(gpu::mpi_world_rank()) + ": waited " +
                 std::to_string(w.deadline.count() / 1000) + " s for " + w.what +
                 " (--timeout); a process stopped, died or hangs, and the job ends",
             std::cerr);
      gpu::mpi_abort(kExitTimeout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int job_code(int code, const JobWait& w) {
  int job = 0;
  MPI_Request req;
  MPI_Iallreduce(&code, &job, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
  wait_polling(&req, w);
  return job;
}

gpu::MpiVerdict job_agree(const std::string& command, int code, const std::string& message,
                          std::chrono::milliseconds deadline) {
  const auto v = gpu::mpi_agree(code, message, deadline);
  if (!v) {
    std::fflush(stdout);
    refuse(command,
           "process " + std::to_string(gpu::mpi_world_rank()) + ": " + v.status().message(),
           std::cerr);
    gpu::mpi_abort(kExitTimeout);
  }
  return *v;
}

std::optional<std::string> inputs_differ(const std::string& command,
                                         std::chrono::milliseconds deadline) {
  const std::string mine = joined(canonical_inputs(command));
  const auto all =
      gpu::mpi_gather_bytes(std::span(reinterpret_cast<const uint8_t*>(mine.data()), mine.size()),
                            "comparing the processes' flags and files", deadline);
  if (!all) {
    std::fflush(stdout);
    refuse(command,
           "process " + std::to_string(gpu::mpi_world_rank()) + ": " + all.status().message(),
           std::cerr);
    gpu::mpi_abort(kExitTimeout);
  }
  const std::string why = all->empty() ? "" : first_difference(*all);
  const gpu::MpiVerdict v =
      job_agree(command, why.empty() ? kExitOk : kExitBadInput, why, deadline);
  if (v.code == kExitOk) return std::nullopt;
  return v.message;
}
#endif

}  // namespace dcp::tools
