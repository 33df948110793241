#include "colibri/traces/llama_log.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>

#include "line_reader.h"
#include "colibri/bounded_echo.h"

namespace colibri::traces {
namespace {

constexpr uint32_t kMaxLayers = 1 << 16;
constexpr uint32_t kMaxDimension = 1 << 24;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

bool ParseUint(std::string_view text, uint64_t* value) {
  text = Trim(text);
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

// A print_info value: one integer, or a per-layer list "[a, b, ...]".
struct Value {
  std::vector<uint64_t> items;
  bool list = false;
  uint64_t line = 0;
};

bool ParseValue(std::string_view text, Value* value) {
  text = Trim(text);
  if (text.empty()) return false;
  if (text.front() != '[') {
    uint64_t v = 0;
    if (!ParseUint(text, &v)) return false;
    value->items = {v};
    return true;
  }
  if (text.back() != ']') return false;
  text = text.substr(1, text.size() - 2);
  value->list = true;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    uint64_t v = 0;
    if (!ParseUint(text.substr(0, comma), &v)) return false;
    value->items.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return !value->items.empty();
}

// Bytes of one element of a KV cache type, or 0 when not a whole number.
uint32_t KvTypeBytes(std::string_view type) {
  if (type == "f32") return 4;
  if (type == "f16" || type == "bf16") return 2;
  return 0;
}

// The type inside "<tag> (type):" in a llama_kv_cache size line, or empty.
std::string_view KvTypeAfter(std::string_view line, std::string_view tag) {
  const size_t at = line.find(tag);
  if (at == std::string_view::npos) return {};
  const size_t open = at + tag.size();
  const size_t close = line.find(')', open);
  return close == std::string_view::npos ? std::string_view() : line.substr(open, close - open);
}

class LogParser {
 public:
  explicit LogParser(const LineReader& in) : in_(in) {}

  Status Line(std::string_view line) {
    if (line.starts_with("print_info: ")) return PrintInfo(line.substr(12));
    if (line.starts_with("load_tensors:")) return LoadTensors(line);
    if (line.starts_with("llama_kv_cache: size =")) return KvSize(line);
    return Status::Ok();
  }

  Result<LlamaLogFacts> Finish() const {
    LlamaLogFacts facts;
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t layers, Scalar("n_layer", 1, kMaxLayers));
    facts.layers = static_cast<uint32_t>(layers);
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t hidden, Scalar("n_embd", 1, kMaxDimension));
    facts.hidden_size = static_cast<uint32_t>(hidden);
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> q_heads, PerLayer("n_head", facts.layers, true));
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> kv_heads, PerLayer("n_head_kv", facts.layers, true));
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> key_dim, PerLayer("n_embd_head_k", facts.layers, true));
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> value_dim, PerLayer("n_embd_head_v", facts.layers, true));
    const bool has_swa = values_.count("n_embd_head_k_swa") > 0;
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> key_dim_swa,
                             PerLayer(has_swa ? "n_embd_head_k_swa" : "n_embd_head_k", facts.layers, true));
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> value_dim_swa,
                             PerLayer(has_swa ? "n_embd_head_v_swa" : "n_embd_head_v", facts.layers, true));
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> k_gqa, PerLayer("n_embd_k_gqa", facts.layers, false));
    COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> v_gqa, PerLayer("n_embd_v_gqa", facts.layers, false));
    uint64_t window = 0;
    if (values_.count("n_swa")) {
      COLIBRI_ASSIGN_OR_RETURN(window, Scalar("n_swa", 0, UINT32_MAX));
    }
    for (uint32_t layer = 0; layer < facts.layers; ++layer) {
      auto swa = is_swa_.find(layer);
      const bool sliding = swa != is_swa_.end() && swa->second && window > 0;
      AttentionShape a;
      a.q_heads = static_cast<uint32_t>(q_heads[layer]);
      a.kv_heads = static_cast<uint32_t>(kv_heads[layer]);
      a.key_dim = static_cast<uint32_t>(sliding ? key_dim_swa[layer] : key_dim[layer]);
      a.value_dim = static_cast<uint32_t>(sliding ? value_dim_swa[layer] : value_dim[layer]);
      a.window = sliding ? static_cast<uint32_t>(window) : 0;
      if (a.q_heads == 0 || a.kv_heads == 0 || a.key_dim == 0 || a.value_dim == 0) {
        return Status::InvalidArgument(in_.path() + ": layer " + std::to_string(layer) +
                                       ": heads and head sizes must be > 0");
      }
      const std::pair<const std::vector<uint64_t>*, std::pair<const char*, uint64_t>> checks[] = {
          {&k_gqa, {"n_embd_k_gqa", uint64_t{a.kv_heads} * a.key_dim}},
          {&v_gqa, {"n_embd_v_gqa", uint64_t{a.kv_heads} * a.value_dim}}};
      for (const auto& [printed, expected] : checks) {
        if (!printed->empty() && (*printed)[layer] != expected.second) {
          return Status::InvalidArgument(in_.path() + ": layer " + std::to_string(layer) + ": " + expected.first + " " +
                                         std::to_string((*printed)[layer]) + " is not n_head_kv x head size (" +
                                         std::to_string(expected.second) + ")");
        }
      }
      facts.attention.push_back(a);
    }
    if (kv_element_bytes_ == 0) {
      return Status::InvalidArgument(in_.path() + ": no 'llama_kv_cache: size = ... K (type): ...' line");
    }
    facts.kv_element_bytes = kv_element_bytes_;
    facts.mapped_bytes = static_cast<uint64_t>(std::llround(mapped_mib_ * 1048576.0));
    return facts;
  }

 private:
  Status PrintInfo(std::string_view rest) {
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return Status::Ok();
    const std::string key(Trim(rest.substr(0, eq)));
    static const char* kKeys[] = {"n_layer",       "n_embd",        "n_head",           "n_head_kv",
                                  "n_embd_head_k", "n_embd_head_v", "n_embd_head_k_swa", "n_embd_head_v_swa",
                                  "n_swa",         "n_embd_k_gqa",  "n_embd_v_gqa"};
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) return Status::Ok();
    Value value;
    value.line = in_.line_number();
    if (!ParseValue(rest.substr(eq + 1), &value)) {
      return in_.Error(key + ": expected a non-negative integer or a list [a, b, ...] of them");
    }
    values_[key] = std::move(value);
    return Status::Ok();
  }

  Status LoadTensors(std::string_view line) {
    constexpr std::string_view kMapped = "_Mapped model buffer size =";
    if (const size_t at = line.find(kMapped); at != std::string_view::npos) {
      std::string_view rest = Trim(line.substr(at + kMapped.size()));
      const size_t space = rest.find(' ');
      const std::string number(rest.substr(0, space));
      char* end = nullptr;
      const double mib = std::strtod(number.c_str(), &end);
      if (number.empty() || end != number.c_str() + number.size() || !(mib >= 0) || Trim(rest.substr(space + 1)) != "MiB") {
        return in_.Error("expected 'model buffer size = <number> MiB'");
      }
      mapped_mib_ += mib;
      return Status::Ok();
    }
    constexpr std::string_view kLayer = "load_tensors: layer ";
    constexpr std::string_view kSwa = "is_swa = ";
    const size_t swa = line.find(kSwa);
    if (!line.starts_with(kLayer) || swa == std::string_view::npos) return Status::Ok();
    uint64_t layer = 0, flag = 0;
    const std::string_view id = line.substr(kLayer.size(), line.find(' ', line.find_first_not_of(' ', kLayer.size())) -
                                                                kLayer.size());
    if (!ParseUint(id, &layer) || !ParseUint(line.substr(swa + kSwa.size()), &flag) || flag > 1) {
      return in_.Error("expected 'load_tensors: layer N assigned to device ..., is_swa = 0|1'");
    }
    is_swa_[layer] = flag == 1;
    return Status::Ok();
  }

  Status KvSize(std::string_view line) {
    for (std::string_view tag : {std::string_view("K ("), std::string_view("V (")}) {
      const std::string_view type = KvTypeAfter(line, tag);
      if (type.empty()) return in_.Error("expected 'K (type)' and 'V (type)' in the KV cache size line");
      const uint32_t bytes = KvTypeBytes(type);
      if (bytes == 0) {
        return in_.Error("KV cache type '" + BoundedEcho(type) +
                         "' is not supported (f32, f16 or bf16: whole bytes per element)");
      }
      if (kv_element_bytes_ != 0 && kv_element_bytes_ != bytes) {
        return in_.Error("KV cache types of different sizes (" + std::to_string(kv_element_bytes_) + " and " +
                         std::to_string(bytes) + " bytes per element)");
      }
      kv_element_bytes_ = bytes;
    }
    return Status::Ok();
  }

  Result<uint64_t> Scalar(const std::string& key, uint64_t min, uint64_t max) const {
    auto it = values_.find(key);
    if (it == values_.end()) return Status::InvalidArgument(in_.path() + ": no 'print_info: " + key + " = ...' line");
    const Value& v = it->second;
    if (v.list || v.items[0] < min || v.items[0] > max) {
      return Status::InvalidArgument(in_.path() + ":" + std::to_string(v.line) + ": " + key + ": expected an integer from " +
                                     std::to_string(min) + " to " + std::to_string(max));
    }
    return v.items[0];
  }

  // One value per layer: a list of `layers` values, or one value for all;
  // empty when absent and not required.
  Result<std::vector<uint64_t>> PerLayer(const std::string& key, uint32_t layers, bool required) const {
    auto it = values_.find(key);
    if (it == values_.end()) {
      if (required) return Status::InvalidArgument(in_.path() + ": no 'print_info: " + key + " = ...' line");
      return std::vector<uint64_t>();
    }
    const Value& v = it->second;
    if (v.list && v.items.size() != layers) {
      return Status::InvalidArgument(in_.path() + ":" + std::to_string(v.line) + ": " + key + ": " +
                                     std::to_string(v.items.size()) + " values, expected one per layer (" +
                                     std::to_string(layers) + ")");
    }
    for (uint64_t item : v.items) {
      if (item > kMaxDimension) {
        return Status::InvalidArgument(in_.path() + ":" + std::to_string(v.line) + ": " + key + ": " +
                                       std::to_string(item) + " is out of range");
      }
    }
    return v.list ? v.items : std::vector<uint64_t>(layers, v.items[0]);
  }

  const LineReader& in_;
  std::map<std::string, Value> values_;
  std::map<uint64_t, bool> is_swa_;
  uint32_t kv_element_bytes_ = 0;
  double mapped_mib_ = 0;
};

}  // namespace

Result<LlamaLogFacts> ReadLlamaLog(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  LogParser parser(*in);
  std::string_view line;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(const bool more, in->Next(&line));
    if (!more) break;
    COLIBRI_RETURN_IF_ERROR(parser.Line(line));
  }
  return parser.Finish();
}

}  // namespace colibri::traces
