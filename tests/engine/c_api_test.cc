#include "colibri/colibri.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "colibri/engine/model.h"
#include "model_test_util.h"

extern "C" int colibri_c_api_compiles_as_c(void);

namespace colibri::engine {
namespace {

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelConfig shape;
    shape.model_name = "c-api";
    shape.dtype = DType::kBf16;
    shape.layer_ids = {0, 1};
    shape.experts = 6;
    shape.top_k = 2;
    shape.hidden = 32;
    shape.intermediate = 48;
    ASSERT_TRUE(SynthModel(shape, 3, dir_.Path("model")).ok());
  }

  std::vector<float> Forward(uint64_t l2_bytes, uint32_t threads) {
    colibri_options options{};
    const std::string model = dir_.Path("model");
    options.model_dir = model.c_str();
    options.l2_bytes = l2_bytes;
    options.threads = threads;
    colibri_engine* engine = nullptr;
    EXPECT_EQ(colibri_open(&options, &engine), COLIBRI_OK) << colibri_open_error();
    if (engine == nullptr) return {};
    EXPECT_EQ(colibri_num_layers(engine), 2u);
    EXPECT_EQ(colibri_hidden_size(engine), 32u);
    std::vector<float> hidden(3 * 32), out(3 * 32), all;
    for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = static_cast<float>(i % 7) / 7.0f - 0.4f;
    for (uint32_t layer = 0; layer < 2; ++layer) {
      EXPECT_EQ(colibri_moe_forward(engine, layer, hidden.data(), 3, out.data()), COLIBRI_OK)
          << colibri_last_error(engine);
      all.insert(all.end(), out.begin(), out.end());
    }
    colibri_close(engine);
    return all;
  }

  testing_util::ScratchDir dir_;
};

TEST_F(CApiTest, ForwardIsTheSameWhateverTheCacheBudget) {
  const std::vector<float> a = Forward(0, 1);
  const std::vector<float> b = Forward(1 << 20, 2);
  ASSERT_EQ(a.size(), 2u * 3 * 32);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  bool nonzero = false;
  for (float v : a) nonzero |= v != 0.0f;
  EXPECT_TRUE(nonzero);
}

TEST_F(CApiTest, ErrorsAreCodesWithMessages) {
  EXPECT_EQ(colibri_c_api_compiles_as_c(), 1);
  EXPECT_NE(std::string(colibri_open_error()).find("/nonexistent"), std::string::npos);
  colibri_engine* engine = nullptr;
  EXPECT_EQ(colibri_open(nullptr, &engine), COLIBRI_INVALID_ARGUMENT);
  colibri_options options{};
  EXPECT_EQ(colibri_open(&options, &engine), COLIBRI_INVALID_ARGUMENT);
  const std::string model = dir_.Path("model");
  options.model_dir = model.c_str();
  options.l2_bytes = 100;  // below one expert
  EXPECT_EQ(colibri_open(&options, &engine), COLIBRI_INVALID_ARGUMENT);
  EXPECT_NE(std::string(colibri_open_error()).find("below one expert"), std::string::npos);
  options.l2_bytes = 0;
  ASSERT_EQ(colibri_open(&options, &engine), COLIBRI_OK);
  float x[32] = {0}, y[32];
  EXPECT_EQ(colibri_moe_forward(engine, 5, x, 1, y), COLIBRI_INVALID_ARGUMENT);
  EXPECT_NE(std::string(colibri_last_error(engine)).find("layer 5 out of range"), std::string::npos);
  EXPECT_EQ(colibri_moe_forward(engine, 0, nullptr, 1, y), COLIBRI_INVALID_ARGUMENT);
  EXPECT_EQ(colibri_moe_forward(engine, 0, x, 1, y), COLIBRI_OK);
  EXPECT_STREQ(colibri_last_error(engine), "");
  colibri_close(engine);
  colibri_close(nullptr);
}

}  // namespace
}  // namespace colibri::engine
