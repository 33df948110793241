#include "colibri/bench/child_process.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace colibri::bench {
namespace {

// The child's side: runs `fn`, writes its result to `fd` and exits.
[[noreturn]] void RunChild(const std::function<Result<Json>()>& fn, int fd) {
  Result<Json> result = fn();
  Json message = result.ok() ? Json{{"ok", true}, {"value", result.value()}}
                             : Json{{"ok", false},
                                    {"code", static_cast<int>(result.status().code())},
                                    {"message", result.status().message()}};
  const std::string bytes = message.dump();
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + sent, bytes.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);
    sent += static_cast<size_t>(n);
  }
  ::_exit(0);  // no atexit handlers or stdio flushes of the parent's state
}

// Everything the child writes to `fd`, calling `tick` about every 200 ms.
std::string ReadAll(int fd, const std::function<void()>& tick) {
  std::string received;
  char buffer[65536];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (tick) tick();
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received.append(buffer, static_cast<size_t>(n));
  }
  return received;
}

}  // namespace

Result<ChildOutcome> RunInChild(const std::function<Result<Json>()>& fn, const std::function<void()>& tick) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    RunChild(fn, fds[1]);
  }
  ::close(fds[1]);
  const std::string received = ReadAll(fds[0], tick);
  ::close(fds[0]);
  int wait_status = 0;
  struct rusage usage {};
  while (::wait4(pid, &wait_status, 0, &usage) < 0) {
    if (errno != EINTR) return Status::Internal(std::string("wait4: ") + std::strerror(errno));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return Status::Internal(WIFSIGNALED(wait_status)
                                ? "benchmark child killed by signal " + std::to_string(WTERMSIG(wait_status))
                                : "benchmark child exited with status " + std::to_string(WEXITSTATUS(wait_status)));
  }
  const Json message = Json::parse(received, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object() || !message.contains("ok")) return Status::Internal("benchmark child sent no result");
  if (!message["ok"].get<bool>()) {
    return Status(static_cast<StatusCode>(message["code"].get<int>()), message["message"].get<std::string>());
  }
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return ChildOutcome{message["value"], static_cast<uint64_t>(usage.ru_maxrss) * 1024,
                      seconds(usage.ru_utime) + seconds(usage.ru_stime)};
}

}  // namespace colibri::bench
