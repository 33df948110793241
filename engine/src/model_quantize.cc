// `QuantizeModel`: converts every expert block to another dtype row by row
// (decode to fp32, encode; int8 per output row) and measures the error:
//  - weights: per matrix kind over every expert, the decoded output weight
//    minus the source weight (max abs, RMS, and the source weights' RMS);
//  - outputs: for `check_experts` evenly spaced experts per layer, a plain
//    fp64 SwiGLU y = down (silu(gate x) * (up x)) of both models' decoded
//    weights on the same seeded inputs (uniform, unit variance).
// Sums are kept per block and reduced in block order: the report does not
// depend on the writer's thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "colibri/engine/model.h"
#include "model_codec.h"
#include "model_format.h"
#include "model_io.h"
#include "model_random.h"
#include "model_writer.h"

namespace colibri::engine {
namespace {

using model_detail::InputFile;
using model_detail::MatrixKind;

struct ErrorSums {
  double max_abs = 0;
  double error_squares = 0;
  double value_squares = 0;
  uint64_t count = 0;

  void Add(double reference, double value) {
    const double error = value - reference;
    max_abs = std::max(max_abs, std::fabs(error));
    error_squares += error * error;
    value_squares += reference * reference;
    ++count;
  }
  void Merge(const ErrorSums& other) {
    max_abs = std::max(max_abs, other.max_abs);
    error_squares += other.error_squares;
    value_squares += other.value_squares;
    count += other.count;
  }
  double Rms(double squares) const { return count > 0 ? std::sqrt(squares / static_cast<double>(count)) : 0; }
};

Result<std::vector<std::byte>> ReadBlock(const Model& model, const InputFile& file, uint32_t layer_index,
                                         uint32_t expert) {
  std::vector<std::byte> block(model.config().layout.block_bytes);
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(model.ExpertOffset(layer_index, expert), block.data(), block.size()));
  return block;
}

// Converts one block and adds its weight errors to sums[kind].
Status ConvertBlock(const ExpertLayout& from, const std::byte* source, const ExpertLayout& to, std::byte* block,
                    ErrorSums* sums) {
  std::vector<float> weights(std::max(from.hidden, from.intermediate));
  std::vector<float> decoded(weights.size());
  for (MatrixKind kind : model_detail::kMatrixKinds) {
    const model_detail::MatrixShape shape = model_detail::ShapeOf(from, kind);
    for (uint32_t r = 0; r < shape.rows; ++r) {
      model_detail::DecodeRow(from, kind, r, source, weights.data());
      COLIBRI_RETURN_IF_ERROR(model_detail::EncodeRow(to, kind, r, weights.data(), block));
      model_detail::DecodeRow(to, kind, r, block, decoded.data());
      for (uint32_t c = 0; c < shape.cols; ++c) sums[static_cast<size_t>(kind)].Add(weights[c], decoded[c]);
    }
  }
  return Status::Ok();
}

// The fp64 reference SwiGLU of one expert block on `tokens` inputs of H.
std::vector<double> ReferenceSwiGlu(const ExpertLayout& layout, const std::byte* block, const std::vector<float>& x,
                                    uint32_t tokens) {
  const uint32_t hidden = layout.hidden;
  const uint32_t intermediate = layout.intermediate;
  std::vector<float> row(std::max(hidden, intermediate));
  std::vector<double> gate(uint64_t{tokens} * intermediate);
  std::vector<double> act(gate.size());
  for (MatrixKind kind : {MatrixKind::kGate, MatrixKind::kUp}) {
    for (uint32_t j = 0; j < intermediate; ++j) {
      model_detail::DecodeRow(layout, kind, j, block, row.data());
      for (uint32_t t = 0; t < tokens; ++t) {
        double sum = 0;
        for (uint32_t h = 0; h < hidden; ++h) sum += double{row[h]} * x[uint64_t{t} * hidden + h];
        const uint64_t at = uint64_t{t} * intermediate + j;
        if (kind == MatrixKind::kGate) {
          gate[at] = sum;
        } else {
          act[at] = gate[at] / (1.0 + std::exp(-gate[at])) * sum;
        }
      }
    }
  }
  std::vector<double> y(uint64_t{tokens} * hidden);
  for (uint32_t h = 0; h < hidden; ++h) {
    model_detail::DecodeRow(layout, MatrixKind::kDown, h, block, row.data());
    for (uint32_t t = 0; t < tokens; ++t) {
      double sum = 0;
      for (uint32_t j = 0; j < intermediate; ++j) sum += double{row[j]} * act[uint64_t{t} * intermediate + j];
      y[uint64_t{t} * hidden + h] = sum;
    }
  }
  return y;
}

Result<OutputError> MeasureOutputError(const Model& source, const Model& converted, const QuantizeOptions& options) {
  const ModelConfig& c = source.config();
  COLIBRI_ASSIGN_OR_RETURN(InputFile source_file, InputFile::Open(source.experts_path()));
  COLIBRI_ASSIGN_OR_RETURN(InputFile converted_file, InputFile::Open(converted.experts_path()));
  OutputError out;
  out.experts_checked = std::min(options.check_experts, c.experts) * c.layers();
  out.tokens = options.check_tokens;
  ErrorSums sums;
  const float bound = std::sqrt(3.0f);  // unit variance
  for (uint32_t layer = 0; layer < c.layers(); ++layer) {
    model_detail::SeededUniform rng(options.seed, "quantize.input." + std::to_string(c.layer_ids[layer]));
    std::vector<float> x(uint64_t{options.check_tokens} * c.hidden);
    rng.Fill(bound, x.data(), x.size());
    const uint32_t checked = std::min(options.check_experts, c.experts);
    for (uint32_t i = 0; i < checked; ++i) {
      const auto expert = static_cast<uint32_t>(uint64_t{i} * c.experts / checked);
      COLIBRI_ASSIGN_OR_RETURN(std::vector<std::byte> a, ReadBlock(source, source_file, layer, expert));
      COLIBRI_ASSIGN_OR_RETURN(std::vector<std::byte> b, ReadBlock(converted, converted_file, layer, expert));
      const std::vector<double> reference = ReferenceSwiGlu(c.layout, a.data(), x, options.check_tokens);
      const std::vector<double> value = ReferenceSwiGlu(converted.config().layout, b.data(), x, options.check_tokens);
      for (size_t k = 0; k < reference.size(); ++k) sums.Add(reference[k], value[k]);
    }
  }
  out.max_abs = sums.max_abs;
  out.rms = sums.Rms(sums.error_squares);
  out.output_rms = sums.Rms(sums.value_squares);
  return out;
}

}  // namespace

Result<QuantizeReport> QuantizeModel(const std::string& source_dir, DType dtype, const std::string& dir,
                                     const QuantizeOptions& options) {
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckOutputDir(dir));
  COLIBRI_ASSIGN_OR_RETURN(Model source, OpenModel(source_dir, ModelVerify::kFull));
  COLIBRI_ASSIGN_OR_RETURN(InputFile experts, InputFile::Open(source.experts_path()));
  const ModelConfig& from = source.config();
  ModelConfig shape = from;
  shape.dtype = dtype;
  shape.source["quantized_from"] = source_dir;
  shape.source["quantized_from_dtype"] = DTypeName(from.dtype);

  std::vector<ErrorSums> sums(uint64_t{from.layers()} * from.experts * 3);
  auto fill_expert = [&](const ModelConfig& c, uint32_t layer_index, uint32_t expert, std::byte* block) {
    COLIBRI_ASSIGN_OR_RETURN(std::vector<std::byte> original, ReadBlock(source, experts, layer_index, expert));
    return ConvertBlock(from.layout, original.data(), c.layout, block,
                        &sums[(uint64_t{layer_index} * c.experts + expert) * 3]);
  };
  auto fill_router = [&](const ModelConfig& c, uint32_t layer_index, float* weight, float* bias) {
    std::copy_n(source.GateWeight(layer_index), uint64_t{c.experts} * c.hidden, weight);
    std::copy_n(source.GateBias(layer_index), c.experts, bias);
    return Status::Ok();
  };
  QuantizeReport report;
  COLIBRI_ASSIGN_OR_RETURN(report.config, model_detail::WriteModel(shape, fill_expert, fill_router, dir));
  report.source_dtype = from.dtype;
  for (size_t kind = 0; kind < 3; ++kind) {
    ErrorSums total;
    for (size_t block = 0; block < sums.size() / 3; ++block) total.Merge(sums[block * 3 + kind]);
    report.weights[kind] = WeightError{total.max_abs, total.Rms(total.error_squares), total.Rms(total.value_squares)};
  }
  COLIBRI_ASSIGN_OR_RETURN(Model converted, OpenModel(dir, ModelVerify::kNone));
  COLIBRI_ASSIGN_OR_RETURN(report.output, MeasureOutputError(source, converted, options));
  return report;
}

}  // namespace colibri::engine
