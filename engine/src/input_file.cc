#include "colibri/engine/input_file.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cerrno>
#include <cstring>

namespace colibri::engine {
namespace {

const char* TypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Status CheckInputFile(const std::string& path, const std::string& what) {
  if (path.empty()) return Status::InvalidArgument("the " + what + " name is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT) return Status::NotFound(path + ": no such file");
    if (error == ENOTDIR) return Status::NotFound(path + ": no such file (a part of the path is not a directory)");
    return Status::IoError(path + ": cannot stat: " + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + ": is " + TypeName(st.st_mode) + ", not a " + what);
  }
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) == 0 &&
      (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC || fs.f_type == DEBUGFS_MAGIC)) {
    return Status::InvalidArgument(path + ": is a kernel pseudo-file (/proc, /sys), not a " + what);
  }
  return Status::Ok();
}

}  // namespace colibri::engine
