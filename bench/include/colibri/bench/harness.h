// What every harness in colibri_bench shares: the JSON type of the documents
// the benchmark suites return (insertion-ordered, so keys print in the order
// they are built), rounding sizes up, and the Observer through which a harness reports while it
// runs. Harnesses print nothing themselves: progress, warnings and notes go
// to the Observer, results come back as values.
//
// Ownership: a harness copies nothing of its Observer; what the callbacks
// capture must outlive the call. Thread-safety: an Observer's callbacks are
// called on the thread that runs the harness. Errors: none here.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace colibri::bench {

using Json = nlohmann::ordered_json;

// `value` rounded up to a multiple of `multiple` (> 0): buffer and read sizes.
inline uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Callbacks a harness calls while it runs; any may be empty (ignored).
struct Observer {
  // `done` of `total` steps (total 0: unknown). Called often: keep it cheap.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // The steps reported so far are over (a progress line may go) and the
  // harness works on without reporting progress.
  std::function<void()> progress_done;
  // Something the person running it should know that does not stop the run
  // (a reference that is weak on this machine), one line without "warning:".
  std::function<void(const std::string& line)> warning;
  // A line of context for the log (where a library was found), as it is.
  std::function<void(const std::string& line)> note;

  void Progress(uint64_t done, uint64_t total) const {
    if (progress) progress(done, total);
  }
  void ProgressDone() const {
    if (progress_done) progress_done();
  }
  void Warn(const std::string& line) const {
    if (warning) warning(line);
  }
  void Note(const std::string& line) const {
    if (note) note(line);
  }
};

}  // namespace colibri::bench
