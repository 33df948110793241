#include "colibri/engine/local_engine.h"

#include "colibri/engine/block_check.h"

namespace colibri::engine {
namespace {

Result<std::unique_ptr<StorageBackend>> OpenEngineStorage(const LocalEngineOptions& o, const std::string& path,
                                                          const Clock* clock, std::string* warning) {
  StorageOptions options;
  options.clock = clock;
  options.queue_depth = o.queue_depth;
  options.direct_io = o.direct_io;
  return OpenStorage(o.storage, path, options, warning);
}

}  // namespace

Result<std::unique_ptr<LocalEngine>> LocalEngine::Open(const LocalEngineOptions& o) {
  auto e = std::make_unique<LocalEngine>();
  COLIBRI_ASSIGN_OR_RETURN(e->model, OpenModel(o.model_dir, o.verify));
  e->loop = o.make_loop ? o.make_loop() : std::make_unique<RealEventLoop>();
  if (e->loop == nullptr) return Status::InvalidArgument("local engine: make_loop gave no event loop");
  std::unique_ptr<StorageBackend> storage;
  if (o.make_storage) {
    COLIBRI_ASSIGN_OR_RETURN(storage, o.make_storage(e->model.experts_path(), e->loop.get()));
  } else {
    COLIBRI_ASSIGN_OR_RETURN(storage, OpenEngineStorage(o, e->model.experts_path(), e->loop.get(), &e->warning));
  }
  if (o.wrap_storage) {
    COLIBRI_ASSIGN_OR_RETURN(storage, o.wrap_storage(std::move(storage), e->loop.get()));
  }
  e->storage = CheckBlocksOnRead(e->model, std::move(storage), o.block_check);  // e->model outlives it (declared first)
  if (!e->storage->warning().empty()) e->warning += (e->warning.empty() ? "" : "; ") + e->storage->warning();
  if (!e->model.experts_verified() && !e->model.has_block_digests() && o.verify == ModelVerify::kAuto) {
    e->warning += (e->warning.empty() ? "" : "; ") + e->model.config().experts_file.name + " (" +
                  std::to_string(e->model.config().experts_file.bytes) +
                  " bytes) is above 1 GiB and this format 1 model has no block digests: not checked (verify "
                  "mode full hashes it at open)";
  }
  if (o.make_transfer) {
    COLIBRI_ASSIGN_OR_RETURN(e->transfer, o.make_transfer(e->loop.get()));
  } else {
    e->transfer = MakeCpuTransfer(e->loop.get());
  }
  if (o.make_compute) {
    COLIBRI_ASSIGN_OR_RETURN(e->compute, o.make_compute());
  } else {
    COLIBRI_ASSIGN_OR_RETURN(e->compute, CpuCompute::Create(CpuComputeOptions{o.threads, std::nullopt}));
  }
  if (o.wrap_transfer) {
    COLIBRI_ASSIGN_OR_RETURN(e->transfer, o.wrap_transfer(std::move(e->transfer), e->loop.get()));
  }
  if (o.wrap_compute) {
    COLIBRI_ASSIGN_OR_RETURN(e->compute, o.wrap_compute(std::move(e->compute), e->loop.get()));
  }
  const EngineBackends backends{e->loop.get(), e->storage.get(), e->transfer.get(), e->compute.get(), nullptr};
  COLIBRI_ASSIGN_OR_RETURN(e->moe, MoeEngine::Create(EngineModelOf(e->model), o.engine, backends));
  const Status registered = e->storage->RegisterBuffers(e->moe->read_buffer_regions());
  if (!registered.ok()) {
    e->warning += (e->warning.empty() ? "" : "; ") + registered.message() + "; reading into unregistered buffers";
  }
  return e;
}

}  // namespace colibri::engine
