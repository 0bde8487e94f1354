// Checks on a file a training run is about to read (--data, --init, a checkpoint), made before it is
// opened: opening a FIFO blocks until some writer appears (a FIFO named checkpoint-00000010.safetensors
// hung `--resume` forever), and "no such file" for a directory or a symlink loop sent the user
// looking for the wrong problem. Private to runtime/src/train (train_common.cpp, checkpoint.cpp).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace dpscope::detail {

// Why `path` cannot be read as a regular file (symbolic links followed): "no such file", "is a
// directory", "is a FIFO (named pipe), not a regular file", "is a character device, not a regular
// file", "Too many levels of symbolic links" (strerror), ...; nullopt for a regular file. The file
// is not opened.
std::optional<std::string> unreadable_file_reason(const std::filesystem::path& path);

}  // namespace dpscope::detail
