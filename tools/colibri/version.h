// The CLI's version and the git commit it was configured from. Defined in a
// source file CMake generates (tools/version.cc.in), so that a new commit
// recompiles one file, not every file that prints or stores the commit.
// Thread-safety: constant strings.
#pragma once

namespace colibri::cli {

const char* ColibriVersion();    // e.g. "0.1.0"
const char* ColibriGitCommit();  // 12 hex digits, or "unknown" outside a git checkout

}  // namespace colibri::cli
