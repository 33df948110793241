// Running one measurement in a forked child process, so that its figures
// (peak RSS, CPU time) are its own and not the parent's: the child runs `fn`,
// sends its Result<Json> back over a pipe as JSON and exits with _exit (no
// atexit handlers, no flush of the parent's stdio); the parent waits with
// wait4 for the child's rusage (`colibri bench replay`).
//
// Ownership: the call owns the pipe and the child until it has exited.
// Thread-safety: fork() from a process with other threads running is only
// safe when `fn` touches nothing those threads hold; call it from a process
// that runs one thread. Errors: kIoError when the pipe or the fork fails;
// kInternal when the child dies, exits non-zero or sends no result; `fn`'s
// own error (code and message) when it fails.
#pragma once

#include <cstdint>
#include <functional>

#include "colibri/bench/harness.h"
#include "colibri/status.h"

namespace colibri::bench {

// What a forked child computed, and its resources as its parent saw them (wait4).
struct ChildOutcome {
  Json value;
  uint64_t ru_maxrss_bytes = 0;  // the child's peak resident set (pages shared with the parent at fork count)
  double cpu_s = 0;              // user + system time of the whole child
};

// Runs `fn` in a forked child; `tick`, when set, runs in the parent about
// every 200 ms while it waits (a progress line).
Result<ChildOutcome> RunInChild(const std::function<Result<Json>()>& fn, const std::function<void()>& tick = {});

}  // namespace colibri::bench
