#include "colibri/sim/sim_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "colibri/sim/random.h"
#include "colibri/sim/read_grid.h"
#include "model_time.h"

namespace colibri::sim {
namespace {

using engine::ReadCompletion;
using engine::ReadRequest;
using model_internal::DurationNs;

constexpr uint32_t kAlignmentBytes = 4096;
constexpr uint32_t kMaxQueueDepth = engine::kMaxStorageQueueDepth;
constexpr uint64_t kMaxChunkBytes = 0x7ffff000;  // the most one pread(2) transfers on Linux

// An owned file descriptor (-1: none), closed on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// The file reads deliver bytes from, or none (fd -1).
struct DataFile {
  std::string name;  // the path, or "sim-nvme:<profile id>" without a file: names the drive in messages
  Fd fd;
  uint64_t size_bytes = 0;
};

Status CheckProfile(const NvmeProfile& p) {
  const std::string name = "nvme profile '" + p.id + "'";
  if (p.channels == 0) return Status::InvalidArgument(name + ": channels must be >= 1");
  if (p.queue_depth == 0) return Status::InvalidArgument(name + ": queue_depth must be >= 1");
  if (p.per_op_ns < 0) return Status::InvalidArgument(name + ": per_op_ns must be >= 0");
  if (p.channel_read_bytes_per_s == 0) return Status::InvalidArgument(name + ": channel_read_bytes_per_s must be > 0");
  if (p.read_bytes_per_s == 0) return Status::InvalidArgument(name + ": read_bytes_per_s must be > 0");
  return Status::Ok();
}

Status CheckOptions(const SimStorageOptions& o) {
  if (o.loop == nullptr) return Status::InvalidArgument("sim storage: SimStorageOptions::loop is required");
  if (o.queue_depth > kMaxQueueDepth) {
    return Status::InvalidArgument("sim storage: queue depth must be <= " + std::to_string(kMaxQueueDepth) +
                                   " (got " + std::to_string(o.queue_depth) + ")");
  }
  if (o.data_path.empty() && o.file_bytes == 0) {
    return Status::InvalidArgument("sim storage: file_bytes must be > 0 when there is no data_path");
  }
  return Status::Ok();
}

Result<DataFile> OpenDataFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) return Status::NotFound(path + ": no such file");
  if (fd < 0) return Status::IoError(path + ": cannot open: " + std::strerror(errno));
  DataFile file{path, Fd(fd), 0};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::IoError(path + ": fstat failed: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  file.size_bytes = static_cast<uint64_t>(st.st_size);
  return file;
}

Result<DataFile> OpenData(const NvmeProfile& profile, const SimStorageOptions& options) {
  if (options.data_path.empty()) return DataFile{"sim-nvme:" + profile.id, Fd(), options.file_bytes};
  return OpenDataFile(options.data_path);
}

std::string DescribeRead(const std::string& name, const ReadRequest& request) {
  return name + ": read of " + std::to_string(request.bytes) + " bytes at offset " + std::to_string(request.offset);
}

// The real backends' checks and messages (engine/src/storage_common.cc), with O_DIRECT alignment.
Status CheckRequest(const DataFile& file, const ReadRequest& request) {
  // Messages are built only on failure: this runs for every read.
  auto rule = [] { return " (alignment " + std::to_string(kAlignmentBytes) + " bytes with O_DIRECT)"; };
  auto invalid = [&](const std::string& what) { return Status::InvalidArgument(DescribeRead(file.name, request) + what); };
  if (request.buffer == nullptr) return invalid(": buffer is null");
  if (request.bytes == 0) return invalid(": length must be > 0");
  if (request.offset % kAlignmentBytes != 0) return invalid(": offset is not aligned" + rule());
  if (request.bytes % kAlignmentBytes != 0) return invalid(": length is not aligned" + rule());
  if (reinterpret_cast<uintptr_t>(request.buffer) % kAlignmentBytes != 0) {
    return invalid(": buffer address is not aligned" + rule());
  }
  if (request.offset > file.size_bytes || request.bytes > file.size_bytes - request.offset) {
    return invalid(": ends past the end of the file (" + std::to_string(file.size_bytes) + " bytes)");
  }
  return Status::Ok();
}

// Reads the whole request from `file` into its buffer, continuing short reads;
// *done_bytes says how far it got. The real backends' error messages.
Status ReadFully(const DataFile& file, const ReadRequest& request, uint64_t* done_bytes) {
  char* buffer = static_cast<char*>(request.buffer);
  while (*done_bytes < request.bytes) {
    const uint64_t offset = request.offset + *done_bytes;
    const size_t chunk = std::min(request.bytes - *done_bytes, kMaxChunkBytes);
    const ssize_t got = ::pread(file.fd.get(), buffer + *done_bytes, chunk, static_cast<off_t>(offset));
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) {
      return Status::IoError(file.name + ": read at offset " + std::to_string(offset) +
                             " failed: " + std::strerror(errno));
    }
    if (got == 0) {
      return Status::IoError(file.name + ": read at offset " + std::to_string(offset) +
                             ": unexpected end of file (did the file shrink?)");
    }
    *done_bytes += static_cast<uint64_t>(got);
  }
  return Status::Ok();
}

class SimStorage;

// What a completion task holds to find its backend: a cell that names the
// backend while it lives (null after), so tasks of a destroyed backend do
// nothing. A task captures the cell's address and a slot number: trivially
// copyable and small, so std::function stores it without allocating.
struct LiveCell {
  SimStorage* storage = nullptr;
};

// The cells, shared by every SimStorage of the process. A backend's cell is
// reused only when no task of it can still be queued (none was in the device
// when it was destroyed); the others are kept until exit.
class LiveCells {
 public:
  static LiveCell* Acquire(SimStorage* storage) {
    LiveCells& cells = Instance();
    std::lock_guard<std::mutex> lock(cells.mu_);
    LiveCell* cell = nullptr;
    if (!cells.free_.empty()) {
      cell = cells.free_.back();
      cells.free_.pop_back();
    } else {
      cell = &cells.cells_.emplace_back();
    }
    cell->storage = storage;
    return cell;
  }
  static void Release(LiveCell* cell, bool tasks_queued) {
    LiveCells& cells = Instance();
    std::lock_guard<std::mutex> lock(cells.mu_);
    cell->storage = nullptr;
    if (!tasks_queued) cells.free_.push_back(cell);
  }

 private:
  static LiveCells& Instance() {
    static LiveCells cells;
    return cells;
  }
  std::mutex mu_;
  std::deque<LiveCell> cells_;  // stable addresses
  std::vector<LiveCell*> free_;
};

class SimStorage final : public engine::StorageBackend {
 public:
  SimStorage(const NvmeProfile& profile, const SimStorageOptions& options, LatencySampler latency,
             std::optional<ReadGridModel> grid, DataFile file)
      : profile_(profile),
        loop_(options.loop),
        event_log_(options.event_log),
        latency_(std::move(latency)),
        grid_(std::move(grid)),
        rng_(DeriveSeed(options.seed, "sim_storage")),
        file_(std::move(file)),
        channel_free_ns_(profile.channels, 0) {
    caps_.name = "sim";
    caps_.alignment_bytes = kAlignmentBytes;
    const uint32_t asked = options.queue_depth == 0 ? profile.queue_depth : options.queue_depth;
    caps_.queue_depth = std::min(asked, profile.queue_depth);
    caps_.direct_io = true;
    caps_.delivers_data = file_.fd.get() >= 0;
  }
  ~SimStorage() override { LiveCells::Release(cell_, /*tasks_queued=*/in_device_ > 0); }
  SimStorage(const SimStorage&) = delete;
  SimStorage& operator=(const SimStorage&) = delete;

  const engine::StorageCaps& caps() const override { return caps_; }
  const engine::StorageCounters& counters() const override { return counters_; }
  const std::string& warning() const override { return warning_; }
  size_t outstanding() const override { return waiting_.size() + in_device_ + ready_.size(); }

  Status Submit(const ReadRequest& request) override {
    COLIBRI_RETURN_IF_ERROR(CheckRequest(file_, request));
    const Read read{request, loop_->Now()};
    if (!waiting_.empty() || in_device_ >= caps_.queue_depth) {
      ++counters_.queue_full_events;
      waiting_.push_back(read);
      return Status::Ok();
    }
    Issue(read, read.submit_ns);
    return Status::Ok();
  }

  Status Poll(bool wait, std::vector<ReadCompletion>* out) override {
    if (wait && ready_.empty() && outstanding() > 0) COLIBRI_RETURN_IF_ERROR(RunUntilACompletion());
    HandOver(out);
    return Status::Ok();
  }

 private:
  struct Read {
    ReadRequest request;
    engine::TimeNs submit_ns = 0;
  };

  // Runs the loop until a read becomes ready, or one is handed over by a
  // nested Poll (the loop may poll an event source that wraps this backend).
  Status RunUntilACompletion() {
    const uint64_t handed_before = handed_over_;
    COLIBRI_RETURN_IF_ERROR(loop_->RunUntil([&] { return !ready_.empty() || handed_over_ != handed_before; }));
    if (ready_.empty() && handed_over_ == handed_before) {
      return Status::Internal(file_.name + ": reads outstanding but the event loop ran dry");
    }
    return Status::Ok();
  }

  // Issues `read` to the device at `at_ns` (or its submission, if later) and
  // schedules its completion.
  void Issue(const Read& read, engine::TimeNs at_ns) {
    ++in_device_;
    engine::TimeNs start_ns = std::max(at_ns, read.submit_ns);
    engine::TimeNs done_ns = 0;
    if (grid_) {
      // The measured grid (read_grid.h): the read is the in_device_-th in the device. A shared
      // burst draws one uniform for every read issued at the same instant.
      if (!shared_burst_ || !burst_drawn_ || burst_at_ns_ != start_ns) {
        burst_u_ = rng_.NextDouble();
        burst_at_ns_ = start_ns;
        burst_drawn_ = true;
      }
      done_ns = start_ns + grid_->LatencyNs(read.request.bytes, static_cast<uint32_t>(in_device_), burst_u_);
    } else {
      done_ns = ServiceEndNs(read.request.bytes, start_ns, &start_ns) + latency_.Sample(&rng_);
    }
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(in_device_reads_.size());
      in_device_reads_.emplace_back();
    }
    in_device_reads_[slot] = InDevice{read, start_ns, done_ns};
    LiveCell* const cell = cell_;
    loop_->RunAt(done_ns, [cell, slot] {
      if (cell->storage != nullptr) cell->storage->Complete(slot);
    });
  }

 public:  // for the completion task
  // The completion task of the read in `slot`.
  void Complete(uint32_t slot) {
    const InDevice d = in_device_reads_[slot];
    free_slots_.push_back(slot);
    OnDeviceDone(d.read, d.start_ns, d.done_ns);
  }

 private:

  // Books a channel and the link for `bytes` from `issue_ns`; returns when both
  // are done. *start_out: when the channel starts serving it.
  engine::TimeNs ServiceEndNs(uint64_t bytes, engine::TimeNs issue_ns, engine::TimeNs* start_out) {
    const auto channel = std::min_element(channel_free_ns_.begin(), channel_free_ns_.end());  // first of equals
    const engine::TimeNs start_ns = std::max(issue_ns, *channel);
    *start_out = start_ns;
    *channel = start_ns + profile_.per_op_ns + DurationNs(bytes, profile_.channel_read_bytes_per_s);
    link_free_ns_ = std::max(start_ns, link_free_ns_) + DurationNs(bytes, profile_.read_bytes_per_s);
    return std::max(*channel, link_free_ns_);
  }

  // The completion task: the read (served from `start_ns`) is ready at `done_ns`; waiting reads are issued then.
  void OnDeviceDone(const Read& read, engine::TimeNs start_ns, engine::TimeNs done_ns) {
    --in_device_;
    uint64_t bytes = read.request.bytes;
    Status status;
    if (caps_.delivers_data) {
      bytes = 0;
      status = ReadFully(file_, read.request, &bytes);
    }
    ready_.push_back(ReadCompletion{read.request.tag, std::move(status), bytes, read.submit_ns, done_ns});
    // The span: from when a channel starts serving the read (queueing before it is the gap after
    // its submission) to its completion, latency included.
    if (event_log_ != nullptr) event_log_->Append(start_ns, done_ns, EventKind::kRead, read.request.offset, bytes);
    while (!waiting_.empty() && in_device_ < caps_.queue_depth) {
      const Read next = waiting_.front();
      waiting_.pop_front();
      Issue(next, done_ns);
    }
  }

  void HandOver(std::vector<ReadCompletion>* out) {
    for (ReadCompletion& c : ready_) {
      engine::CountCompletion(c, &counters_);
      ++handed_over_;
      out->push_back(std::move(c));
    }
    ready_.clear();
  }

  const NvmeProfile profile_;
  engine::EventLoop* const loop_;
  EventLog* const event_log_;
  const LatencySampler latency_;
  const std::optional<ReadGridModel> grid_;  // the measured model, when the profile has a read grid
  const bool shared_burst_ = profile_.read_grid.burst == ReadGridBurst::kShared;
  double burst_u_ = 0;                      // the last uniform drawn for the grid, at burst_at_ns_
  engine::TimeNs burst_at_ns_ = 0;
  bool burst_drawn_ = false;
  Rng rng_;
  const DataFile file_;
  engine::StorageCaps caps_;
  engine::StorageCounters counters_;
  const std::string warning_;
  std::vector<engine::TimeNs> channel_free_ns_;
  engine::TimeNs link_free_ns_ = 0;
  std::deque<Read> waiting_;               // submitted, not yet issued (FIFO)
  size_t in_device_ = 0;                   // issued, completion task not yet run
  std::vector<ReadCompletion> ready_;      // completed, not yet handed over
  uint64_t handed_over_ = 0;
  // Reads in the device, by slot (free_slots_: slots to reuse); a completion task names its slot.
  struct InDevice {
    Read read;
    engine::TimeNs start_ns = 0;
    engine::TimeNs done_ns = 0;
  };
  std::vector<InDevice> in_device_reads_;
  std::vector<uint32_t> free_slots_;
  // Scheduled tasks reach the backend through this cell, so they do nothing once it is gone.
  LiveCell* const cell_ = LiveCells::Acquire(this);
};

}  // namespace

Result<std::unique_ptr<engine::StorageBackend>> MakeSimStorage(const NvmeProfile& profile,
                                                               const SimStorageOptions& options) {
  COLIBRI_RETURN_IF_ERROR(CheckOptions(options));
  COLIBRI_RETURN_IF_ERROR(CheckProfile(profile));
  COLIBRI_ASSIGN_OR_RETURN(LatencySampler latency,
                           LatencySampler::Make(profile.read_latency, "nvme profile '" + profile.id + "': read_latency"));
  std::optional<ReadGridModel> grid;
  if (!profile.read_grid.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(grid, ReadGridModel::Make(profile.read_grid, "nvme profile '" + profile.id + "'"));
  }
  COLIBRI_ASSIGN_OR_RETURN(DataFile file, OpenData(profile, options));
  return std::unique_ptr<engine::StorageBackend>(
      new SimStorage(profile, options, std::move(latency), std::move(grid), std::move(file)));
}

}  // namespace colibri::sim
