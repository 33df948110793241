// CheckInputFile: refuses, by type and before any open(), what cannot be read
// as a whole input file.
//
// A FIFO without a writer would block open() forever, a character device
// (/dev/zero) never ends, and files of /proc and /sys report a size of 0
// while holding data: none of them is a trace, a model or a CSV. Stateless
// and thread-safe. Errors: kNotFound for a missing path, kInvalidArgument
// naming the path and what it is, kIoError when stat() itself fails.
#pragma once

#include <string>

#include "colibri/status.h"

namespace colibri::engine {

// OK when `path` is a regular file outside /proc and /sys (symlinks followed).
// `what` names the expected input in the message ("trace file", "CSV file").
Status CheckInputFile(const std::string& path, const std::string& what);

}  // namespace colibri::engine
