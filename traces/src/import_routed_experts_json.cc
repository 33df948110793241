// Importer for `routed-experts-json`: the per-request routing that vLLM and
// SGLang return for routing replay, {"routed_experts": [token][layer][slot]},
// with -1 (or a list of -1s) at layers that are not MoE layers.
//
// Mapping: one request per file, in the order given. The format does not say
// which tokens were the prompt and which were generated, so all tokens of a
// file form one prefill pass (one record per MoE layer), positions 0..n-1.
// The layer id is the index in the per-token list; the MoE layers are the
// entries of the first token that are not -1, and every token and file must
// show the same ones and the same top-k. Shape from --model-config or
// --experts/--expert-bytes. Stores expert ids only.
#include <algorithm>

#include "colibri/traces/importers.h"
#include "import_util.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;

constexpr const char* kField = "routed_experts";

// -1, or a list of only -1s: the entry of a layer that is not a MoE layer.
bool IsDenseMarker(const Json& entry) {
  auto is_minus_one = [](const Json& value) {
    return value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() == -1;
  };
  if (is_minus_one(entry)) return true;
  return entry.is_array() && !entry.empty() && std::all_of(entry.begin(), entry.end(), is_minus_one);
}

std::string TokenWhere(const std::string& path, size_t token) {
  return path + ": " + kField + "[" + std::to_string(token) + "]";
}

// The file's model from its first token: layers whose entry is not -1, and the
// number of ids of the first of them.
Result<FileModel> FirstTokenModel(const Json& tokens, const std::string& path) {
  const Json& first = tokens[0];
  if (!first.is_array() || first.empty()) {
    return Status::InvalidArgument(TokenWhere(path, 0) + ": expected one entry per layer, found " + JsonSnippet(first));
  }
  FileModel model;
  for (size_t layer = 0; layer < first.size(); ++layer) {
    if (IsDenseMarker(first[layer])) continue;
    model.layer_ids.push_back(static_cast<uint32_t>(layer));
    if (model.top_k == 0 && first[layer].is_array()) model.top_k = static_cast<uint32_t>(first[layer].size());
  }
  if (model.layer_ids.empty()) {
    return Status::InvalidArgument(TokenWhere(path, 0) + ": no MoE layer (every entry is -1)");
  }
  if (model.top_k == 0) return Status::InvalidArgument(TokenWhere(path, 0) + ": no list of expert ids");
  return model;
}

// Adds one token's entries (one per layer) to the pass.
Status AddToken(const ImportOptions& options, PerFileImport* import, const Json& layers, const std::string& where,
                uint64_t position, size_t layer_count, ImportReport* report) {
  if (!layers.is_array() || layers.size() != layer_count) {
    ++report->rows_read;
    return RejectOrSkip(options, report,
                        Status::InvalidArgument(where + ": expected " + std::to_string(layer_count) +
                                                " layer entries like the first token, found " + JsonSnippet(layers)));
  }
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    const bool moe = import->data_model().HasLayer(static_cast<uint32_t>(layer));
    if (!moe && IsDenseMarker(layers[layer])) continue;
    ++report->rows_read;
    const std::string layer_where = where + "[" + std::to_string(layer) + "]";
    if (!moe) {
      COLIBRI_RETURN_IF_ERROR(
          RejectOrSkip(options, report,
                       Status::InvalidArgument(layer_where + ": layer " + std::to_string(layer) +
                                               " is not a MoE layer of the trace (-1 in the first token), found " +
                                               JsonSnippet(layers[layer]))));
      continue;
    }
    const size_t layer_index = static_cast<size_t>(import->shape().LayerIndex(static_cast<uint32_t>(layer)));
    const Status added = import->pass().AddToken(layer_index, position, layers[layer]);
    if (!added.ok()) COLIBRI_RETURN_IF_ERROR(RejectOrSkip(options, report, added.WithPrefix(layer_where)));
  }
  return Status::Ok();
}

}  // namespace

Status ImportRoutedExpertsJson(const ImportOptions& options, RecordSink* sink, ImportReport* report) {
  COLIBRI_ASSIGN_OR_RETURN(Provenance provenance, SourceProvenance(options, options.inputs));
  provenance.source_engine = "vllm/sglang";
  provenance.notes =
      "routed_experts per request: one request per file, all tokens in one prefill pass (the format "
      "does not separate prompt from generated tokens); layer id = index in the per-token list";
  PerFileImport import(options, sink, std::move(provenance));
  for (size_t request = 0; request < options.inputs.size(); ++request) {
    const std::string& path = options.inputs[request];
    COLIBRI_ASSIGN_OR_RETURN(Json json, ReadJsonFile(path));
    if (!json.is_object() || !json.contains(kField) || !json[kField].is_array() || json[kField].empty()) {
      return Status::InvalidArgument(path + ": expected an object whose field '" + kField +
                                     "' lists the tokens' per-layer expert ids");
    }
    const Json& tokens = json[kField];
    COLIBRI_ASSIGN_OR_RETURN(FileModel model, FirstTokenModel(tokens, path));
    COLIBRI_RETURN_IF_ERROR(import.AcceptFile(path, model));
    import.pass().Start(request, /*prefill=*/true);
    for (size_t token = 0; token < tokens.size(); ++token) {
      COLIBRI_RETURN_IF_ERROR(
          AddToken(options, &import, tokens[token], TokenWhere(path, token), token, tokens[0].size(), report));
    }
    COLIBRI_RETURN_IF_ERROR(import.pass().Finish());
  }
  return Status::Ok();
}

}  // namespace colibri::traces
