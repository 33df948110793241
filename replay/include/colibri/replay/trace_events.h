// TraceEventWriter: a replay's timeline as a Chrome / Perfetto trace-event
// file (the JSON Object Format of the Trace Event Format: opens in
// ui.perfetto.dev and chrome://tracing).
//
// An EventSink (sim/event_log.h): set it on ReplayConfig::event_sink and every
// modelled read, copy and kernel, every layer batch (and dense pass, when the
// replay logs them) becomes one complete event ("ph":"X"), `ts` and `dur` in
// microseconds with three decimals (nanosecond precision, exact), on the
// run's clock (the simulated clock starts at 0).
//
// Layout: one process (pid 1, 2, ...) per BeginProcess -- one per machine --
// named by a "process_name" metadata event; in it one track per kind: "nvme
// reads", "pcie copies", "compute" (expert FFNs and gates), "dense", "layer
// batches". Spans of one kind that overlap (queue depth > 1, several copy
// engines) are spread over lanes, each its own thread ("nvme reads #2"): a
// span goes to the lowest lane whose last span ended at or before its start,
// so spans never overlap within a thread and the layout is deterministic.
// Thread ids are unique across processes (pid * 1,000,000 + kind * 100,000 +
// lane + 1).
//
// Size: at most `max_events` spans are written (about 150 bytes each); later
// ones are dropped and counted. A truncated file says so: the process's name
// ends in " (truncated)", an instant event marks the first dropped span, and
// the top-level "otherData" (shown as metadata) has truncated, max_events,
// spans_written, spans_dropped.
//
// Output: streamed to "<path>.partial", renamed to <path> by Finish(); an
// error, or a writer destroyed without Finish(), leaves no file at either
// path. Not synced to disk (a crash may leave the .partial file).
//
// Ownership: owns its file. Thread-safety: none; spans come from the thread
// that drives the replay. Errors: Create's, and the first write error, kept
// and returned by Finish() (later spans are then ignored).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/sim/event_log.h"
#include "colibri/status.h"

namespace colibri::replay {

class TraceEventWriter final : public sim::EventSink {
 public:
  static constexpr uint64_t kDefaultMaxEvents = 2'000'000;

  // Creates "<path>.partial" and, when `process_name` is not empty, begins the
  // first process with that name.
  static Result<std::unique_ptr<TraceEventWriter>> Create(const std::string& path, const std::string& process_name,
                                                          uint64_t max_events = kDefaultMaxEvents);
  ~TraceEventWriter() override;
  TraceEventWriter(const TraceEventWriter&) = delete;
  TraceEventWriter& operator=(const TraceEventWriter&) = delete;

  // Ends the current process (writes its metadata) and begins the next, pid
  // one higher, for the spans that follow (one per machine). Returns its pid.
  // Spans before any BeginProcess go to a process named "colibri replay".
  int BeginProcess(const std::string& name);

  void OnSpan(engine::TimeNs start_ns, engine::TimeNs end_ns, sim::EventKind kind, uint64_t a, uint64_t b) override;

  // Writes the metadata and the closing of the JSON, closes the file and
  // renames it to the path; on error removes it. Later spans are ignored.
  // Idempotent: returns the first call's status.
  Status Finish();

  const std::string& path() const { return path_; }
  bool truncated() const { return spans_dropped_ > 0; }
  uint64_t spans_written() const { return spans_written_; }
  uint64_t spans_dropped() const { return spans_dropped_; }
  uint64_t max_events() const { return max_events_; }

 private:
  static constexpr int kTracks = 6;  // reads, copies, compute, dense, layer batches, other kinds

  struct Process {
    int pid = 0;
    std::string name;
    bool truncated = false;
    std::array<std::vector<engine::TimeNs>, kTracks> lane_end_ns;  // per track, per lane: its last span's end
  };

  TraceEventWriter(std::string path, std::string file_path, int fd, uint64_t max_events);
  void EndProcess();                 // writes the current process's metadata events
  void AppendSeparator();            // ",\n" between events
  void WriteOut(bool force);         // writes the buffer out when it is large (or force); keeps the first error

  std::string path_;
  std::string file_path_;  // path_ + ".partial"
  int fd_ = -1;
  uint64_t max_events_;
  std::string buffer_;
  Status status_;
  bool finished_ = false;
  bool first_event_ = true;
  int next_pid_ = 1;
  Process process_;        // pid 0: none begun yet
  uint64_t spans_written_ = 0;
  uint64_t spans_dropped_ = 0;
};

}  // namespace colibri::replay
