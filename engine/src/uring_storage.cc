// UringStorage: the io_uring StorageBackend. The ring has queue_depth entries
// (its completion queue twice that, so it cannot overflow); each in-flight
// read owns one slot, whose index is the SQE's user data. Submit issues the
// read at once when a slot is free; otherwise it waits in FileStorage's FIFO
// and is issued when Poll frees a slot. Reads into a registered buffer use
// IORING_OP_READ_FIXED, others IORING_OP_READ. Short reads are resubmitted
// for the rest, -EAGAIN/-EINTR resubmitted whole; an early end of file or
// any other error is an error completion. Completions come back in the order
// the kernel finishes them.
// Ownership: owns the ring (and the file through FileStorage); the caller
// owns the buffers. Not thread-safe.
#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "storage_common.h"

namespace colibri::engine {
namespace {

using storage_internal::FileStorage;
using storage_internal::PendingRead;

// One read in flight: the request, how much of it has arrived, and its
// registered buffer (-1: none).
struct Slot {
  PendingRead read;
  uint64_t done_bytes = 0;
  int buffer_index = -1;
};

// The registered buffers, sorted by address, to find the one holding a request's buffer.
class RegisteredBuffers {
 public:
  RegisteredBuffers() = default;
  explicit RegisteredBuffers(const std::vector<MemoryRegion>& regions) {
    for (size_t i = 0; i < regions.size(); ++i) {
      by_address_.push_back({reinterpret_cast<uintptr_t>(regions[i].data), regions[i].bytes, static_cast<int>(i)});
    }
    std::sort(by_address_.begin(), by_address_.end(),
              [](const Entry& a, const Entry& b) { return a.start < b.start; });
  }

  // The index of the registered buffer that holds [buffer, buffer + bytes), or -1.
  int Find(const void* buffer, uint64_t bytes) const {
    const auto start = reinterpret_cast<uintptr_t>(buffer);
    auto after = std::upper_bound(by_address_.begin(), by_address_.end(), start,
                                  [](uintptr_t address, const Entry& entry) { return address < entry.start; });
    if (after == by_address_.begin()) return -1;
    const Entry& entry = *(after - 1);
    const uint64_t offset = start - entry.start;
    return offset <= entry.bytes && bytes <= entry.bytes - offset ? entry.index : -1;
  }

 private:
  struct Entry {
    uintptr_t start;
    uint64_t bytes;
    int index;  // given to the kernel
  };
  std::vector<Entry> by_address_;
};

// Equal-sized option buffers as regions.
std::vector<MemoryRegion> RegionsOf(const StorageOptions& options) {
  std::vector<MemoryRegion> regions;
  for (void* buffer : options.registered_buffers) regions.push_back({buffer, options.registered_buffer_bytes});
  return regions;
}

// Calls io_uring_queue_exit on destruction; a ring is never copied or moved once initialised.
struct RingExit {
  void operator()(io_uring* ring) const {
    io_uring_queue_exit(ring);
    delete ring;
  }
};
using RingPtr = std::unique_ptr<io_uring, RingExit>;

Status RingError(const char* call, int negative_errno) {
  return Status::IoError(std::string("io_uring: ") + call + " failed: " + std::strerror(-negative_errno));
}

// Registers `regions` as the ring's fixed buffers (none: nothing to do).
Status RegisterWithKernel(io_uring* ring, const std::vector<MemoryRegion>& regions) {
  if (regions.empty()) return Status::Ok();
  std::vector<iovec> iovecs;
  uint64_t total_bytes = 0;
  for (const MemoryRegion& region : regions) {
    iovecs.push_back(iovec{region.data, region.bytes});
    total_bytes += region.bytes;
  }
  const int reg = io_uring_register_buffers(ring, iovecs.data(), static_cast<unsigned>(iovecs.size()));
  if (reg < 0) {
    return Status::IoError("io_uring: registering " + std::to_string(iovecs.size()) + " buffers (" +
                           std::to_string(total_bytes) + " bytes) failed: " + std::strerror(-reg) +
                           " (limits: RLIMIT_MEMLOCK, 16384 buffers, 1 GiB each)");
  }
  return Status::Ok();
}

class UringStorage final : public FileStorage {
 public:
  UringStorage(storage_internal::StorageFile file, const StorageOptions& options, RingPtr ring)
      : FileStorage("uring", std::move(file), options),
        ring_(std::move(ring)),
        registered_(RegionsOf(options)),
        registered_count_(options.registered_buffers.size()),
        slots_(options.queue_depth) {
    for (uint32_t i = options.queue_depth; i > 0; --i) free_slots_.push_back(i - 1);
  }

  // Waits for the reads in flight (the kernel writes into caller buffers until
  // they finish) and drops their completions.
  ~UringStorage() override {
    DropWaiting();
    std::vector<ReadCompletion> dropped;
    while (in_flight() > 0 && Poll(true, &dropped).ok()) dropped.clear();
  }

  Status Submit(const ReadRequest& request) override {
    COLIBRI_RETURN_IF_ERROR(Enqueue(request));
    return IssueWaiting();
  }

  Status RegisterBuffers(const std::vector<MemoryRegion>& regions) override {
    if (outstanding() > 0) return Status::InvalidArgument("io_uring: cannot register buffers with reads outstanding");
    for (const MemoryRegion& region : regions) {
      if (region.data == nullptr || region.bytes == 0) {
        return Status::InvalidArgument("io_uring: a registered buffer is null or empty");
      }
    }
    if (registered_count_ > 0) io_uring_unregister_buffers(ring_.get());
    registered_ = RegisteredBuffers();
    registered_count_ = 0;
    COLIBRI_RETURN_IF_ERROR(RegisterWithKernel(ring_.get(), regions));
    registered_ = RegisteredBuffers(regions);
    registered_count_ = regions.size();
    return Status::Ok();
  }

  Status Poll(bool wait, std::vector<ReadCompletion>* out) override {
    const size_t before = out->size();
    while (true) {
      COLIBRI_RETURN_IF_ERROR(Reap(out));
      if (!wait || out->size() > before || outstanding() == 0) return Status::Ok();
      const int rc = io_uring_submit_and_wait(ring_.get(), 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN) return RingError("io_uring_submit_and_wait", rc);
    }
  }

 private:
  // Moves waiting reads into free slots, then hands the new SQEs to the kernel.
  Status IssueWaiting() {
    while (HasWaiting() && HasFreeSlot()) {
      const uint32_t slot = free_slots_.back();
      free_slots_.pop_back();
      PendingRead read = TakeWaiting();
      const int buffer_index = registered_.Find(read.request.buffer, read.request.bytes);
      if (buffer_index >= 0) CountRegisteredRead();
      slots_[slot] = Slot{std::move(read), 0, buffer_index};
      COLIBRI_RETURN_IF_ERROR(Prepare(slot));
    }
    return Flush();
  }

  // Writes the SQE for the part of `slot`'s read that has not arrived yet.
  Status Prepare(uint32_t slot) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    // Cannot happen: the ring has queue_depth entries and at most queue_depth reads are in flight.
    if (sqe == nullptr) return Status::Internal("io_uring: submission queue full");
    const Slot& s = slots_[slot];
    char* buffer = static_cast<char*>(s.read.request.buffer) + s.done_bytes;
    const auto bytes =
        static_cast<unsigned>(std::min(s.read.request.bytes - s.done_bytes, storage_internal::kMaxChunkBytes));
    const uint64_t offset = s.read.request.offset + s.done_bytes;
    if (s.buffer_index >= 0) {
      io_uring_prep_read_fixed(sqe, fd(), buffer, bytes, offset, s.buffer_index);
    } else {
      io_uring_prep_read(sqe, fd(), buffer, bytes, offset);
    }
    io_uring_sqe_set_data64(sqe, slot);
    return Status::Ok();
  }

  // Submits prepared SQEs. On EINTR/EAGAIN/EBUSY they stay in the ring and go with the next call.
  Status Flush() {
    if (io_uring_sq_ready(ring_.get()) == 0) return Status::Ok();
    const int rc = io_uring_submit(ring_.get());
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) return RingError("io_uring_submit", rc);
    return Status::Ok();
  }

  // Handles every CQE available now, then refills the freed slots.
  Status Reap(std::vector<ReadCompletion>* out) {
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(ring_.get(), &cqe) == 0) {
      const auto slot = static_cast<uint32_t>(io_uring_cqe_get_data64(cqe));
      const int result = cqe->res;
      io_uring_cqe_seen(ring_.get(), cqe);
      COLIBRI_RETURN_IF_ERROR(OnResult(slot, result, out));
    }
    return IssueWaiting();
  }

  // One CQE: the read finished, failed, or needs resubmitting (short read, EAGAIN).
  Status OnResult(uint32_t slot, int result, std::vector<ReadCompletion>* out) {
    Slot& s = slots_[slot];
    if (result == -EAGAIN || result == -EINTR) return Prepare(slot);
    const uint64_t offset = s.read.request.offset + s.done_bytes;
    if (result < 0) return Finish(slot, storage_internal::ReadError(path(), offset, -result), out);
    if (result == 0) return Finish(slot, storage_internal::UnexpectedEof(path(), offset), out);
    s.done_bytes += static_cast<uint64_t>(result);
    if (s.done_bytes < s.read.request.bytes) return Prepare(slot);
    return Finish(slot, Status::Ok(), out);
  }

  Status Finish(uint32_t slot, Status status, std::vector<ReadCompletion>* out) {
    Complete(slots_[slot].read, std::move(status), slots_[slot].done_bytes, out);
    free_slots_.push_back(slot);
    return Status::Ok();
  }

  RingPtr ring_;  // destroyed (io_uring_queue_exit) before FileStorage closes the file
  RegisteredBuffers registered_;
  size_t registered_count_ = 0;  // buffers the kernel holds
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

// A ring of `queue_depth` entries (the kernel sizes the completion queue at
// twice that, so it cannot overflow) with the option's registered buffers, or
// a clear error (Unsupported where the kernel refuses io_uring).
Result<RingPtr> MakeRing(const StorageOptions& options) {
  auto fresh = std::make_unique<io_uring>();
  const int rc = io_uring_queue_init(options.queue_depth, fresh.get(), 0);
  if (rc == -ENOSYS || rc == -EPERM || rc == -EACCES) {
    return Status::Unsupported(std::string("io_uring is unavailable here (io_uring_queue_init: ") + std::strerror(-rc) +
                               "); use the pread backend");
  }
  if (rc < 0) return RingError("io_uring_queue_init", rc);
  RingPtr ring(fresh.release());
  COLIBRI_RETURN_IF_ERROR(RegisterWithKernel(ring.get(), RegionsOf(options)));
  return ring;
}

}  // namespace

Result<std::unique_ptr<StorageBackend>> OpenUringStorage(const std::string& path, const StorageOptions& options) {
  COLIBRI_ASSIGN_OR_RETURN(storage_internal::StorageFile file, storage_internal::OpenStorageFile(path, options));
  COLIBRI_ASSIGN_OR_RETURN(RingPtr ring, MakeRing(options));
  return std::unique_ptr<StorageBackend>(new UringStorage(std::move(file), options, std::move(ring)));
}

}  // namespace colibri::engine
