// Internal helpers shared by the importers and the config reader (see import_util.h).
#include "import_util.h"
#include "colibri/bounded_echo.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace colibri::traces {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read failed");
  return bytes.str();
}

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return Status::InvalidArgument(path + ": empty file");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    return Status::InvalidArgument(path + ": byte " + std::to_string(e.byte) + ": invalid JSON: " + what);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(path + ": invalid JSON: " + e.what());
  }
}

namespace {

bool IsNegativeInteger(const nlohmann::json& value) {
  return value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() < 0;
}

}  // namespace

Result<uint64_t> JsonUint(const nlohmann::json& value, uint64_t max_value) {
  if (!value.is_number_integer() || IsNegativeInteger(value)) {
    return Status::InvalidArgument("expected a non-negative integer, found " + JsonSnippet(value));
  }
  const uint64_t n = value.get<uint64_t>();
  if (n > max_value) {
    return Status::InvalidArgument("value " + std::to_string(n) + " exceeds the maximum " + std::to_string(max_value));
  }
  return n;
}

Result<uint64_t> JsonUintField(const nlohmann::json& object, const std::string& where, const std::string& field,
                               uint64_t max_value) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return Status::InvalidArgument(where + ": field '" + field + "': missing");
  auto value = JsonUint(*it, max_value);
  if (!value.ok()) return value.status().WithPrefix(where + ": field '" + field + "'");
  return value;
}

Result<uint32_t> ParseUint32(std::string_view text) {
  uint32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument("'" + BoundedEcho(text) + "' is not a number in 0.." +
                                   std::to_string(UINT32_MAX));
  }
  return value;
}

std::string BaseName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

Result<Provenance> SourceProvenance(const ImportOptions& options, const std::vector<std::string>& files) {
  Provenance provenance;
  provenance.importer = options.format;
  provenance.importer_version = kImporterVersion;
  for (const std::string& file : files) {
    COLIBRI_ASSIGN_OR_RETURN(SourceFile source, DescribeSourceFile(file));
    provenance.sources.push_back(std::move(source));
  }
  return provenance;
}

// --- CsvReader ---

CsvReader::CsvReader(std::string_view text, std::string path) : text_(text), path_(std::move(path)) {
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  if (text_.substr(0, kUtf8Bom.size()) == kUtf8Bom) pos_ = kUtf8Bom.size();
}

std::string CsvReader::Where() const { return path_ + ":" + std::to_string(record_line_); }

Status CsvReader::Malformed(const std::string& why) {
  const Status error = Status::InvalidArgument(path_ + ":" + std::to_string(line_) + ": " + why);
  const size_t newline = text_.find('\n', pos_);
  pos_ = newline == std::string_view::npos ? text_.size() : newline + 1;
  if (newline != std::string_view::npos) ++line_;
  return error;
}

bool CsvReader::AtRecordEnd() const {
  return pos_ == text_.size() || text_[pos_] == ',' || text_[pos_] == '\n' || text_[pos_] == '\r';
}

// Reads a quoted field starting at its opening quote.
Status CsvReader::ReadQuoted(std::string* field) {
  const uint64_t start_line = line_;
  ++pos_;  // opening quote
  while (true) {
    if (pos_ == text_.size()) {
      return Status::InvalidArgument(path_ + ":" + std::to_string(start_line) +
                                     ": quoted field is never closed (missing '\"')");
    }
    const char c = text_[pos_++];
    if (c == '"') {
      if (pos_ < text_.size() && text_[pos_] == '"') {
        field->push_back('"');
        ++pos_;
        continue;
      }
      break;
    }
    if (c == '\n') ++line_;
    field->push_back(c);
  }
  if (!AtRecordEnd()) return Malformed("text after the closing quote of a quoted field");
  return Status::Ok();
}

Result<bool> CsvReader::Next(std::vector<std::string>* fields) {
  fields->clear();
  while (pos_ < text_.size() && (text_[pos_] == '\n' || text_[pos_] == '\r')) {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  if (pos_ == text_.size()) return false;
  record_line_ = line_;
  while (true) {
    std::string field;
    if (pos_ < text_.size() && text_[pos_] == '"') {
      COLIBRI_RETURN_IF_ERROR(ReadQuoted(&field));
    } else {
      while (!AtRecordEnd()) {
        if (text_[pos_] == '"') return Malformed("quote inside an unquoted field (quote the whole field)");
        field.push_back(text_[pos_++]);
      }
    }
    fields->push_back(std::move(field));
    if (pos_ == text_.size()) return true;
    if (text_[pos_] == ',') {
      ++pos_;
      continue;
    }
    if (text_[pos_] == '\r') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
    return true;
  }
}

// --- PassBuilder ---

PassBuilder::PassBuilder(const ModelShape& shape, RecordSink* sink)
    : shape_(shape), sink_(sink), records_(shape.num_moe_layers()) {}

void PassBuilder::Start(uint64_t request_id, bool prefill) {
  request_id_ = request_id;
  prefill_ = prefill;
  for (TraceRecord& record : records_) record.clear();
}

Status PassBuilder::AddToken(size_t layer_index, uint64_t position, const nlohmann::json& ids) {
  if (!ids.is_array()) return Status::InvalidArgument("expected a list of expert ids, found " + JsonSnippet(ids));
  if (ids.size() != shape_.top_k) {
    return Status::InvalidArgument("ragged top-k: " + std::to_string(ids.size()) + " expert ids, expected " +
                                   std::to_string(shape_.top_k) + " like the rest of the trace");
  }
  TraceRecord& record = records_[layer_index];
  const size_t first = record.expert_ids.size();
  auto reject = [&](const std::string& why) {
    record.expert_ids.resize(first);
    return Status::InvalidArgument(why);
  };
  for (size_t slot = 0; slot < ids.size(); ++slot) {
    const nlohmann::json& id = ids[slot];
    if (IsNegativeInteger(id)) {
      return reject("negative expert id " + JsonSnippet(id) + " in slot " + std::to_string(slot));
    }
    if (!id.is_number_integer()) {
      return reject("expert id in slot " + std::to_string(slot) + " is not an integer: " + JsonSnippet(id));
    }
    const uint64_t expert = id.get<uint64_t>();
    if (expert >= shape_.experts_per_layer) {
      return reject("expert id " + std::to_string(expert) + " out of range (" +
                    std::to_string(shape_.experts_per_layer) + " experts per layer)");
    }
    const auto begin = record.expert_ids.begin() + static_cast<std::ptrdiff_t>(first);
    if (std::find(begin, record.expert_ids.end(), expert) != record.expert_ids.end()) {
      return reject("duplicate expert id " + std::to_string(expert) + " in one token");
    }
    record.expert_ids.push_back(static_cast<uint32_t>(expert));
  }
  record.positions.push_back(position);
  return Status::Ok();
}

Status PassBuilder::Finish() {
  bool any = false;
  for (size_t i = 0; i < records_.size(); ++i) {
    TraceRecord& record = records_[i];
    if (record.positions.empty()) continue;
    record.request_id = request_id_;
    record.pass_id = next_pass_id_;
    record.layer = shape_.moe_layer_ids[i];
    record.prefill = prefill_;
    COLIBRI_RETURN_IF_ERROR(sink_->Add(record));
    record.clear();
    any = true;
  }
  if (any) ++next_pass_id_;
  return Status::Ok();
}

// --- PerFileImport ---

namespace {

std::string DescribeLayers(const std::vector<uint32_t>& layers) {
  std::string text;
  for (uint32_t layer : layers) text += (text.empty() ? "" : ",") + std::to_string(layer);
  return "[" + text + "] (" + std::to_string(layers.size()) + " layers)";
}

}  // namespace

bool FileModel::HasLayer(uint32_t layer) const { return std::binary_search(layer_ids.begin(), layer_ids.end(), layer); }

PerFileImport::PerFileImport(const ImportOptions& options, RecordSink* sink, Provenance provenance)
    : options_(options), sink_(sink) {
  header_.provenance = std::move(provenance);
}

Status PerFileImport::AcceptFile(const std::string& path, const FileModel& model) {
  if (pass_ == nullptr) {
    auto shape = ShapeFromOptions(options_, model.layer_ids, model.top_k);
    if (!shape.ok()) return shape.status().WithPrefix(path);
    header_.shape = std::move(shape).value();
    COLIBRI_RETURN_IF_ERROR(sink_->Begin(header_));
    reference_path_ = path;
    reference_ = model;
    pass_ = std::make_unique<PassBuilder>(header_.shape, sink_);
    return Status::Ok();
  }
  if (model.layer_ids != reference_.layer_ids) {
    return Status::InvalidArgument(path + ": mixed models: MoE layers " + DescribeLayers(model.layer_ids) + ", but " +
                                   reference_path_ + " has " + DescribeLayers(reference_.layer_ids));
  }
  if (model.top_k != reference_.top_k) {
    return Status::InvalidArgument(path + ": mixed models: top-k " + std::to_string(model.top_k) + ", but " +
                                   reference_path_ + " has top-k " + std::to_string(reference_.top_k));
  }
  return Status::Ok();
}

}  // namespace colibri::traces
