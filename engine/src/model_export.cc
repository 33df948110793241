// `ExportModel`: a Hugging Face safetensors checkpoint to the Colibri format.
// Source weights are [out, in] row-major, as ExpertLayout stores them, so each
// row converts independently: fp32 in between, rounded once to the output
// dtype (exact when the dtypes match). With padding, gate and up gain zero
// rows and down zero columns, which leave the expert's output unchanged.
#include <algorithm>
#include <vector>

#include "colibri/engine/model.h"
#include "model_codec.h"
#include "model_format.h"
#include "model_hf.h"
#include "model_safetensors.h"
#include "model_writer.h"

namespace colibri::engine {
namespace {

using model_detail::MatrixKind;
using model_detail::SafetensorsCheckpoint;

constexpr uint64_t kReadChunkBytes = 4ull << 20;  // fp32 rows converted per read

// Copies one source matrix (unpadded shape) into its place in `block`.
Status ExportMatrix(const SafetensorsCheckpoint& checkpoint, const std::string& name, const ModelConfig& config,
                    MatrixKind kind, std::byte* block) {
  const model_detail::MatrixShape padded = model_detail::ShapeOf(config.layout, kind);
  const bool down = kind == MatrixKind::kDown;
  const uint64_t rows = down ? config.hidden : config.source_intermediate;
  const uint64_t cols = down ? config.source_intermediate : config.hidden;
  const uint64_t rows_per_read = std::max<uint64_t>(1, kReadChunkBytes / (4 * cols));
  std::vector<float> source(std::min(rows, rows_per_read) * cols);
  std::vector<float> row(padded.cols, 0.0f);  // zero tail: down's padded columns
  for (uint64_t first = 0; first < rows; first += rows_per_read) {
    const uint64_t count = std::min(rows_per_read, rows - first);
    COLIBRI_RETURN_IF_ERROR(checkpoint.ReadRows(name, rows, cols, first, count, source.data()));
    for (uint64_t r = 0; r < count; ++r) {
      std::copy_n(source.data() + r * cols, cols, row.data());
      COLIBRI_RETURN_IF_ERROR(
          model_detail::EncodeRow(config.layout, kind, static_cast<uint32_t>(first + r), row.data(), block)
              .WithPrefix(name));
    }
  }
  return Status::Ok();
}

Result<ModelConfig> ExportShape(const ExportOptions& options, const model_detail::HfMoeModel& hf, DType source_dtype) {
  if (options.pad_intermediate == 0 || options.pad_intermediate > model_detail::kMaxDimension) {
    return Status::InvalidArgument("pad_intermediate " + std::to_string(options.pad_intermediate) + " not in 1.." +
                                   std::to_string(model_detail::kMaxDimension));
  }
  ModelConfig config = hf.shape;
  config.dtype = options.dtype.value_or(source_dtype);
  config.source_intermediate = config.intermediate;
  const uint64_t multiple = options.pad_intermediate;
  config.intermediate =
      static_cast<uint32_t>(std::min<uint64_t>((config.intermediate + multiple - 1) / multiple * multiple, UINT32_MAX));
  config.intermediate_multiple = options.pad_intermediate;
  config.expert_capacity = options.expert_capacity;
  config.source["tool"] = "colibri model export";
  config.source["checkpoint"] = options.checkpoint_dir;
  config.source["source_dtype"] = DTypeName(source_dtype);
  return config;
}

}  // namespace

Result<ExportReport> ExportModel(const ExportOptions& options, const std::string& dir) {
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckOutputDir(dir));
  COLIBRI_ASSIGN_OR_RETURN(
      model_detail::HfMoeModel hf,
      model_detail::ReadHfMoeConfig(model_detail::JoinPath(options.checkpoint_dir, model_detail::kConfigFileName),
                                    options.max_layers));
  COLIBRI_ASSIGN_OR_RETURN(SafetensorsCheckpoint checkpoint, SafetensorsCheckpoint::Open(options.checkpoint_dir));
  COLIBRI_ASSIGN_OR_RETURN(DType source_dtype,
                           checkpoint.TensorDType(hf.ExpertTensor(hf.shape.layer_ids[0], 0, MatrixKind::kGate)));
  COLIBRI_ASSIGN_OR_RETURN(ModelConfig shape, ExportShape(options, hf, source_dtype));

  auto fill_expert = [&](const ModelConfig& c, uint32_t layer_index, uint32_t expert, std::byte* block) {
    for (MatrixKind kind : model_detail::kMatrixKinds) {
      COLIBRI_RETURN_IF_ERROR(
          ExportMatrix(checkpoint, hf.ExpertTensor(c.layer_ids[layer_index], expert, kind), c, kind, block));
    }
    return Status::Ok();
  };
  auto fill_router = [&](const ModelConfig& c, uint32_t layer_index, float* weight, float*) {
    return checkpoint.ReadRows(hf.RouterTensor(c.layer_ids[layer_index]), c.experts, c.hidden, 0, c.experts, weight);
  };
  ExportReport report;
  COLIBRI_ASSIGN_OR_RETURN(report.config, model_detail::WriteModel(shape, fill_expert, fill_router, dir));
  report.model_type = hf.model_type;
  report.source_dtype = source_dtype;
  report.source_files = checkpoint.files();
  report.tensors_read = uint64_t{report.config.layers()} * (3ull * report.config.experts + 1);
  return report;
}

}  // namespace colibri::engine
