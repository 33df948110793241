// A reader of safetensors checkpoints (one or several files): each file is an
// 8-byte little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets: [begin, end]}} (plus an optional "__metadata__"), then the
// tensor bytes, row-major, offsets relative to the end of the header.
// Ownership: holds its files open. Thread-safety: const methods may run
// concurrently (positioned reads).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "colibri/engine/dtype.h"
#include "colibri/status.h"
#include "model_io.h"

namespace colibri::engine::model_detail {

class SafetensorsCheckpoint {
 public:
  // The files model.safetensors.index.json's weight_map names, else every
  // *.safetensors file of `dir` in name order. Headers are validated here.
  static Result<SafetensorsCheckpoint> Open(const std::string& dir);

  const std::vector<std::string>& files() const { return paths_; }
  // F32, BF16 or F16 as a DType; kUnsupported for other dtypes, kNotFound
  // for a missing tensor.
  Result<DType> TensorDType(const std::string& name) const;
  // Reads rows [first_row, first_row + rows) of the 2-D tensor `name`, whose
  // shape must be [total_rows, cols], as fp32 into `out` (rows x cols).
  Status ReadRows(const std::string& name, uint64_t total_rows, uint64_t cols, uint64_t first_row, uint64_t rows,
                  float* out) const;

 private:
  struct Tensor {
    std::string dtype;  // as in the header: "F32", "BF16", ...
    std::vector<uint64_t> shape;
    uint64_t begin = 0;  // absolute byte offsets in the file
    uint64_t end = 0;
    size_t file = 0;
  };
  Status AddFile(const std::string& path);
  Result<const Tensor*> Find(const std::string& name) const;

  std::string dir_;
  std::vector<std::string> paths_;
  std::vector<InputFile> files_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace colibri::engine::model_detail
