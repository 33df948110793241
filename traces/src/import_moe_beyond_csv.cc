// Importer for `moe-beyond-csv`: the MoE-Beyond expert activation CSVs, one
// file per prompt: a header `Layer ID,Batch Number,Token,Activated Expert IDs`,
// then one row per (layer, token), grouped by layer then token. The ids are a
// quoted list ("[8, 22, 43, 46, 63, 7]"); the Token text is CSV-quoted (RFC
// 4180, "" escapes) when it holds commas, quotes or line breaks.
//
// Mapping: one request per file, in the order given, with one prefill pass
// (one record per layer); a token's position is its row's index within its
// layer's group (bad rows skipped with --skip-bad keep their position). Batch
// Number must be an integer and is not stored; the Token text is not stored
// (no token ids are known). The MoE layers are the first file's layers, and
// every file must show the same layers and top-k. Shape from --model-config
// or --experts/--expert-bytes. Stores expert ids only.
#include <map>

#include "colibri/traces/importers.h"
#include "import_util.h"
#include "colibri/bounded_echo.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;

const std::vector<std::string> kHeader = {"Layer ID", "Batch Number", "Token", "Activated Expert IDs"};

struct ActivationRow {
  std::string where;  // "<file>:<line>"
  uint32_t layer = 0;
  uint64_t position = 0;
  Json ids;
};

// The rows of one file, with positions assigned per layer group.
class RowParser {
 public:
  RowParser(const ImportOptions& options, ImportReport* report) : options_(options), report_(report) {}

  // Parses one data record; a bad one is skipped (skip_bad) or is the error.
  Status Add(const std::vector<std::string>& fields, const std::string& where) {
    ++report_->rows_read;
    const Status parsed = Parse(fields, where);
    return parsed.ok() ? parsed : RejectOrSkip(options_, report_, parsed.WithPrefix(where));
  }

  std::vector<ActivationRow>& rows() { return rows_; }

  // The file's model: its layers, and the ids per token of its first good row.
  FileModel Model() const {
    FileModel model;
    for (const auto& entry : tokens_per_layer_) model.layer_ids.push_back(entry.first);
    if (!rows_.empty()) model.top_k = static_cast<uint32_t>(rows_.front().ids.size());
    return model;
  }

 private:
  Status Parse(const std::vector<std::string>& fields, const std::string& where) {
    if (fields.size() != kHeader.size()) {
      return Status::InvalidArgument(std::to_string(fields.size()) +
                                     " fields, expected 4 (Layer ID, Batch Number, "
                                     "Token, Activated Expert IDs)");
    }
    COLIBRI_ASSIGN_OR_RETURN(uint32_t layer, Field("Layer ID", fields[0]));
    COLIBRI_RETURN_IF_ERROR(Field("Batch Number", fields[1]).status());
    if (layer != current_layer_ && tokens_per_layer_.count(layer) > 0) {
      return Status::InvalidArgument("layer " + std::to_string(layer) +
                                     " again after other layers (rows must be grouped by layer)");
    }
    current_layer_ = layer;
    const uint64_t position = tokens_per_layer_[layer]++;
    Json ids = Json::parse(fields[3], nullptr, /*allow_exceptions=*/false);
    if (ids.is_discarded() || !ids.is_array()) {
      return Status::InvalidArgument("Activated Expert IDs '" + BoundedEcho(fields[3]) +
                                     "' is not a list of ids like [8, 22, 43]");
    }
    rows_.push_back({where, layer, position, std::move(ids)});
    return Status::Ok();
  }

  static Result<uint32_t> Field(const char* name, const std::string& text) {
    auto value = ParseUint32(text);
    if (!value.ok()) return value.status().WithPrefix(name);
    return value;
  }

  const ImportOptions& options_;
  ImportReport* report_;
  std::vector<ActivationRow> rows_;
  std::map<uint32_t, uint64_t> tokens_per_layer_;
  uint32_t current_layer_ = UINT32_MAX;
};

Status CheckHeader(CsvReader& csv, const std::string& path) {
  std::vector<std::string> fields;
  COLIBRI_ASSIGN_OR_RETURN(bool more, csv.Next(&fields));
  if (!more) return Status::InvalidArgument(path + ": empty file");
  if (fields != kHeader) {
    std::string found;
    for (const std::string& field : fields) found += (found.empty() ? "" : ",") + field;
    return Status::InvalidArgument(csv.Where() + ": header '" + BoundedEcho(found) +
                                   "', expected 'Layer ID,Batch Number,Token,Activated Expert IDs'");
  }
  return Status::Ok();
}

Result<std::vector<ActivationRow>> ReadRows(const ImportOptions& options, const std::string& path,
                                            const std::string& text, FileModel* model, ImportReport* report) {
  CsvReader csv(text, path);
  COLIBRI_RETURN_IF_ERROR(CheckHeader(csv, path));
  RowParser parser(options, report);
  std::vector<std::string> fields;
  while (true) {
    auto more = csv.Next(&fields);
    if (!more.ok()) {
      ++report->rows_read;
      COLIBRI_RETURN_IF_ERROR(RejectOrSkip(options, report, more.status()));
      continue;
    }
    if (!more.value()) break;
    COLIBRI_RETURN_IF_ERROR(parser.Add(fields, csv.Where()));
  }
  *model = parser.Model();
  if (parser.rows().empty()) return Status::InvalidArgument(path + ": no usable data rows after the header");
  return std::move(parser.rows());
}

}  // namespace

Status ImportMoeBeyondCsv(const ImportOptions& options, RecordSink* sink, ImportReport* report) {
  COLIBRI_ASSIGN_OR_RETURN(Provenance provenance, SourceProvenance(options, options.inputs));
  provenance.source_engine = "moe-beyond";
  provenance.notes = "MoE-Beyond activation CSV: one request per file, one prefill pass; token text not stored";
  PerFileImport import(options, sink, std::move(provenance));
  for (size_t request = 0; request < options.inputs.size(); ++request) {
    const std::string& path = options.inputs[request];
    COLIBRI_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
    FileModel model;
    COLIBRI_ASSIGN_OR_RETURN(std::vector<ActivationRow> rows, ReadRows(options, path, text, &model, report));
    COLIBRI_RETURN_IF_ERROR(import.AcceptFile(path, model));
    import.pass().Start(request, /*prefill=*/true);
    for (const ActivationRow& row : rows) {
      const size_t layer_index = static_cast<size_t>(import.shape().LayerIndex(row.layer));
      const Status added = import.pass().AddToken(layer_index, row.position, row.ids);
      if (!added.ok()) COLIBRI_RETURN_IF_ERROR(RejectOrSkip(options, report, added.WithPrefix(row.where)));
    }
    COLIBRI_RETURN_IF_ERROR(import.pass().Finish());
  }
  return Status::Ok();
}

}  // namespace colibri::traces
