// CpuTransfer: the L1 pool is host memory standing in for device memory, and
// a host-to-device copy is a memcpy done at Copy() time.
#include <cstring>

#include "colibri/engine/transfer.h"

namespace colibri::engine {
namespace {

class CpuTransfer final : public TransferBackend {
 public:
  explicit CpuTransfer(const Clock* clock) : clock_(clock) {}
  const TransferCaps& caps() const override { return caps_; }
  const TransferCounters& counters() const override { return counters_; }

  Result<std::unique_ptr<SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    return SlabPool::Create(budget_bytes, slot_bytes);
  }

  // Errors: InvalidArgument for a null pointer or 0 bytes (nothing is queued), as SimTransfer.
  Status Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) override {
    if (device_dst == nullptr || host_src == nullptr) return Status::InvalidArgument("cpu transfer: null copy pointer");
    if (bytes == 0) return Status::InvalidArgument("cpu transfer: copy of 0 bytes");
    const TimeNs start = clock_->Now();
    std::memcpy(device_dst, host_src, bytes);
    done_.push_back(TransferCompletion{tag, Status::Ok(), bytes, start, clock_->Now()});
    ++counters_.copies;
    counters_.copied_bytes += bytes;
    return Status::Ok();
  }

  Status Poll(bool, std::vector<TransferCompletion>* out) override {
    for (TransferCompletion& c : done_) out->push_back(std::move(c));
    done_.clear();
    return Status::Ok();
  }

  size_t outstanding() const override { return done_.size(); }

 private:
  const Clock* clock_;
  TransferCaps caps_{"cpu", true};
  TransferCounters counters_;
  std::vector<TransferCompletion> done_;
};

}  // namespace

std::unique_ptr<TransferBackend> MakeCpuTransfer(const Clock* clock) { return std::make_unique<CpuTransfer>(clock); }

}  // namespace colibri::engine
