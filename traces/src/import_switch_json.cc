// Importer for `switch-json`: a Switch Transformers router trace
// (router-trace.v2.json, {"tokens", "layers", "topK", "expertsPerLayer",
// "selections": [token][layer][slot]}), with capture-metadata.json from the
// same directory when present.
//
// Mapping: the metadata's sparse_encoder_block_indices are the MoE layer ids;
// each prompt_spans[] entry (token_start .. token_end_exclusive, which must
// tile the tokens) is one request with one prefill (encoder) pass, positions
// counted from the span start. Without metadata: layers 0..layers-1 and all
// tokens form one request. Experts per layer is the file's expertsPerLayer
// (it must agree with --experts and a --model-config); expert bytes come from
// a Switch config.json (two matrices, wi and wo) or --expert-bytes.
// Stores expert ids only: the source has no weights, logits or token ids.
#include <filesystem>

#include "colibri/traces/importers.h"
#include "import_util.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;

constexpr const char* kMetadataFileName = "capture-metadata.json";

struct RouterTrace {
  uint32_t tokens = 0;
  uint32_t layers = 0;
  uint32_t top_k = 0;
  uint32_t experts = 0;
  std::string model;  // source.model.id@revision, when given
};

struct TokenSpan {
  uint64_t begin = 0;
  uint64_t end = 0;  // exclusive
};

// How the trace maps to layers and requests, from the metadata or defaults.
struct Capture {
  std::vector<uint32_t> layer_ids;
  std::vector<TokenSpan> requests;
  std::string notes;
};

// The string at `keys` inside nested objects, or "" when absent.
std::string StringAt(const Json& json, std::initializer_list<const char*> keys) {
  const Json* node = &json;
  for (const char* key : keys) {
    if (!node->is_object() || !node->contains(key)) return "";
    node = &(*node)[key];
  }
  return node->is_string() ? node->get<std::string>() : "";
}

Result<RouterTrace> ReadHeader(const Json& json, const std::string& path) {
  if (!json.is_object()) return Status::InvalidArgument(path + ": expected a JSON object (router-trace.v2.json)");
  RouterTrace trace;
  COLIBRI_ASSIGN_OR_RETURN(trace.tokens, JsonUintField(json, path, "tokens"));
  COLIBRI_ASSIGN_OR_RETURN(trace.layers, JsonUintField(json, path, "layers", 1 << 16));
  COLIBRI_ASSIGN_OR_RETURN(trace.top_k, JsonUintField(json, path, "topK"));
  COLIBRI_ASSIGN_OR_RETURN(trace.experts, JsonUintField(json, path, "expertsPerLayer"));
  if (trace.layers == 0 || trace.experts == 0 || trace.top_k == 0 || trace.top_k > trace.experts) {
    return Status::InvalidArgument(path + ": layers " + std::to_string(trace.layers) + ", expertsPerLayer " +
                                   std::to_string(trace.experts) + ", topK " + std::to_string(trace.top_k) +
                                   ": expected at least one layer and 1 <= topK <= expertsPerLayer");
  }
  if (!json.contains("selections") || !json["selections"].is_array()) {
    return Status::InvalidArgument(path + ": field 'selections': expected a list with one entry per token");
  }
  if (json["selections"].size() != trace.tokens) {
    return Status::InvalidArgument(path + ": field 'selections': " + std::to_string(json["selections"].size()) +
                                   " tokens, but field 'tokens' says " + std::to_string(trace.tokens));
  }
  if (trace.tokens == 0) return Status::InvalidArgument(path + ": no tokens");
  const std::string model = StringAt(json, {"source", "model", "id"});
  const std::string revision = StringAt(json, {"source", "model", "revision"});
  trace.model = revision.empty() ? model : model + "@" + revision;
  return trace;
}

Result<std::vector<uint32_t>> ReadLayerIds(const Json& metadata, const std::string& path, uint32_t layers) {
  const char* kField = "sparse_encoder_block_indices";
  const Json& ids = metadata[kField];
  if (!ids.is_array() || ids.size() != layers) {
    return Status::InvalidArgument(path + ": field '" + kField + "': expected " + std::to_string(layers) +
                                   " layer ids (one per trace layer), found " + JsonSnippet(ids));
  }
  std::vector<uint32_t> layer_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto id = JsonUint(ids[i]);
    const std::string where = path + ": field '" + kField + "[" + std::to_string(i) + "]'";
    if (!id.ok()) return id.status().WithPrefix(where);
    if (!layer_ids.empty() && id.value() <= layer_ids.back()) {
      return Status::InvalidArgument(where + ": layer ids must be ascending and distinct");
    }
    layer_ids.push_back(static_cast<uint32_t>(id.value()));
  }
  return layer_ids;
}

// prompt_spans[] must tile tokens [0, tokens) in order.
Result<std::vector<TokenSpan>> ReadPromptSpans(const Json& spans, const std::string& path, uint32_t tokens) {
  if (!spans.is_array() || spans.empty()) {
    return Status::InvalidArgument(path + ": field 'prompt_spans': expected a non-empty list");
  }
  std::vector<TokenSpan> requests;
  uint64_t next_token = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const std::string where = path + ": prompt_spans[" + std::to_string(i) + "]";
    TokenSpan span;
    COLIBRI_ASSIGN_OR_RETURN(span.begin, JsonUintField(spans[i], where, "token_start"));
    COLIBRI_ASSIGN_OR_RETURN(span.end, JsonUintField(spans[i], where, "token_end_exclusive"));
    if (span.begin != next_token || span.end <= span.begin || span.end > tokens) {
      return Status::InvalidArgument(where + ": tokens " + std::to_string(span.begin) + ".." +
                                     std::to_string(span.end) + " do not continue the spans at token " +
                                     std::to_string(next_token) + " within the trace's " + std::to_string(tokens) +
                                     " tokens");
    }
    next_token = span.end;
    requests.push_back(span);
  }
  if (next_token != tokens) {
    return Status::InvalidArgument(path + ": field 'prompt_spans': spans end at token " + std::to_string(next_token) +
                                   ", but the trace has " + std::to_string(tokens) + " tokens");
  }
  return requests;
}

std::string CaptureNotes(const Json& metadata, const RouterTrace& trace, size_t requests) {
  std::string notes;
  auto add = [&](const std::string& label, const std::string& value) {
    if (!value.empty()) notes += (notes.empty() ? "" : "; ") + label + value;
  };
  add("model ", trace.model);
  add("selection ", StringAt(metadata, {"selection_basis"}));
  add("scope ", StringAt(metadata, {"scope"}));
  add("transformers ", StringAt(metadata, {"environment", "transformers"}));
  add("torch ", StringAt(metadata, {"environment", "torch"}));
  add("weights ", StringAt(metadata, {"environment", "model_dtype"}));
  add("device ", StringAt(metadata, {"environment", "device"}));
  add("", std::to_string(requests) + " request(s), one prefill (encoder) pass each");
  return notes;
}

// Reads capture-metadata.json next to the trace (when present) and checks it
// describes this trace (trace_file, trace_sha256).
Result<Capture> ReadCapture(const std::string& metadata_path, const std::string& trace_path,
                            const std::string& trace_sha256, const RouterTrace& trace) {
  Capture capture;
  Json metadata = Json::object();
  if (!metadata_path.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(metadata, ReadJsonFile(metadata_path));
    if (!metadata.is_object()) return Status::InvalidArgument(metadata_path + ": expected a JSON object");
    const std::string described = StringAt(metadata, {"trace_file"});
    if (!described.empty() && described != BaseName(trace_path)) {
      return Status::InvalidArgument(metadata_path + ": field 'trace_file': describes '" + described + "', not '" +
                                     BaseName(trace_path) + "'");
    }
    const std::string sha256 = StringAt(metadata, {"trace_sha256"});
    if (!sha256.empty() && sha256 != trace_sha256) {
      return Status::InvalidArgument(metadata_path + ": field 'trace_sha256' does not match " + trace_path +
                                     " (metadata of another capture?)");
    }
  }
  if (metadata.contains("sparse_encoder_block_indices")) {
    COLIBRI_ASSIGN_OR_RETURN(capture.layer_ids, ReadLayerIds(metadata, metadata_path, trace.layers));
  } else {
    for (uint32_t layer = 0; layer < trace.layers; ++layer) capture.layer_ids.push_back(layer);
  }
  if (metadata.contains("prompt_spans")) {
    COLIBRI_ASSIGN_OR_RETURN(capture.requests, ReadPromptSpans(metadata["prompt_spans"], metadata_path, trace.tokens));
  } else {
    capture.requests.push_back({0, trace.tokens});
  }
  capture.notes = CaptureNotes(metadata, trace, capture.requests.size());
  return capture;
}

Result<ModelShape> SwitchShape(const ImportOptions& options, const std::string& path, const RouterTrace& trace,
                               const std::vector<uint32_t>& layer_ids) {
  if (options.experts && *options.experts != trace.experts) {
    return Status::InvalidArgument("--experts " + std::to_string(*options.experts) + " disagrees with " + path +
                                   " (expertsPerLayer " + std::to_string(trace.experts) + ")");
  }
  ImportOptions shape_options = options;
  if (!options.model_config_path) shape_options.experts = trace.experts;
  COLIBRI_ASSIGN_OR_RETURN(ModelShape shape, ShapeFromOptions(shape_options, layer_ids, trace.top_k));
  if (shape.experts_per_layer != trace.experts) {
    return Status::InvalidArgument(*options.model_config_path + ": " + std::to_string(shape.experts_per_layer) +
                                   " experts per layer, but " + path + " has expertsPerLayer " +
                                   std::to_string(trace.experts) + " (a config of another model?)");
  }
  if (shape.model_name.empty()) shape.model_name = trace.model;
  return shape;
}

// Emits one prefill pass per request, one record per MoE layer.
Status EmitRequests(const ImportOptions& options, const Json& selections, const std::string& path,
                    const ModelShape& shape, const Capture& capture, RecordSink* sink, ImportReport* report) {
  std::vector<size_t> shape_index;  // trace layer -> index in shape.moe_layer_ids
  for (uint32_t layer : capture.layer_ids) shape_index.push_back(static_cast<size_t>(shape.LayerIndex(layer)));
  PassBuilder pass(shape, sink);
  for (size_t request = 0; request < capture.requests.size(); ++request) {
    const TokenSpan span = capture.requests[request];
    pass.Start(request, /*prefill=*/true);
    for (uint64_t token = span.begin; token < span.end; ++token) {
      const Json& layers = selections[token];
      const std::string where = path + ": selections[" + std::to_string(token) + "]";
      if (!layers.is_array() || layers.size() != shape_index.size()) {
        ++report->rows_read;
        COLIBRI_RETURN_IF_ERROR(
            RejectOrSkip(options, report,
                         Status::InvalidArgument(where + ": expected " + std::to_string(shape_index.size()) +
                                                 " layer entries, found " + JsonSnippet(layers))));
        continue;
      }
      for (size_t layer = 0; layer < layers.size(); ++layer) {
        ++report->rows_read;
        const Status added = pass.AddToken(shape_index[layer], token - span.begin, layers[layer]);
        if (!added.ok()) {
          COLIBRI_RETURN_IF_ERROR(
              RejectOrSkip(options, report, added.WithPrefix(where + "[" + std::to_string(layer) + "]")));
        }
      }
    }
    COLIBRI_RETURN_IF_ERROR(pass.Finish());
  }
  return Status::Ok();
}

}  // namespace

Status ImportSwitchJson(const ImportOptions& options, RecordSink* sink, ImportReport* report) {
  if (options.inputs.size() != 1) {
    return Status::InvalidArgument("switch-json takes one router-trace file, got " +
                                   std::to_string(options.inputs.size()));
  }
  const std::string& path = options.inputs[0];
  COLIBRI_ASSIGN_OR_RETURN(Json json, ReadJsonFile(path));
  COLIBRI_ASSIGN_OR_RETURN(RouterTrace trace, ReadHeader(json, path));

  std::vector<std::string> files = {path};
  const std::filesystem::path metadata_path = std::filesystem::path(path).parent_path() / kMetadataFileName;
  std::error_code ignored;
  if (std::filesystem::exists(metadata_path, ignored)) files.push_back(metadata_path.string());
  COLIBRI_ASSIGN_OR_RETURN(Provenance provenance, SourceProvenance(options, files));
  COLIBRI_ASSIGN_OR_RETURN(Capture capture,
                           ReadCapture(files.size() > 1 ? files[1] : "", path, provenance.sources[0].sha256, trace));
  COLIBRI_ASSIGN_OR_RETURN(ModelShape shape, SwitchShape(options, path, trace, capture.layer_ids));

  provenance.source_engine = "huggingface-transformers";
  provenance.license = "Apache-2.0";
  provenance.attribution =
      "Switch Transformers router trace in the stratamoe-lab format (github.com/Labeeb2339/stratamoe-lab)";
  provenance.notes = capture.notes;
  TraceHeader header;
  header.shape = shape;
  header.provenance = std::move(provenance);
  COLIBRI_RETURN_IF_ERROR(sink->Begin(header));
  return EmitRequests(options, json["selections"], path, header.shape, capture, sink, report);
}

}  // namespace colibri::traces
