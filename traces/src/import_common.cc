// Shared importer machinery: dispatch, the writing sink, the top-k/ids-only
// adapter, provenance digests, shapes from options.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "colibri/engine/input_file.h"
#include "colibri/engine/sha256.h"
#include "colibri/traces/importers.h"
#include "colibri/traces/model_config.h"

namespace colibri::traces {
namespace {

using ImporterFn = Status (*)(const ImportOptions&, RecordSink*, ImportReport*);

const std::map<std::string, ImporterFn>& Importers() {
  static const std::map<std::string, ImporterFn> kImporters = {
      {"bmoe-csv", &ImportBmoeCsv},
      {"switch-json", &ImportSwitchJson},
      {"expert-selection-json", &ImportExpertSelectionJson},
      {"moe-beyond-csv", &ImportMoeBeyondCsv},
      {"routed-experts-json", &ImportRoutedExpertsJson},
  };
  return kImporters;
}

// Applies --top-k truncation and --ids-only, and counts what passes through.
class AdaptingSink : public RecordSink {
 public:
  AdaptingSink(const ImportOptions& options, RecordSink* next, ImportReport* report)
      : options_(options), next_(next), report_(report) {}

  Status Begin(const TraceHeader& header) override {
    TraceHeader adapted = header;
    data_top_k_ = header.shape.top_k;
    if (options_.top_k) {
      if (*options_.top_k == 0 || *options_.top_k > data_top_k_) {
        return Status::InvalidArgument("--top-k " + std::to_string(*options_.top_k) + " must be in 1.." +
                                       std::to_string(data_top_k_) + " (the ids per token in the data)");
      }
      adapted.shape.top_k = *options_.top_k;
    }
    if (options_.ids_only) {
      adapted.shape.hidden_dtype = HiddenDtype::kNone;
      adapted.shape.hidden_size = 0;
    }
    if (!options_.license.empty()) adapted.provenance.license = options_.license;
    if (!options_.attribution.empty()) adapted.provenance.attribution = options_.attribution;
    top_k_ = adapted.shape.top_k;
    return next_->Begin(adapted);
  }

  Status Add(const TraceRecord& record) override {
    const TraceRecord* out = &record;
    if (top_k_ != data_top_k_ || options_.ids_only) {
      scratch_ = record;
      Adapt(&scratch_);
      out = &scratch_;
    }
    COLIBRI_RETURN_IF_ERROR(next_->Add(*out));
    ++report_->records;
    report_->selections += out->expert_ids.size();
    requests_.insert(out->request_id);
    for (uint64_t position : out->positions) tokens_.insert({out->request_id, position});
    report_->requests = requests_.size();
    report_->tokens = tokens_.size();
    return Status::Ok();
  }

 private:
  template <typename T>
  void Truncate(std::vector<T>* values, size_t tokens) const {
    if (values->empty()) return;
    for (size_t t = 0; t < tokens; ++t) {
      for (size_t s = 0; s < top_k_; ++s) (*values)[t * top_k_ + s] = (*values)[t * data_top_k_ + s];
    }
    values->resize(tokens * top_k_);
  }

  void Adapt(TraceRecord* r) const {
    const size_t tokens = r->token_count();
    Truncate(&r->expert_ids, tokens);
    Truncate(&r->gate_weights, tokens);
    Truncate(&r->physical_expert_ids, tokens);
    Truncate(&r->cache_outcomes, tokens);
    if (options_.ids_only) {
      r->gate_weights.clear();
      r->router_logits.clear();
      r->token_ids.clear();
      r->hidden_states.clear();
      r->physical_expert_ids.clear();
      r->cache_outcomes.clear();
      r->arrival_ns.reset();
      r->start_ns.reset();
      r->end_ns.reset();
    }
  }

  const ImportOptions& options_;
  RecordSink* next_;
  ImportReport* report_;
  uint32_t data_top_k_ = 0;
  uint32_t top_k_ = 0;
  TraceRecord scratch_;
  std::set<uint64_t> requests_;
  std::set<std::pair<uint64_t, uint64_t>> tokens_;
};

class WriterSink : public RecordSink {
 public:
  WriterSink(std::string path, WriterOptions options) : path_(std::move(path)), options_(options) {}
  Status Begin(const TraceHeader& header) override {
    if (writer_) return Status::Internal("importer began the trace twice");
    COLIBRI_ASSIGN_OR_RETURN(writer_, TraceWriter::Create(path_, header, options_));
    return Status::Ok();
  }
  Status Add(const TraceRecord& record) override {
    if (!writer_) return Status::Internal("importer added a record before the header");
    return writer_->Append(record);
  }
  Status Close() {
    if (!writer_) return Status::Internal("importer wrote no header");
    if (writer_->records_written() == 0) return Status::InvalidArgument("the input holds no routing records");
    return writer_->Close();
  }

 private:
  std::string path_;
  WriterOptions options_;
  std::unique_ptr<TraceWriter> writer_;
};

}  // namespace

const std::vector<std::string>& ImportFormats() {
  static const std::vector<std::string> kFormats = [] {
    std::vector<std::string> names;
    for (const auto& entry : Importers()) names.push_back(entry.first);
    return names;
  }();
  return kFormats;
}

Status RunImporter(const ImportOptions& options, RecordSink* sink, ImportReport* report) {
  auto it = Importers().find(options.format);
  if (it == Importers().end()) {
    std::string names;
    for (const std::string& name : ImportFormats()) names += (names.empty() ? "" : ", ") + name;
    return Status::InvalidArgument("unknown import format '" + options.format + "' (one of: " + names + ")");
  }
  if (options.inputs.empty()) return Status::InvalidArgument("no input files");
  if (options.llama_log_path && options.format != "bmoe-csv") {
    return Status::InvalidArgument("--llama-log applies to bmoe-csv (a llama.cpp-based capture), not " + options.format);
  }
  AdaptingSink adapter(options, sink, report);
  return it->second(options, &adapter, report);
}

Result<ImportReport> ImportToFile(const ImportOptions& options, const std::string& output_path,
                                  const WriterOptions& writer_options) {
  ImportReport report;
  WriterSink sink(output_path, writer_options);
  COLIBRI_RETURN_IF_ERROR(RunImporter(options, &sink, &report));
  COLIBRI_RETURN_IF_ERROR(sink.Close().WithPrefix(output_path));
  return report;
}

Result<SourceFile> DescribeSourceFile(const std::string& path) {
  COLIBRI_RETURN_IF_ERROR(engine::CheckInputFile(path, "file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  engine::Sha256 sha256;
  std::vector<char> buffer(1 << 20);
  uint64_t size = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    sha256.Update(buffer.data(), static_cast<uint64_t>(got));
    size += static_cast<uint64_t>(got);
  }
  if (in.bad()) return Status::IoError(path + ": read failed");
  COLIBRI_ASSIGN_OR_RETURN(const std::string hex, sha256.Finish());
  return SourceFile{path, hex, size};
}

Result<ModelShape> ShapeFromOptions(const ImportOptions& options, const std::vector<uint32_t>& data_layer_ids,
                                    uint32_t data_top_k) {
  ModelShape shape;
  if (options.model_config_path) {
    COLIBRI_ASSIGN_OR_RETURN(shape, ShapeFromHfConfig(*options.model_config_path, options.dtype));
    if (options.experts && *options.experts != shape.experts_per_layer) {
      return Status::InvalidArgument("--experts " + std::to_string(*options.experts) + " disagrees with " +
                                     *options.model_config_path + " (" + std::to_string(shape.experts_per_layer) +
                                     " experts)");
    }
    if (options.expert_bytes) std::fill(shape.expert_bytes.begin(), shape.expert_bytes.end(), *options.expert_bytes);
    for (uint32_t layer : data_layer_ids) {
      if (shape.LayerIndex(layer) < 0) {
        return Status::InvalidArgument("layer " + std::to_string(layer) + " in the data is not a MoE layer of " +
                                       *options.model_config_path);
      }
    }
  } else if (options.experts && options.expert_bytes) {
    shape.moe_layer_ids = data_layer_ids;
    std::sort(shape.moe_layer_ids.begin(), shape.moe_layer_ids.end());
    shape.moe_layer_ids.erase(std::unique(shape.moe_layer_ids.begin(), shape.moe_layer_ids.end()),
                              shape.moe_layer_ids.end());
    shape.experts_per_layer = *options.experts;
    shape.expert_bytes.assign(shape.moe_layer_ids.size(), *options.expert_bytes);
    shape.dtype = options.dtype;
  } else {
    return Status::InvalidArgument(
        "the " + options.format +
        " format carries no model shape: pass --model-config FILE (with --dtype), or --experts N --expert-bytes B");
  }
  shape.top_k = data_top_k;
  COLIBRI_RETURN_IF_ERROR(shape.Validate());
  return shape;
}

Status RejectOrSkip(const ImportOptions& options, ImportReport* report, const Status& error) {
  if (!options.skip_bad) return error;
  ++report->rows_skipped;
  if (report->skipped_reasons.size() < 20) report->skipped_reasons.push_back(error.message());
  return Status::Ok();
}

}  // namespace colibri::traces
