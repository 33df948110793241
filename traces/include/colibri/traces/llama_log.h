// What a llama.cpp run's log says about its model: the lines llama.cpp prints
// while loading (print_info, load_tensors, llama_kv_cache), read for the
// facts a routing trace's header can carry beyond the routing itself: the
// attention shape of every layer, the element type of the KV cache, the
// hidden size and the bytes of the model file it maps. Importers of captures
// made by llama.cpp-based engines use it (bmoe-csv with --llama-log).
//
// Lines read (each "key = value", a value a number or a per-layer list
// "[8, 8, 2, ...]"):
//   print_info: n_layer, n_embd, n_head, n_head_kv, n_embd_head_k,
//     n_embd_head_v, n_embd_head_k_swa / n_embd_head_v_swa (sliding-window
//     layers' head sizes; default the full ones), n_swa (the window), and,
//     when printed, n_embd_k_gqa / n_embd_v_gqa (checked against kv heads x
//     head size per layer);
//   "load_tensors: layer N assigned to device ..., is_swa = 0|1" (which
//     layers use the window; absent: none);
//   "llama_kv_cache: size = ... K (f16): ..., V (f16): ..." (the KV element
//     type: f32, f16 or bf16; other types are refused: their bytes per
//     element are not whole);
//   "load_tensors: ... CPU_Mapped model buffer size = X MiB" (summed over
//     lines; optional).
// Other lines are ignored. Errors (InvalidArgument, naming the file and, for a
// bad value, its line): a required key missing, a list whose length is not
// n_layer, a per-layer size that contradicts n_embd_k_gqa, an unsupported KV
// type, two KV types. Thread-safety: a free function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

struct LlamaLogFacts {
  uint32_t layers = 0;                    // n_layer
  uint32_t hidden_size = 0;               // n_embd
  std::vector<AttentionShape> attention;  // one per layer, in layer order
  uint32_t kv_element_bytes = 0;          // 2 for f16
  uint64_t mapped_bytes = 0;              // the model file's mapped bytes (MiB with 2 decimals, rounded); 0 when absent
};

Result<LlamaLogFacts> ReadLlamaLog(const std::string& path);

}  // namespace colibri::traces
