// file_write.hpp — writes a whole file or nothing.
//
// The bytes go to a new temporary file in the target's own folder, are flushed to disk, and the
// temporary is renamed over the target. rename() within one file system is atomic: a reader, or
// a run interrupted at any point, sees the old file or the complete new one, never half of one;
// on failure the temporary is removed and the target is untouched (Ctrl-C and SIGTERM are held
// back while it is written). A file replaced keeps its permissions; a new one gets 0666 less
// the umask. A target that is a symbolic link to a file is replaced by the new file (the file
// the link pointed to is left as it was); a device or a pipe (/dev/null, /dev/stdout, a FIFO
// with a reader) is written in place, and the process's own standard output or error, whatever
// it is (/dev/stdout when stdout is a file), through its descriptor, after what was printed.
//
//   DCP_TRY(write_whole_file("ref.safetensors", serialize_safetensors(file)));
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <string>

#include "oracle/status.hpp"

namespace dcp::oracle {

Status write_whole_file(const std::string& path, std::span<const uint8_t> bytes);

// Whether an existing target (its stat, links followed) is written in place rather than
// replaced: not a regular file, or the file this process's stdout or stderr writes to.
bool written_in_place(const struct stat& target);

}  // namespace dcp::oracle
