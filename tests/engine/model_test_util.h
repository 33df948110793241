// Helpers shared by the model format tests: a scratch directory under /tmp,
// whole-file reads and writes, a small model shape.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "colibri/engine/model.h"

namespace colibri::engine::testing_util {

// A fresh directory named after the running test, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("colibri-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~ScratchDir() { std::filesystem::remove_all(root_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // A path inside the directory (not created).
  std::string Path(const std::string& name) const { return (root_ / name).string(); }
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

inline std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadText(const std::string& path) {
  const std::vector<char> bytes = ReadBytes(path);
  return {bytes.begin(), bytes.end()};
}

inline void WriteText(const std::string& path, const std::string& text) {
  WriteBytes(path, std::vector<char>(text.begin(), text.end()));
}

// 2 MoE layers (ids 0, 1) x 4 experts, top-2, H = 64, I = 32.
inline ModelConfig SmallShape(DType dtype) {
  ModelConfig shape;
  shape.dtype = dtype;
  shape.layer_ids = {0, 1};
  shape.experts = 4;
  shape.top_k = 2;
  shape.hidden = 64;
  shape.intermediate = 32;
  return shape;
}

// The stored bytes of one expert's block.
inline std::vector<char> ExpertBlock(const Model& model, uint32_t layer_index, uint32_t expert) {
  const std::vector<char> bytes = ReadBytes(model.experts_path());
  const uint64_t offset = model.ExpertOffset(layer_index, expert);
  return {bytes.begin() + static_cast<std::ptrdiff_t>(offset),
          bytes.begin() + static_cast<std::ptrdiff_t>(offset + model.config().layout.block_bytes)};
}

// The named check of a VerifyModel report, or null.
inline const ModelCheck* FindCheck(const VerifyReport& report, const std::string& name) {
  for (const ModelCheck& check : report.checks) {
    if (check.name == name) return &check;
  }
  return nullptr;
}

inline constexpr DType kAllDTypes[] = {DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8};

}  // namespace colibri::engine::testing_util
