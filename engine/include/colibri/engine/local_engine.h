// LocalEngine: the engine assembled on this machine's real hardware: an
// opened model, the RealEventLoop, UringStorage (PreadStorage when asked, or
// when the kernel refuses io_uring), a transfer and a compute backend
// (CpuTransfer and CpuCompute unless the options give factories, e.g. the
// CUDA backends) and the MoeEngine over them. Used by `colibri run` and the
// C API.
//
// Ownership: owns every part; destroy it as a whole. Thread-safety: as
// MoeEngine (one thread at a time). Errors: opening the model, the storage
// or the compute backend, and the engine's own validation, as Status.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "colibri/engine/block_check.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/model.h"
#include "colibri/engine/moe_engine.h"

namespace colibri::engine {

struct LocalEngineOptions {
  std::string model_dir;
  ModelVerify verify = ModelVerify::kAuto;  // OpenModel's checksums (model.h)
  std::string storage = "auto";  // auto (io_uring, pread if unavailable), uring, pread
  uint32_t queue_depth = 32;
  bool direct_io = true;
  uint32_t threads = 1;  // CpuCompute's, when make_compute is empty
  EngineOptions engine;
  // The transfer (on the engine's clock) and compute backends; empty: CpuTransfer, CpuCompute.
  std::function<Result<std::unique_ptr<TransferBackend>>(const Clock*)> make_transfer;
  std::function<Result<std::unique_ptr<ComputeBackend>>()> make_compute;
  // Optional: wrap each backend once made (e.g. fault-injecting wrappers over
  // backend_wrappers.h), on the engine's loop; the storage's wrapper goes
  // under the block check.
  std::function<Result<std::unique_ptr<StorageBackend>>(std::unique_ptr<StorageBackend>, EventLoop* loop)> wrap_storage;
  std::function<Result<std::unique_ptr<TransferBackend>>(std::unique_ptr<TransferBackend>, EventLoop* loop)> wrap_transfer;
  std::function<Result<std::unique_ptr<ComputeBackend>>(std::unique_ptr<ComputeBackend>, EventLoop* loop)> wrap_compute;
  // When the block check runs (block_check.h); kAlways under injected corruption.
  BlockCheckMode block_check = BlockCheckMode::kUnlessVerifiedAtOpen;
  // Optional: the event loop (empty: a RealEventLoop) and the storage over
  // the model's experts file on it (empty: `storage` by name, OpenStorage).
  // With both, a modelled device (e.g. sim's SimStorage on a SimEventLoop)
  // delivers the real bytes on a modelled clock: deterministic runs.
  std::function<std::unique_ptr<EventLoop>()> make_loop;
  std::function<Result<std::unique_ptr<StorageBackend>>(const std::string& experts_path, EventLoop* loop)> make_storage;
};

struct LocalEngine {
  static Result<std::unique_ptr<LocalEngine>> Open(const LocalEngineOptions& options);

  Model model;
  std::unique_ptr<EventLoop> loop;  // outlives the backends (declared before them)
  std::unique_ptr<StorageBackend> storage;
  std::unique_ptr<TransferBackend> transfer;
  std::unique_ptr<ComputeBackend> compute;
  std::unique_ptr<MoeEngine> moe;
  std::string warning;  // e.g. io_uring unavailable, O_DIRECT unsupported; empty when none
};

}  // namespace colibri::engine
