// The ComputeBackend contract (compute.h) as one value-parameterised suite,
// ComputeConformanceTest, shared by every implementation: real backends
// (tests/engine/compute_conformance_test.cc) and modelled ones
// (tests/sim/sim_compute_conformance_test.cc). A test binary enrolls a
// backend by instantiating the suite over ComputeHarnessFactory values; the
// harness makes the backend and supplies the clock it keeps time on. Include
// this header from exactly one source file per test binary (it defines the tests).
//
// The oracle is CpuCompute on its portable scalar path with one thread
// (compute.h: every implementation of one dtype gives bit-identical outputs).
// The contract checked here:
//  - calls are synchronous: when ExpertFfn / GateGemv return OK the work is
//    done; the backend's clock never goes back, and a model that only keeps
//    time (!reads_data) moves it forward for every call with tokens > 0;
//  - where caps().reads_data: for every weight dtype (fp32, bf16, fp16, int8),
//    shapes that are and are not multiples of 16, and batches of 1 to 17
//    tokens, every output element equals the oracle's bit for bit (the
//    expert FFN's y and the gate GEMV's logits, with and without bias), and
//    the same call repeated after others gives the same bits;
//  - where !reads_data: inputs, weights and outputs are untouched, even when
//    they lie in memory that faults when touched, and null data pointers are
//    accepted (the engine passes none);
//  - inputs and weights are never modified;
//  - tokens == 0 is OK and writes nothing, with or without data pointers;
//  - errors as Status, never a crash: a view without a layout, an empty
//    expert shape (hidden or intermediate 0) and an empty gate (0 experts or
//    hidden 0) are InvalidArgument; an unknown weight dtype is Unsupported;
//    where reads_data, a null block, input or output with tokens > 0 and a
//    null gate weight are InvalidArgument; a failed call writes no output.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/engine/compute.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/dtype.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/status.h"
#include "reference_ffn.h"

namespace colibri::engine::conformance {

// A backend under test together with the clock it keeps time on. Owns that
// clock (or event loop), which outlives every backend it makes.
class ComputeHarness {
 public:
  virtual ~ComputeHarness() = default;
  // A new backend. Unsupported (e.g. no GPU here) skips the suite.
  virtual Result<std::unique_ptr<ComputeBackend>> Make() = 0;
  // The clock the backends keep time on.
  virtual const Clock& clock() const = 0;
  // Where an expert block must be for the backend to read it: for a backend
  // with caps().device_memory that reads data, a copy of `block` in device
  // memory that the harness keeps until it is destroyed; else `block` itself.
  virtual const std::byte* PlaceBlock(const std::byte* block, uint64_t bytes) {
    (void)bytes;
    return block;
  }
};

struct ComputeHarnessFactory {
  const char* name;  // the test name suffix
  std::unique_ptr<ComputeHarness> (*make)();
};

// Names the harness in gtest's messages (instead of its bytes).
inline void PrintTo(const ComputeHarnessFactory& factory, std::ostream* os) { *os << factory.name; }

inline std::string ComputeHarnessName(const ::testing::TestParamInfo<ComputeHarnessFactory>& info) {
  return info.param.name;
}

namespace compute_detail {

struct Shape {
  uint32_t hidden;
  uint32_t intermediate;
};
// H, I: neither a multiple of 16, one of each, both.
inline constexpr Shape kShapes[] = {{24, 40}, {100, 37}, {64, 130}, {32, 48}};
inline constexpr size_t kBatches[] = {1, 3, 17};
inline constexpr DType kDTypes[] = {DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8};
// A bit pattern no kernel produces from these inputs: marks outputs not (yet) written.
inline constexpr uint32_t kUntouchedBits = 0x7FC0DEADu;  // a quiet NaN with a payload

inline float Untouched() {
  float f;
  std::memcpy(&f, &kUntouchedBits, 4);
  return f;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

inline bool AllUntouched(const std::vector<float>& v) { return SameBits(v, std::vector<float>(v.size(), Untouched())); }

inline std::string CaseName(DType dtype, Shape shape, size_t tokens) {
  return std::string(DTypeName(dtype)) + " " + std::to_string(shape.hidden) + "x" +
         std::to_string(shape.intermediate) + " batch " + std::to_string(tokens);
}

// An expert layout whose shape or dtype is broken after the fact.
inline ExpertLayout BrokenLayout(uint32_t hidden, uint32_t intermediate, uint8_t dtype) {
  ExpertLayout layout = ExpertLayout::Make(DType::kFp32, 16, 16);
  layout.hidden = hidden;
  layout.intermediate = intermediate;
  layout.dtype = static_cast<DType>(dtype);
  return layout;
}

}  // namespace compute_detail

class ComputeConformanceTest : public ::testing::TestWithParam<ComputeHarnessFactory> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    auto made = harness_->Make();
    if (!made.ok() && made.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << made.status().message();
    ASSERT_TRUE(made.ok()) << made.status().message();
    compute_ = std::move(made).value();
    ASSERT_NE(compute_, nullptr);
    auto oracle = CpuCompute::Create(CpuComputeOptions{1, CpuIsa::kScalar});
    ASSERT_TRUE(oracle.ok()) << oracle.status().message();
    oracle_ = std::move(oracle).value();
    last_ns_ = harness_->clock().Now();
  }

  const ComputeCaps& caps() const { return compute_->caps(); }

  // The backend's clock, checked never to go back.
  TimeNs Now() {
    const TimeNs now = harness_->clock().Now();
    EXPECT_GE(now, last_ns_) << "the clock went back";
    last_ns_ = now;
    return now;
  }

  // Checks the time a successful call with `tokens` took.
  void ExpectTimeKept(TimeNs before, TimeNs after, size_t tokens) {
    if (!caps().reads_data && tokens > 0) {
      EXPECT_GT(after, before) << "a time-only model kept no time";
    }
  }

  ExpertView View(const reference::RandomExpert& expert) {
    return ExpertView{&expert.layout(), harness_->PlaceBlock(expert.view().block, expert.layout().block_bytes)};
  }

  // y of the backend for `tokens` rows of x (y starts untouched); checks time
  // and that x and the weights are unchanged.
  std::vector<float> RunFfn(const reference::RandomExpert& expert, const std::vector<float>& x, size_t tokens) {
    const std::vector<float> x_before = x;
    const std::vector<std::byte> block_before(expert.view().block,
                                              expert.view().block + expert.layout().block_bytes);
    std::vector<float> y(tokens * expert.layout().hidden, compute_detail::Untouched());
    const TimeNs before = Now();
    const Status status = compute_->ExpertFfn(View(expert), x.data(), tokens, y.data());
    EXPECT_TRUE(status.ok()) << status.message();
    ExpectTimeKept(before, Now(), tokens);
    EXPECT_TRUE(compute_detail::SameBits(x, x_before)) << "input modified";
    EXPECT_EQ(std::memcmp(block_before.data(), expert.view().block, block_before.size()), 0) << "weights modified";
    return y;
  }

  std::vector<float> OracleFfn(const reference::RandomExpert& expert, const std::vector<float>& x, size_t tokens) {
    std::vector<float> y(tokens * expert.layout().hidden, compute_detail::Untouched());
    const Status status = oracle_->ExpertFfn(expert.view(), x.data(), tokens, y.data());
    EXPECT_TRUE(status.ok()) << status.message();
    return y;
  }

  // Checks a backend output against the oracle's, by capability.
  void ExpectOutput(const std::vector<float>& got, const std::vector<float>& oracle, const std::string& what) {
    if (caps().reads_data) {
      EXPECT_TRUE(compute_detail::SameBits(got, oracle)) << what << ": not bit-identical to the CPU oracle";
    } else {
      EXPECT_TRUE(compute_detail::AllUntouched(got)) << what << ": a time-only model wrote its output";
    }
  }

  std::unique_ptr<ComputeHarness> harness_;
  std::unique_ptr<ComputeBackend> compute_;
  std::unique_ptr<CpuCompute> oracle_;
  TimeNs last_ns_ = 0;
};

TEST_P(ComputeConformanceTest, ExpertFfnMatchesTheCpuOracle) {
  EXPECT_NE(caps().name, nullptr);
  EXPECT_GT(std::strlen(caps().name), 0u);
  struct Case {
    std::unique_ptr<reference::RandomExpert> expert;
    std::vector<float> x;
    size_t tokens;
    std::string name;
    std::vector<float> y;
  };
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (DType dtype : compute_detail::kDTypes) {
    for (compute_detail::Shape shape : compute_detail::kShapes) {
      for (size_t tokens : compute_detail::kBatches) {
        Case c;
        c.expert = std::make_unique<reference::RandomExpert>(dtype, shape.hidden, shape.intermediate, ++seed);
        c.x = reference::RandomActivations(tokens * shape.hidden, ++seed);
        c.tokens = tokens;
        c.name = compute_detail::CaseName(dtype, shape, tokens);
        c.y = RunFfn(*c.expert, c.x, tokens);
        ExpectOutput(c.y, OracleFfn(*c.expert, c.x, tokens), c.name);
        cases.push_back(std::move(c));
      }
    }
  }
  // Again in reverse order: no call depends on the ones before it.
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) {
    EXPECT_TRUE(compute_detail::SameBits(RunFfn(*it->expert, it->x, it->tokens), it->y)) << it->name << " repeated";
  }
}

TEST_P(ComputeConformanceTest, GateGemvMatchesTheCpuOracle) {
  const struct {
    uint32_t experts;
    uint32_t hidden;
  } gates[] = {{37, 100}, {8, 64}, {128, 24}};
  uint64_t seed = 50;
  for (const auto& gate : gates) {
    const std::vector<float> weight = reference::RandomActivations(uint64_t{gate.experts} * gate.hidden, ++seed);
    const std::vector<float> bias = reference::RandomActivations(gate.experts, ++seed);
    for (const bool with_bias : {false, true}) {
      for (size_t tokens : compute_detail::kBatches) {
        const std::string what = std::to_string(gate.experts) + "x" + std::to_string(gate.hidden) + " batch " +
                                 std::to_string(tokens) + (with_bias ? " with bias" : " without bias");
        const std::vector<float> x = reference::RandomActivations(tokens * gate.hidden, ++seed);
        const float* b = with_bias ? bias.data() : nullptr;
        std::vector<float> want(tokens * gate.experts, compute_detail::Untouched());
        ASSERT_TRUE(oracle_->GateGemv(weight.data(), b, gate.experts, gate.hidden, x.data(), tokens, want.data()).ok());
        const std::vector<float> inputs_before = x;
        const std::vector<float> weight_before = weight;
        std::vector<float> got(tokens * gate.experts, compute_detail::Untouched());
        const TimeNs before = Now();
        const Status status =
            compute_->GateGemv(weight.data(), b, gate.experts, gate.hidden, x.data(), tokens, got.data());
        ASSERT_TRUE(status.ok()) << what << ": " << status.message();
        ExpectTimeKept(before, Now(), tokens);
        ExpectOutput(got, want, what);
        EXPECT_TRUE(compute_detail::SameBits(x, inputs_before)) << what << ": input modified";
        EXPECT_TRUE(compute_detail::SameBits(weight, weight_before)) << what << ": weights modified";
      }
    }
  }
}

TEST_P(ComputeConformanceTest, ZeroTokensIsANoOp) {
  const reference::RandomExpert expert(DType::kBf16, 32, 48, 3);
  const std::vector<float> x = reference::RandomActivations(32, 4);
  std::vector<float> y(32, compute_detail::Untouched());
  EXPECT_TRUE(compute_->ExpertFfn(View(expert), x.data(), 0, y.data()).ok());
  EXPECT_TRUE(compute_->ExpertFfn(View(expert), nullptr, 0, nullptr).ok());
  EXPECT_TRUE(compute_detail::AllUntouched(y));
  const std::vector<float> weight = reference::RandomActivations(8 * 32, 5);
  std::vector<float> logits(8, compute_detail::Untouched());
  EXPECT_TRUE(compute_->GateGemv(weight.data(), nullptr, 8, 32, x.data(), 0, logits.data()).ok());
  EXPECT_TRUE(compute_->GateGemv(weight.data(), weight.data(), 8, 32, nullptr, 0, nullptr).ok());
  EXPECT_TRUE(compute_detail::AllUntouched(logits));
  Now();
}

TEST_P(ComputeConformanceTest, RejectsBadShapesAndArguments) {
  const reference::RandomExpert expert(DType::kFp32, 32, 48, 6);
  const std::vector<float> x = reference::RandomActivations(2 * 64, 7);
  std::vector<float> y(2 * 64, compute_detail::Untouched());
  const std::byte* block = View(expert).block;
  const ExpertLayout no_hidden = compute_detail::BrokenLayout(0, 16, 0);
  const ExpertLayout no_intermediate = compute_detail::BrokenLayout(16, 0, 0);
  const ExpertLayout unknown_dtype = compute_detail::BrokenLayout(16, 16, 7);
  for (size_t tokens : {size_t{0}, size_t{2}}) {
    SCOPED_TRACE("tokens " + std::to_string(tokens));
    EXPECT_EQ(compute_->ExpertFfn(ExpertView{nullptr, block}, x.data(), tokens, y.data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->ExpertFfn(ExpertView{&no_hidden, block}, x.data(), tokens, y.data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->ExpertFfn(ExpertView{&no_intermediate, block}, x.data(), tokens, y.data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->GateGemv(x.data(), nullptr, 0, 16, x.data(), tokens, y.data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->GateGemv(x.data(), nullptr, 4, 0, x.data(), tokens, y.data()).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(compute_->ExpertFfn(ExpertView{&unknown_dtype, block}, x.data(), 2, y.data()).code(),
            StatusCode::kUnsupported);
  if (caps().reads_data) {
    EXPECT_EQ(compute_->ExpertFfn(ExpertView{&expert.layout(), nullptr}, x.data(), 2, y.data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->ExpertFfn(View(expert), nullptr, 2, y.data()).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->ExpertFfn(View(expert), x.data(), 2, nullptr).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->GateGemv(nullptr, nullptr, 4, 16, x.data(), 2, y.data()).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->GateGemv(x.data(), nullptr, 4, 16, nullptr, 2, y.data()).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_->GateGemv(x.data(), nullptr, 4, 16, x.data(), 2, nullptr).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(compute_detail::AllUntouched(y)) << "a failed call wrote its output";
  Now();
  // Still usable.
  const std::vector<float> ok_y = RunFfn(expert, x, 2);
  ExpectOutput(ok_y, OracleFfn(expert, x, 2), "after errors");
}

// A model that only keeps time runs with no data at all, as the engine calls
// it, and with every operand in memory that faults when touched (the device
// pool of a modelled run is such memory).
TEST_P(ComputeConformanceTest, TimeOnlyModelsTouchNoData) {
  if (caps().reads_data) GTEST_SKIP() << "not applicable: " << caps().name << " reads data (caps)";
  constexpr uint64_t kBytes = 4 << 20;
  auto reserved = SlabPool::CreateReserved(kBytes, kBytes);
  ASSERT_TRUE(reserved.ok()) << reserved.status().message();
  const std::byte* no_access = reserved.value()->SlotData(0);
  const auto* no_access_f32 = reinterpret_cast<const float*>(no_access);
  auto* no_access_out = reinterpret_cast<float*>(reserved.value()->SlotData(0) + kBytes / 2);
  for (DType dtype : compute_detail::kDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    const ExpertLayout layout = ExpertLayout::Make(dtype, 256, 512);
    ASSERT_LE(layout.block_bytes, kBytes);
    TimeNs before = Now();
    ASSERT_TRUE(compute_->ExpertFfn(ExpertView{&layout, nullptr}, nullptr, 4, nullptr).ok());
    ExpectTimeKept(before, Now(), 4);
    before = Now();
    ASSERT_TRUE(compute_->ExpertFfn(ExpertView{&layout, no_access}, no_access_f32, 4, no_access_out).ok());
    ExpectTimeKept(before, Now(), 4);
  }
  TimeNs before = Now();
  ASSERT_TRUE(compute_->GateGemv(nullptr, nullptr, 64, 256, nullptr, 4, nullptr).ok());
  ExpectTimeKept(before, Now(), 4);
  before = Now();
  ASSERT_TRUE(
      compute_->GateGemv(no_access_f32, no_access_f32, 64, 256, no_access_f32, 4, no_access_out).ok());
  ExpectTimeKept(before, Now(), 4);
}

}  // namespace colibri::engine::conformance
