#include "oracle/file_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace dcp::oracle {

Status write_whole_file(const std::string& path, std::span<const uint8_t> bytes) {
  if (path.empty()) return DCP_ERROR("cannot write a file with an empty name");
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  // mkstemp: a fresh name in the target's folder (the same file system, so rename is atomic).
  std::string name = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  std::vector<char> templ(name.begin(), name.end());
  templ.push_back('\0');
  const int fd = ::mkstemp(templ.data());
  if (fd < 0)
    return DCP_ERROR(path, ": cannot open for writing (a new file in '", dir.string(),
                     "'): ", std::strerror(errno));
  const std::string tmp(templ.data());
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return DCP_ERROR(path, ": ", what, ": ", std::strerror(err));
  };
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  // Readable as a file the user wrote would be (mkstemp makes it private).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return fail("cannot set its mode", errno);
  if (::fsync(fd) != 0) return fail("flush to disk failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return DCP_ERROR(path, ": close failed: ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return DCP_ERROR(path, ": cannot rename the new file into place: ", std::strerror(err));
  }
  return {};
}

}  // namespace dcp::oracle
