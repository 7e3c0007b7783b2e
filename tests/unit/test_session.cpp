// What every command's process shares (tools/session.hpp): a mapped input that another program
// truncates while it is read ends the process with one line naming it, and a lost standard output
// is an exit status, not a silent success.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "oracle/safetensors.hpp"
#include "tools/command.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

// A safetensors file holding one F32 tensor "k" of `n` elements.
void write_tensor_file(const std::string& path, int64_t n) {
  std::string header = "{\"k\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(4 * n) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const uint64_t len = header.size();
  std::fwrite(&len, 8, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  const std::vector<float> data(static_cast<size_t>(n), 1.0f);
  std::fwrite(data.data(), 4, data.size(), f);
  std::fclose(f);
}

// The status and stderr of a child that runs `body`.
template <class Body>
std::pair<int, std::string> in_child(Body body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {status, err};
}

TEST(FileFaultLine, AMappedInputTruncatedWhileReadIsNamed) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "dcp_session_truncated.safetensors").string();
  constexpr int64_t kElements =
      1 << 18;  // 1 MiB of data, far beyond the page left after truncation
  write_tensor_file(path, kElements);
  const auto [status, err] = in_child([&] {
    install_file_fault_line();
    const auto f = oracle::read_safetensors(path, {.in_place = {"k"}});
    if (!f) ::_exit(3);
    ::truncate(path.c_str(), 4096);  // another program's doing
    volatile uint8_t last = f->tensors.at("k").bytes[4 * kElements - 1];
    (void)last;
  });
  std::filesystem::remove(path);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << ": " << err;
  EXPECT_EQ(WEXITSTATUS(status), kExitBadInput);
  EXPECT_NE(err.find(path + ": the file changed while it was read"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(FileFaultLine, AnotherBusErrorStaysOne) {
  const auto [status, err] = in_child([] {
    install_file_fault_line();
    ::raise(SIGBUS);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

TEST(StdoutWritten, AFullDeviceIsAnExitStatus) {
  const auto [status, err] = in_child([] {
    const int full = ::open("/dev/full", O_WRONLY);
    if (full < 0) ::_exit(4);
    ::dup2(full, STDOUT_FILENO);
    std::printf("# run: OK\n");
    ::_exit(stdout_written(kExitOk));
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kExitBadInput) << err;
  EXPECT_NE(err.find("standard output: write failed"), std::string::npos) << err;
  const auto [kept, none] = in_child([] { ::_exit(stdout_written(kExitFail)); });
  EXPECT_EQ(WEXITSTATUS(kept), kExitFail) << "a failure keeps its own status when stdout is fine";
}

}  // namespace
}  // namespace dcp::tools
