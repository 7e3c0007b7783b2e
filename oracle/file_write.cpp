#include "oracle/file_write.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "oracle/text.hpp"

namespace dcp::oracle {
namespace {

// Long enough to be unique among the writers of one folder, short enough that "." + the
// target's name (cut to kNameChars) + "." + these stay under NAME_MAX (255).
constexpr size_t kNameChars = 200;
constexpr int kNameTries = 100;

// Signals that would end the process between the temporary's creation and its rename are held
// back while a file is written, so that no temporary is left behind.
class HoldSignals {
 public:
  HoldSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~HoldSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  HoldSignals(const HoldSignals&) = delete;
  HoldSignals& operator=(const HoldSignals&) = delete;

 private:
  sigset_t old_;
};

Status write_all(int fd, std::span<const uint8_t> bytes, const std::string& shown) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return DCP_ERROR(shown, ": write failed: ", std::strerror(n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
  return {};
}

// This process's standard output or error, when `target` is the file it writes to: its
// descriptor, else -1.
int own_stream(const struct stat& target) {
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat stream {};
    if (::fstat(fd, &stream) == 0 && stream.st_dev == target.st_dev &&
        stream.st_ino == target.st_ino)
      return fd;
  }
  return -1;
}

// The process's own stdout or stderr named as the output (/dev/stdout, even when it is a file):
// written through its descriptor, after what stdio has printed there, so that what follows
// lands after it (a new descriptor of the same file would have its own offset).
Status write_own_stream(int fd, std::span<const uint8_t> bytes, const std::string& shown) {
  std::fflush(nullptr);
  return write_all(fd, bytes, shown);
}

// A device or a pipe named as the output (/dev/null, a FIFO) is written in place: renaming a
// file over it would replace the device node. A FIFO without a reader is an error, not a wait.
Status write_in_place(const std::string& path, std::span<const uint8_t> bytes,
                      const std::string& shown) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return DCP_ERROR(shown, ": cannot open for writing: ", std::strerror(errno));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  Status st = write_all(fd, bytes, shown);
  if (::close(fd) != 0 && st.ok()) st = DCP_ERROR(shown, ": close failed: ", std::strerror(errno));
  return st;
}

}  // namespace

bool written_in_place(const struct stat& target) {
  return !S_ISREG(target.st_mode) || own_stream(target) >= 0;
}

Status write_whole_file(const std::string& path, std::span<const uint8_t> bytes) {
  if (path.empty()) return DCP_ERROR("cannot write a file with an empty name");
  const std::string shown = printable(path);
  struct stat target {};
  const bool exists = ::stat(path.c_str(), &target) == 0;
  if (exists && S_ISDIR(target.st_mode)) return DCP_ERROR(shown, ": is a folder");
  if (exists) {
    if (const int fd = own_stream(target); fd >= 0) return write_own_stream(fd, bytes, shown);
    if (!S_ISREG(target.st_mode)) return write_in_place(path, bytes, shown);
    // Renaming over a file needs only its folder's permission: a file this user may not write
    // (mode 0444) is refused as opening it would be, not replaced.
    if (::access(path.c_str(), W_OK) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(target.st_mode & 07777));
      return DCP_ERROR(shown, ": not writable by this user (mode ", mode, ")");
    }
  }

  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  const HoldSignals hold;
  // A new file of our own beside the target (the same file system, so rename is atomic), made
  // with mode 0666 less the umask, as any file the user creates.
  std::mt19937_64 rng(std::random_device{}());
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < kNameTries && fd < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".%016llx", static_cast<unsigned long long>(rng()));
    tmp = (dir / ("." + p.filename().string().substr(0, kNameChars) + suffix)).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    return DCP_ERROR(shown, ": cannot open for writing (a new file in '", printable(dir.string()),
                     "'): ", std::strerror(errno));
  auto fail = [&](Status st) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  };
  // Replacing a file keeps its permissions.
  if (exists && ::fchmod(fd, target.st_mode & 07777) != 0)
    return fail(DCP_ERROR(shown, ": cannot keep its mode: ", std::strerror(errno)));
  if (Status st = write_all(fd, bytes, shown); !st) return fail(st);
  if (::fsync(fd) != 0)
    return fail(DCP_ERROR(shown, ": flush to disk failed: ", std::strerror(errno)));
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return DCP_ERROR(shown, ": close failed: ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return DCP_ERROR(shown, ": cannot rename the new file into place: ", std::strerror(err));
  }
  // The rename itself reaches the disk with the folder.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace dcp::oracle
