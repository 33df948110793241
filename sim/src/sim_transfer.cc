#include "colibri/sim/sim_transfer.h"

#include <algorithm>

#include "model_time.h"

namespace colibri::sim {
namespace {

bool NoLink(const PcieProfile& profile) { return profile.generation == 0; }

// No link and no measured host copy rate: copies are free.
bool FreeCopies(const PcieProfile& profile) { return NoLink(profile) && profile.pinned_bytes_per_s == 0; }

Status CheckProfile(const PcieProfile& p, bool pinned) {
  if (FreeCopies(p)) return Status::Ok();
  if (NoLink(p)) pinned = true;  // a host memcpy: one rate
  const std::string name = "pcie profile '" + p.id + "'";
  if (p.copy_engines == 0) return Status::InvalidArgument(name + ": copy_engines must be >= 1");
  if (p.per_copy_ns < 0) return Status::InvalidArgument(name + ": per_copy_ns must be >= 0");
  if (pinned && p.pinned_bytes_per_s == 0) return Status::InvalidArgument(name + ": pinned_bytes_per_s must be > 0");
  if (!pinned && p.pageable_bytes_per_s == 0) {
    return Status::InvalidArgument(name + ": pageable_bytes_per_s must be > 0");
  }
  return Status::Ok();
}

}  // namespace

SimTransfer::SimTransfer(const PcieProfile& profile, const SimTransferOptions& options)
    : profile_(profile), options_(options), engine_free_ns_(std::max<uint32_t>(profile.copy_engines, 1), 0) {
  caps_.name = "sim";
  caps_.device_is_host = NoLink(profile);
  caps_.delivers_data = false;
}

Result<std::unique_ptr<engine::SlabPool>> SimTransfer::CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) {
  return engine::SlabPool::CreateReserved(budget_bytes, slot_bytes);
}

engine::TimeNs SimTransfer::CopyNs(uint64_t bytes) const {
  if (FreeCopies(profile_)) return 0;
  const uint64_t rate = options_.pinned || NoLink(profile_) ? profile_.pinned_bytes_per_s : profile_.pageable_bytes_per_s;
  return profile_.per_copy_ns + model_internal::DurationNs(bytes, rate);
}

Status SimTransfer::Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) {
  if (device_dst == nullptr || host_src == nullptr) return Status::InvalidArgument("sim transfer: null copy pointer");
  if (bytes == 0) return Status::InvalidArgument("sim transfer: copy of 0 bytes");
  const engine::TimeNs now = options_.loop->Now();
  const auto copy_engine = std::min_element(engine_free_ns_.begin(), engine_free_ns_.end());  // first of equals
  const engine::TimeNs start_ns = std::max(now, *copy_engine);  // the copy engine starts on it
  const engine::TimeNs end_ns = start_ns + CopyNs(bytes);
  *copy_engine = end_ns;
  pending_.emplace(std::make_pair(end_ns, next_sequence_++), engine::TransferCompletion{tag, Status::Ok(), bytes, now, end_ns});
  if (options_.event_log != nullptr) options_.event_log->Append(start_ns, end_ns, EventKind::kCopy, tag, bytes);
  return Status::Ok();
}

Status SimTransfer::Poll(bool wait, std::vector<engine::TransferCompletion>* out) {
  if (wait && !pending_.empty()) options_.loop->WaitUntil(pending_.begin()->first.first);
  const engine::TimeNs now = options_.loop->Now();
  while (!pending_.empty() && pending_.begin()->first.first <= now) {
    ++counters_.copies;
    counters_.copied_bytes += pending_.begin()->second.bytes;
    out->push_back(std::move(pending_.begin()->second));
    pending_.erase(pending_.begin());
  }
  return Status::Ok();
}

Result<std::unique_ptr<SimTransfer>> MakeSimTransfer(const PcieProfile& profile, const SimTransferOptions& options) {
  if (options.loop == nullptr) return Status::InvalidArgument("sim transfer: SimTransferOptions::loop is required");
  COLIBRI_RETURN_IF_ERROR(CheckProfile(profile, options.pinned));
  return std::unique_ptr<SimTransfer>(new SimTransfer(profile, options));
}

}  // namespace colibri::sim
