// Importer for `expert-selection-json`: the per-request JSON files of the
// public MoE_expert_selection_trace dataset (SGLang captures). A file is a
// list of forward passes: element 0 is the prefill, elements 1..N are decode
// steps; each maps a layer id (a string) to null (a dense layer) or to one
// entry per token, each the list of chosen expert ids in rank order.
//
// Mapping: one request per file, requests numbered in file-name order (the
// inputs are sorted by file name, then path). Every element that routes
// tokens is one forward pass with its own pass id (requests are not batched
// together); element 0 is the prefill pass. Positions start at 0 with the
// first prefill token and continue through the decode steps. The MoE layers
// are the non-null layers of the first file's prefill; every file must show
// the same layers and top-k, and all MoE layers of one pass must route the
// same number of tokens. Shape from --model-config or --experts/--expert-bytes.
// Stores expert ids only: the source has no weights or token ids.
#include <algorithm>
#include <map>
#include <optional>

#include "colibri/traces/importers.h"
#include "import_util.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;

Result<uint32_t> LayerKey(const std::string& key) {
  auto layer = ParseUint32(key);
  if (!layer.ok()) return layer.status().WithPrefix("layer key");
  return layer;
}

std::string ElementWhere(const std::string& path, size_t step) { return path + ": [" + std::to_string(step) + "]"; }

// The file's model from its prefill: the non-null layers, and the ids per
// token of the first token of the lowest such layer.
Result<FileModel> PrefillModel(const Json& prefill, const std::string& path) {
  const std::string where = ElementWhere(path, 0);
  if (!prefill.is_object()) {
    return Status::InvalidArgument(where + ": expected the prefill pass, an object mapping layer id to tokens");
  }
  std::map<uint32_t, const Json*> layers;
  for (const auto& [key, value] : prefill.items()) {
    auto layer = LayerKey(key);
    if (!layer.ok()) return layer.status().WithPrefix(where);
    if (value.is_null()) continue;
    if (!layers.emplace(layer.value(), &value).second) {
      return Status::InvalidArgument(where + ": layer " + std::to_string(layer.value()) + " appears twice");
    }
  }
  if (layers.empty()) return Status::InvalidArgument(where + ": no MoE layer (every layer is null)");
  FileModel model;
  for (const auto& [layer, tokens] : layers) {
    model.layer_ids.push_back(layer);
    if (model.top_k == 0 && tokens->is_array() && !tokens->empty() && (*tokens)[0].is_array()) {
      model.top_k = static_cast<uint32_t>((*tokens)[0].size());
    }
  }
  if (model.top_k == 0) return Status::InvalidArgument(where + ": no token with expert ids in the prefill");
  return model;
}

// Adds one layer's tokens of one pass; `pass_tokens` is the token count the
// pass's first layer set (all layers must match it).
Status AddLayer(const ImportOptions& options, PerFileImport* import, const std::string& where, const std::string& key,
                const Json& tokens, uint64_t first_position, std::optional<size_t>* pass_tokens, ImportReport* report) {
  auto reject = [&](const Status& error) {
    ++report->rows_read;
    return RejectOrSkip(options, report, error.WithPrefix(where));
  };
  auto layer = LayerKey(key);
  if (!layer.ok()) return reject(layer.status());
  const bool moe = import->data_model().HasLayer(layer.value());
  if (tokens.is_null() && !moe) return Status::Ok();  // a dense layer
  if (!moe) {
    return reject(Status::InvalidArgument("layer " + std::to_string(layer.value()) +
                                          " is not a MoE layer of the trace (those are the non-null layers of the "
                                          "first file's prefill)"));
  }
  if (!tokens.is_array()) {
    return reject(Status::InvalidArgument("expected one entry per token, found " + JsonSnippet(tokens)));
  }
  if (pass_tokens->has_value() && tokens.size() != **pass_tokens) {
    return reject(Status::InvalidArgument(std::to_string(tokens.size()) +
                                          " tokens, but other layers of this pass route " +
                                          std::to_string(**pass_tokens)));
  }
  *pass_tokens = tokens.size();
  const size_t layer_index = static_cast<size_t>(import->shape().LayerIndex(layer.value()));
  for (size_t t = 0; t < tokens.size(); ++t) {
    ++report->rows_read;
    const Status added = import->pass().AddToken(layer_index, first_position + t, tokens[t]);
    if (!added.ok()) {
      COLIBRI_RETURN_IF_ERROR(RejectOrSkip(options, report, added.WithPrefix(where + "[" + std::to_string(t) + "]")));
    }
  }
  return Status::Ok();
}

// Emits every forward pass of one file (one request).
Status EmitRequest(const ImportOptions& options, const Json& passes, const std::string& path, uint64_t request_id,
                   PerFileImport* import, ImportReport* report) {
  uint64_t position = 0;
  for (size_t step = 0; step < passes.size(); ++step) {
    const std::string where = ElementWhere(path, step);
    const Json& element = passes[step];
    if (!element.is_object()) {
      ++report->rows_read;
      COLIBRI_RETURN_IF_ERROR(RejectOrSkip(
          options, report, Status::InvalidArgument(where + ": expected an object mapping layer id to tokens")));
      continue;
    }
    import->pass().Start(request_id, /*prefill=*/step == 0);
    std::optional<size_t> pass_tokens;
    for (const auto& [key, tokens] : element.items()) {
      COLIBRI_RETURN_IF_ERROR(
          AddLayer(options, import, where + "[\"" + key + "\"]", key, tokens, position, &pass_tokens, report));
    }
    position += pass_tokens.value_or(0);
    COLIBRI_RETURN_IF_ERROR(import->pass().Finish());
  }
  return Status::Ok();
}

}  // namespace

Status ImportExpertSelectionJson(const ImportOptions& options, RecordSink* sink, ImportReport* report) {
  std::vector<std::string> files = options.inputs;
  std::stable_sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    return std::make_pair(BaseName(a), a) < std::make_pair(BaseName(b), b);
  });
  COLIBRI_ASSIGN_OR_RETURN(Provenance provenance, SourceProvenance(options, files));
  provenance.source_engine = "sglang";
  provenance.notes =
      "MoE_expert_selection_trace layout: one request per file (sorted by file name); element 0 = "
      "prefill pass, each later element = one decode pass";
  PerFileImport import(options, sink, std::move(provenance));
  for (size_t request = 0; request < files.size(); ++request) {
    const std::string& path = files[request];
    COLIBRI_ASSIGN_OR_RETURN(Json passes, ReadJsonFile(path));
    if (!passes.is_array() || passes.empty()) {
      return Status::InvalidArgument(path + ": expected a non-empty list of forward passes (element 0 = prefill)");
    }
    COLIBRI_ASSIGN_OR_RETURN(FileModel model, PrefillModel(passes[0], path));
    COLIBRI_RETURN_IF_ERROR(import.AcceptFile(path, model));
    COLIBRI_RETURN_IF_ERROR(EmitRequest(options, passes, path, request, &import, report));
  }
  return Status::Ok();
}

}  // namespace colibri::traces
