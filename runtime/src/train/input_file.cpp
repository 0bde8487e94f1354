// unreadable_file_reason (input_file.hpp): stat(2), never open(2).
#include "input_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace dpscope::detail {

std::optional<std::string> unreadable_file_reason(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
      return std::string("is a symbolic link to a missing file");
    if (err == ENOENT) return std::string("no such file");
    return std::string(std::strerror(err));  // ELOOP: "Too many levels of symbolic links", EACCES, ...
  }
  if (S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISDIR(st.st_mode)) return std::string("is a directory");
  if (S_ISFIFO(st.st_mode)) return std::string("is a FIFO (named pipe), not a regular file");
  if (S_ISCHR(st.st_mode)) return std::string("is a character device, not a regular file");
  if (S_ISBLK(st.st_mode)) return std::string("is a block device, not a regular file");
  if (S_ISSOCK(st.st_mode)) return std::string("is a socket, not a regular file");
  return std::string("is not a regular file");
}

}  // namespace dpscope::detail
