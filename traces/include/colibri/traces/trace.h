// In-memory types of a Colibri routing trace: the header (model shape and
// provenance) and one record. See docs/TRACE_FORMAT.md for the file layout.
//
// Plain value types; no internal synchronisation. Validation functions return
// a Status naming the field and what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colibri/status.h"

namespace colibri::traces {

inline constexpr uint32_t kFormatVersion = 2;  // v2: the end marker and trailer (docs/TRACE_FORMAT.md)
inline constexpr char kMagic[8] = {'C', 'O', 'L', 'T', 'R', 'A', 'C', 'E'};

enum class Compression : uint32_t { kNone = 0, kZstd = 1 };
enum class HiddenDtype : uint32_t { kNone = 0, kFp16 = 1, kBf16 = 2, kFp32 = 3 };

// Bytes of one hidden-state element; 0 for kNone.
uint32_t HiddenDtypeBytes(HiddenDtype dtype);

// The attention of one MoE layer's transformer layer, for the cost of
// attention by context length (the KV bytes a token reads grow with the
// positions before it). Set by importers from the model's configuration.
struct AttentionShape {
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t key_dim = 0;    // per head
  uint32_t value_dim = 0;  // per head
  uint32_t window = 0;     // sliding window in positions; 0 = full causal attention

  // Bytes one cached position of this layer holds: kv_heads x (key_dim + value_dim) x element bytes.
  uint64_t KvBytesPerPosition(uint32_t kv_element_bytes) const;
  // Positions a query at `position` (0-based) attends to: position + 1, at most window.
  uint64_t AttendedPositions(uint64_t position) const;
  bool operator==(const AttentionShape&) const = default;
};

struct ModelShape {
  std::string model_name;
  std::vector<uint32_t> moe_layer_ids;  // ascending, distinct
  uint32_t experts_per_layer = 0;
  uint32_t top_k = 0;
  std::vector<uint64_t> expert_bytes;   // per MoE layer (index = position in moe_layer_ids)
  std::vector<uint64_t> dense_bytes;    // per MoE layer, or empty
  std::string dtype;
  uint32_t hidden_size = 0;
  HiddenDtype hidden_dtype = HiddenDtype::kNone;
  uint32_t total_layers = 0;
  // Optional (empty / 0 when unknown; see docs/TRACE_FORMAT.md):
  std::vector<AttentionShape> attention;  // per MoE layer, or empty
  uint32_t kv_element_bytes = 0;          // bytes of one cached K or V element (f16: 2); set with attention
  uint64_t other_dense_bytes = 0;         // non-expert weights outside dense_bytes (embeddings, LM head, ...)

  size_t num_moe_layers() const { return moe_layer_ids.size(); }
  // Index of `layer_id` in moe_layer_ids, or -1 when it is not a MoE layer.
  int LayerIndex(uint32_t layer_id) const;
  // Sum over MoE layers of top_k x expert_bytes: the token cycle T.
  uint64_t TokenCycleBytes() const;
  Status Validate() const;
};

struct SourceFile {
  std::string path;
  std::string sha256;
  uint64_t size_bytes = 0;
};

struct Provenance {
  std::string source_engine;
  std::string capture_date;
  std::string importer;
  std::string importer_version;
  std::vector<SourceFile> sources;
  std::string license;
  std::string attribution;
  std::string notes;
};

struct TraceHeader {
  ModelShape shape;
  Provenance provenance;
  Compression compression = Compression::kNone;
  uint32_t expert_id_width_bytes = 1;  // derived from experts_per_layer by the writer
};

// Width in bytes that ids below `experts` need: 1, 2 or 4.
uint32_t ExpertIdWidthBytes(uint32_t experts);

// One forward pass of one request at one MoE layer. Optional vectors are empty
// when absent. Reused by the reader: clear() keeps capacity.
struct TraceRecord {
  uint64_t request_id = 0;
  uint64_t pass_id = 0;
  uint32_t layer = 0;
  bool prefill = false;
  std::vector<uint64_t> positions;            // one per token
  std::vector<uint32_t> expert_ids;           // tokens x top_k, rank order
  std::vector<float> gate_weights;            // tokens x top_k or empty
  std::vector<float> router_logits;           // tokens x experts_per_layer or empty
  std::vector<uint32_t> token_ids;            // tokens or empty
  std::string hidden_states;                  // tokens x hidden_size x dtype bytes, or empty
  std::vector<uint32_t> physical_expert_ids;  // tokens x top_k or empty
  std::vector<uint8_t> cache_outcomes;        // tokens x top_k or empty: 0 miss, 1 hit, 2 prefetch hit
  std::optional<uint64_t> arrival_ns;
  std::optional<uint64_t> start_ns;
  std::optional<uint64_t> end_ns;

  size_t token_count() const { return positions.size(); }
  void clear();
};

// Checks a record against the shape: layer, id ranges, distinct ids per
// token, array lengths. The message names the field and the expectation.
Status ValidateRecord(const ModelShape& shape, const TraceRecord& record);

bool operator==(const TraceRecord& a, const TraceRecord& b);

}  // namespace colibri::traces
