#include "colibri/replay/trace_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "colibri/sim/fault_spec.h"

namespace colibri::replay {
namespace {

constexpr size_t kWriteThresholdBytes = 1 << 20;
constexpr int64_t kPidStride = 1'000'000;   // tid = pid * kPidStride + track * kTrackStride + lane + 1
constexpr int64_t kTrackStride = 100'000;
constexpr size_t kMaxLanes = kTrackStride - 1;
constexpr int kOtherTrack = 5;
constexpr std::string_view kTrackNames[] = {"nvme reads", "pcie copies", "compute", "dense", "layer batches", "other"};

int TrackOf(sim::EventKind kind) {
  switch (kind) {
    case sim::EventKind::kRead: return 0;
    case sim::EventKind::kCopy: return 1;
    case sim::EventKind::kCompute:
    case sim::EventKind::kGate: return 2;
    case sim::EventKind::kDense: return 3;
    case sim::EventKind::kLayerBatch: return 4;
    case sim::EventKind::kFault: return kOtherTrack;
  }
  return kOtherTrack;
}

void AppendUint(std::string* out, uint64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
  out->append(digits, end);
}

void AppendInt(std::string* out, int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
  out->append(digits, end);
}

// Nanoseconds as microseconds with exactly three decimals: 1234567 -> "1234.567".
void AppendMicros(std::string* out, int64_t ns) {
  uint64_t magnitude = static_cast<uint64_t>(ns);
  if (ns < 0) {
    out->push_back('-');
    magnitude = ~magnitude + 1;  // two's complement: exact for INT64_MIN too
  }
  AppendUint(out, magnitude / 1000);
  const auto frac = static_cast<unsigned>(magnitude % 1000);
  const char decimals[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                            static_cast<char>('0' + frac % 10)};
  out->append(decimals, 4);
}

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 0xF]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

Status ErrnoStatus(const std::string& what, const std::string& path) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<TraceEventWriter>> TraceEventWriter::Create(const std::string& path,
                                                                   const std::string& process_name,
                                                                   uint64_t max_events) {
  if (path.empty()) return Status::InvalidArgument("trace events: empty output path");
  const std::string file_path = path + ".partial";
  const int fd = ::open(file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create the trace-events file", file_path);
  std::unique_ptr<TraceEventWriter> writer(new TraceEventWriter(path, file_path, fd, max_events));
  writer->buffer_ = "{\"traceEvents\":[\n";
  if (!process_name.empty()) writer->BeginProcess(process_name);
  return writer;
}

TraceEventWriter::TraceEventWriter(std::string path, std::string file_path, int fd, uint64_t max_events)
    : path_(std::move(path)), file_path_(std::move(file_path)), fd_(fd), max_events_(max_events) {}

TraceEventWriter::~TraceEventWriter() {
  if (finished_) return;
  ::close(fd_);
  ::unlink(file_path_.c_str());
}

int TraceEventWriter::BeginProcess(const std::string& name) {
  EndProcess();
  process_ = Process{};
  process_.pid = next_pid_++;
  process_.name = name;
  return process_.pid;
}

void TraceEventWriter::AppendSeparator() {
  if (!first_event_) buffer_.append(",\n");
  first_event_ = false;
}

void TraceEventWriter::OnSpan(engine::TimeNs start_ns, engine::TimeNs end_ns, sim::EventKind kind, uint64_t a,
                              uint64_t b) {
  if (finished_ || !status_.ok()) return;
  if (process_.pid == 0) BeginProcess("colibri replay");
  if (end_ns < start_ns) end_ns = start_ns;
  if (spans_written_ >= max_events_) {
    if (!process_.truncated) {
      // Marks where this process's timeline stops being complete.
      process_.truncated = true;
      AppendSeparator();
      buffer_.append("{\"ph\":\"i\",\"s\":\"p\",\"pid\":");
      AppendInt(&buffer_, process_.pid);
      buffer_.append(",\"tid\":");
      AppendInt(&buffer_, process_.pid * kPidStride);
      buffer_.append(",\"ts\":");
      AppendMicros(&buffer_, start_ns);
      buffer_.append(",\"name\":");
      AppendJsonString(&buffer_, "trace-events truncated: max_events " + std::to_string(max_events_) +
                                     " spans reached, later spans dropped");
      buffer_.append(",\"cat\":\"colibri\"}");
    }
    ++spans_dropped_;
    return;
  }
  ++spans_written_;

  // The lowest lane free at start_ns (first of equals): spans never overlap in a lane.
  const int track = TrackOf(kind);
  std::vector<engine::TimeNs>& lanes = process_.lane_end_ns[track];
  size_t lane = 0;
  while (lane < lanes.size() && lanes[lane] > start_ns) ++lane;
  if (lane == lanes.size()) {
    if (lanes.size() < kMaxLanes) {
      lanes.push_back(end_ns);
    } else {
      lane = std::min_element(lanes.begin(), lanes.end()) - lanes.begin();  // unreachable in practice
    }
  }
  lanes[lane] = std::max(lanes[lane], end_ns);

  AppendSeparator();
  buffer_.append("{\"ph\":\"X\",\"pid\":");
  AppendInt(&buffer_, process_.pid);
  buffer_.append(",\"tid\":");
  AppendInt(&buffer_, process_.pid * kPidStride + track * kTrackStride + static_cast<int64_t>(lane) + 1);
  buffer_.append(",\"ts\":");
  AppendMicros(&buffer_, start_ns);
  buffer_.append(",\"dur\":");
  AppendMicros(&buffer_, end_ns - start_ns);
  switch (kind) {
    case sim::EventKind::kRead:
      buffer_.append(",\"name\":\"read\",\"cat\":\"nvme\",\"args\":{\"offset\":");
      AppendUint(&buffer_, a);
      buffer_.append(",\"bytes\":");
      AppendUint(&buffer_, b);
      break;
    case sim::EventKind::kCopy:
      buffer_.append(",\"name\":\"copy\",\"cat\":\"pcie\",\"args\":{\"tag\":");
      AppendUint(&buffer_, a);
      buffer_.append(",\"bytes\":");
      AppendUint(&buffer_, b);
      break;
    case sim::EventKind::kCompute:
    case sim::EventKind::kGate:
      buffer_.append(kind == sim::EventKind::kCompute ? ",\"name\":\"expert ffn\"" : ",\"name\":\"gate\"");
      buffer_.append(",\"cat\":\"compute\",\"args\":{\"tokens\":");
      AppendUint(&buffer_, a);
      break;
    case sim::EventKind::kDense:
      buffer_.append(",\"name\":\"dense ");
      AppendUint(&buffer_, a);
      buffer_.append("\",\"cat\":\"dense\",\"args\":{\"layer\":");
      AppendUint(&buffer_, a);
      buffer_.append(",\"bytes\":");
      AppendUint(&buffer_, b);
      break;
    case sim::EventKind::kLayerBatch:
      buffer_.append(",\"name\":\"layer ");
      AppendUint(&buffer_, a);
      buffer_.append("\",\"cat\":\"replay\",\"args\":{\"layer\":");
      AppendUint(&buffer_, a);
      buffer_.append(",\"tokens\":");
      AppendUint(&buffer_, b);
      break;
    case sim::EventKind::kFault:
      buffer_.append(",\"name\":\"fault ");
      buffer_.append(a < sim::kFaultKindCount ? sim::FaultKindName(static_cast<sim::FaultKind>(a)) : "unknown");
      buffer_.append("\",\"cat\":\"fault\",\"args\":{\"kind\":");
      AppendUint(&buffer_, a);
      break;
    default:
      buffer_.append(",\"name\":\"event ");
      AppendUint(&buffer_, static_cast<uint32_t>(kind));
      buffer_.append("\",\"cat\":\"other\",\"args\":{\"a\":");
      AppendUint(&buffer_, a);
      buffer_.append(",\"b\":");
      AppendUint(&buffer_, b);
      break;
  }
  buffer_.append("}}");
  WriteOut(/*force=*/false);
}

void TraceEventWriter::EndProcess() {
  if (process_.pid == 0) return;
  const int64_t pid = process_.pid;
  auto metadata = [&](std::string_view what, const int64_t* tid, auto&& args) {
    AppendSeparator();
    buffer_.append("{\"ph\":\"M\",\"pid\":");
    AppendInt(&buffer_, pid);
    if (tid != nullptr) {
      buffer_.append(",\"tid\":");
      AppendInt(&buffer_, *tid);
    }
    buffer_.append(",\"name\":");
    AppendJsonString(&buffer_, what);
    buffer_.append(",\"args\":{");
    args();
    buffer_.append("}}");
  };
  metadata("process_name", nullptr, [&] {
    buffer_.append("\"name\":");
    AppendJsonString(&buffer_, process_.name + (process_.truncated ? " (truncated)" : ""));
  });
  metadata("process_sort_index", nullptr, [&] {
    buffer_.append("\"sort_index\":");
    AppendInt(&buffer_, pid);
  });
  for (int track = 0; track <= kOtherTrack; ++track) {
    const size_t lanes = process_.lane_end_ns[track].size();
    for (size_t lane = 0; lane < lanes; ++lane) {
      const int64_t index = track * kTrackStride + static_cast<int64_t>(lane) + 1;
      const int64_t tid = pid * kPidStride + index;
      std::string name(kTrackNames[track]);
      if (lanes > 1) name += " #" + std::to_string(lane + 1);
      metadata("thread_name", &tid, [&] {
        buffer_.append("\"name\":");
        AppendJsonString(&buffer_, name);
      });
      metadata("thread_sort_index", &tid, [&] {
        buffer_.append("\"sort_index\":");
        AppendInt(&buffer_, index);
      });
    }
  }
  WriteOut(/*force=*/false);
}

void TraceEventWriter::WriteOut(bool force) {
  if (!force && buffer_.size() < kWriteThresholdBytes) return;
  size_t done = 0;
  while (status_.ok() && done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status_ = ErrnoStatus("write failed", file_path_);
    } else {
      done += static_cast<size_t>(n);
    }
  }
  buffer_.clear();
}

Status TraceEventWriter::Finish() {
  if (finished_) return status_;
  if (status_.ok()) {
    EndProcess();
    buffer_.append("\n],\"otherData\":{\"generator\":\"colibri replay --trace-events\",\"truncated\":");
    buffer_.append(truncated() ? "true" : "false");
    buffer_.append(",\"max_events\":");
    AppendUint(&buffer_, max_events_);
    buffer_.append(",\"spans_written\":");
    AppendUint(&buffer_, spans_written_);
    buffer_.append(",\"spans_dropped\":");
    AppendUint(&buffer_, spans_dropped_);
    buffer_.append("}}\n");
    WriteOut(/*force=*/true);
  }
  buffer_.clear();
  buffer_.shrink_to_fit();
  if (::close(fd_) != 0 && status_.ok()) status_ = ErrnoStatus("close failed", file_path_);
  finished_ = true;
  if (status_.ok() && std::rename(file_path_.c_str(), path_.c_str()) != 0) {
    status_ = ErrnoStatus("rename to " + path_ + " failed", file_path_);
  }
  if (!status_.ok()) ::unlink(file_path_.c_str());
  return status_;
}

}  // namespace colibri::replay
