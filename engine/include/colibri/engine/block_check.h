// CheckBlocksOnRead: a StorageBackend decorator that checks every expert block
// it reads against the model's block digests (experts.xxh3, model format 2),
// so a model too large to hash at open is still never computed on with a
// changed byte. A read of exactly one whole block whose bytes hash to another
// digest completes with kCorruption naming experts.bin, the block (layer
// index, source layer, expert, byte offset) and both digests; other reads
// (not one whole block) pass through unchecked. The check runs in Poll(), on
// the engine thread, before the completion is returned (XXH3: several GB/s
// per core; docs/MODEL_FORMAT.md gives the measured cost).
//
// Ownership: owns the wrapped backend; borrows the Model, which must outlive it.
// Thread-safety: as StorageBackend (one thread submits and polls).
// Errors: those of the wrapped backend, plus kCorruption completions (counted
// as read_errors, not reads).
#pragma once

#include <memory>

#include "colibri/engine/model.h"
#include "colibri/engine/storage.h"

namespace colibri::engine {

enum class BlockCheckMode {
  kUnlessVerifiedAtOpen,  // model.check_blocks_on_read(): not hashed whole at open, and not --verify none
  kAlways,                // whenever the model has block digests (e.g. under injected corruption)
};

// Returns `storage` wrapped when `mode` asks for the check, the model has
// block digests and the backend delivers data; otherwise `storage` unchanged.
std::unique_ptr<StorageBackend> CheckBlocksOnRead(const Model& model, std::unique_ptr<StorageBackend> storage,
                                                  BlockCheckMode mode = BlockCheckMode::kUnlessVerifiedAtOpen);

}  // namespace colibri::engine
