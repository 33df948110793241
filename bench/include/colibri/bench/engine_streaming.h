// The engine streaming a model's experts in the all-miss configuration: L1 =
// L2 = 0, one staging slot per queue slot, so every expert of every layer
// batch is read from experts.bin into a staging slot and computed on the CPU
// (`colibri bench io --model`). Layer batches of random routing (each token's
// top_k distinct experts, weights 1/k) cycle through the MoE layers until the
// duration has passed. Also: a model's expert blocks as a storage benchmark
// reads them.
//
// Ownership: each call opens the model and an engine (engine::LocalEngine)
// and closes them before returning. Thread-safety: none needed; the engine
// runs its compute threads inside the call. Errors: those of OpenModel and
// LocalEngine::Open (a missing or corrupt model: kNotFound, kCorruption,
// kInvalidArgument; io_uring unavailable: kUnsupported), then the engine's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/status.h"

namespace colibri::bench {

// The experts file of a Colibri model, its expert block size and every
// expert's offset (layer-major).
struct ModelBlocks {
  std::string path;
  uint64_t block_bytes = 0;
  std::vector<uint64_t> offsets;
};
Result<ModelBlocks> ModelBlocksOf(const std::string& model_dir);

struct EngineStreamingOptions {
  std::string model_dir;
  std::string storage = "uring";  // "uring" or "pread"
  uint32_t queue_depth = 32;      // reads in flight, and staging slots
  uint32_t threads = 2;           // CPU compute threads
  uint32_t batch_tokens = 64;     // tokens per layer batch
  // With uring: whether the staging slots are io_uring registered buffers (the
  // engine registers them by default; false unregisters them).
  bool register_buffers = true;
  uint64_t duration_ns = 0;
  uint64_t seed = 1;              // of the routing (std::mt19937_64)
};

struct EngineStreamingRun {
  uint64_t read_bytes = 0;
  uint64_t reads = 0;
  uint64_t registered_reads = 0;   // of them, into registered buffers
  uint64_t layer_batches = 0;
  uint64_t distinct_experts = 0;   // summed over the layer batches
  engine::TimeNs compute_ns = 0;   // the layer batches' compute time
  double elapsed_s = 0;
  double read_bytes_per_s() const { return elapsed_s > 0 ? static_cast<double>(read_bytes) / elapsed_s : 0; }
};

Result<EngineStreamingRun> MeasureEngineStreaming(const EngineStreamingOptions& options);

}  // namespace colibri::bench
