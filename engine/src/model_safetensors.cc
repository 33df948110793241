#include "model_safetensors.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "model_codec.h"
#include "model_format.h"
#include "model_json.h"

namespace colibri::engine::model_detail {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the safetensors limit
constexpr uint64_t kMaxIndexBytes = 64ull << 20;
constexpr char kIndexFileName[] = "model.safetensors.index.json";

Result<DType> ToDType(const std::string& name, const std::string& dtype) {
  if (dtype == "F32") return DType::kFp32;
  if (dtype == "BF16") return DType::kBf16;
  if (dtype == "F16") return DType::kFp16;
  return Status::Unsupported("tensor '" + name + "' has dtype " + dtype + "; export reads F32, BF16 or F16");
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string text;
  for (uint64_t dim : shape) text += (text.empty() ? "" : ", ") + std::to_string(dim);
  return "[" + text + "]";
}

// The shard names of model.safetensors.index.json, sorted.
Result<std::vector<std::string>> IndexedFiles(const std::string& index_path) {
  COLIBRI_ASSIGN_OR_RETURN(Json json, ReadJsonFile(index_path, kMaxIndexBytes));
  COLIBRI_ASSIGN_OR_RETURN(JsonObject index, JsonObject::Of(json, index_path));
  COLIBRI_ASSIGN_OR_RETURN(JsonObject weight_map, index.Object("weight_map"));
  std::set<std::string> files;
  for (const auto& [tensor, file] : weight_map.json().items()) {
    COLIBRI_ASSIGN_OR_RETURN(std::string name, weight_map.String(tensor));
    if (name.empty() || name.find('/') != std::string::npos || name == "..") {
      return weight_map.Error(tensor, "'" + name + "' is not a file name in the checkpoint directory");
    }
    files.insert(name);
  }
  return std::vector<std::string>(files.begin(), files.end());
}

Result<std::vector<std::string>> GlobbedFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path().filename().string());
  }
  if (error) return Status::IoError(dir + ": cannot list: " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return Status::NotFound(dir + ": not a checkpoint directory");
  const std::string index_path = JoinPath(dir, kIndexFileName);
  std::vector<std::string> names;
  if (fs::exists(index_path, error)) {
    COLIBRI_ASSIGN_OR_RETURN(names, IndexedFiles(index_path));
  } else {
    COLIBRI_ASSIGN_OR_RETURN(names, GlobbedFiles(dir));
  }
  if (names.empty()) return Status::NotFound(dir + ": no *.safetensors files");
  SafetensorsCheckpoint checkpoint;
  checkpoint.dir_ = dir;
  for (const std::string& name : names) COLIBRI_RETURN_IF_ERROR(checkpoint.AddFile(JoinPath(dir, name)));
  return checkpoint;
}

Status SafetensorsCheckpoint::AddFile(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  uint64_t header_bytes = 0;
  if (file.bytes() < 8) return Status::InvalidArgument(path + ": too short for a safetensors header");
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(0, &header_bytes, 8));
  if (header_bytes > kMaxHeaderBytes || header_bytes > file.bytes() - 8) {
    return Status::InvalidArgument(path + ": header length " + std::to_string(header_bytes) +
                                   " exceeds the file or the 100 MiB safetensors limit: not a safetensors file");
  }
  std::string text(header_bytes, '\0');
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(8, text.data(), header_bytes));
  COLIBRI_ASSIGN_OR_RETURN(Json json, ParseJson(text, path));
  COLIBRI_ASSIGN_OR_RETURN(JsonObject header, JsonObject::Of(json, path));
  const uint64_t data_start = 8 + header_bytes;
  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") continue;
    COLIBRI_ASSIGN_OR_RETURN(JsonObject entry, header.Object(name));
    Tensor tensor;
    COLIBRI_ASSIGN_OR_RETURN(tensor.dtype, entry.String("dtype"));
    COLIBRI_ASSIGN_OR_RETURN(tensor.shape, entry.UintList("shape", 0, UINT32_MAX));
    COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> offsets,
                             entry.UintList("data_offsets", 0, file.bytes() - data_start));
    if (offsets.size() != 2 || offsets[0] > offsets[1]) {
      return entry.Error("data_offsets", "expected [begin, end] with begin <= end");
    }
    tensor.begin = data_start + offsets[0];
    tensor.end = data_start + offsets[1];
    tensor.file = files_.size();
    if (!tensors_.emplace(name, std::move(tensor)).second) {
      return Status::InvalidArgument(path + ": tensor '" + name + "' also appears in an earlier file");
    }
  }
  paths_.push_back(path);
  files_.push_back(std::move(file));
  return Status::Ok();
}

Result<const SafetensorsCheckpoint::Tensor*> SafetensorsCheckpoint::Find(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return Status::NotFound("tensor '" + name + "' not found in the " + std::to_string(files_.size()) +
                            " safetensors file(s) of " + dir_);
  }
  return &it->second;
}

Result<DType> SafetensorsCheckpoint::TensorDType(const std::string& name) const {
  COLIBRI_ASSIGN_OR_RETURN(const Tensor* tensor, Find(name));
  return ToDType(name, tensor->dtype);
}

Status SafetensorsCheckpoint::ReadRows(const std::string& name, uint64_t total_rows, uint64_t cols, uint64_t first_row,
                                       uint64_t rows, float* out) const {
  COLIBRI_ASSIGN_OR_RETURN(const Tensor* tensor, Find(name));
  COLIBRI_ASSIGN_OR_RETURN(DType dtype, ToDType(name, tensor->dtype));
  if (tensor->shape != std::vector<uint64_t>{total_rows, cols}) {
    return Status::InvalidArgument("tensor '" + name + "' has shape " + ShapeText(tensor->shape) + ", expected " +
                                   ShapeText({total_rows, cols}));
  }
  const uint64_t row_bytes = cols * DTypeBytes(dtype);
  if (tensor->end - tensor->begin != total_rows * row_bytes) {
    return Status::Corruption(paths_[tensor->file] + ": tensor '" + name + "' spans " +
                              std::to_string(tensor->end - tensor->begin) + " bytes, its shape and dtype need " +
                              std::to_string(total_rows * row_bytes));
  }
  std::vector<std::byte> bytes(rows * row_bytes);
  COLIBRI_RETURN_IF_ERROR(
      files_[tensor->file].ReadAt(tensor->begin + first_row * row_bytes, bytes.data(), bytes.size()));
  DecodeElements(dtype, bytes.data(), rows * cols, out);
  return Status::Ok();
}

}  // namespace colibri::engine::model_detail
