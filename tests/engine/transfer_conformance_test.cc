// The TransferBackend contract (transfer_conformance.h) run against the real
// backends: CpuTransfer on a RealEventLoop (add a factory to kHarnesses to
// enroll another; CudaTransfer runs the same contract in tests/cuda), and what only CpuTransfer
// promises: a copy completes inside Copy(), so completions come in
// submission order and need no waiting.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "colibri/engine/backend_wrappers.h"
#include "colibri/engine/event_loop.h"
#include "colibri/engine/transfer.h"
#include "transfer_conformance.h"

namespace colibri::engine {
namespace {

using conformance::TransferConformanceTest;
using conformance::TransferHarness;
using conformance::TransferHarnessFactory;

// CpuTransfer keeping time on a real event loop's monotonic clock.
class CpuHarness final : public TransferHarness {
 public:
  Result<std::unique_ptr<TransferBackend>> Make() override { return MakeCpuTransfer(&loop_); }
  const Clock& clock() const override { return loop_; }

 private:
  RealEventLoop loop_;
};

// CpuTransfer inside a TransferWrapper that overrides nothing (backend_wrappers.h).
class WrappedCpuHarness final : public TransferHarness {
 public:
  Result<std::unique_ptr<TransferBackend>> Make() override {
    return std::unique_ptr<TransferBackend>(new OwningTransfer(MakeCpuTransfer(&loop_)));
  }
  const Clock& clock() const override { return loop_; }

 private:
  RealEventLoop loop_;
};

const TransferHarnessFactory kHarnesses[] = {
    {"cpu", [] { return std::unique_ptr<TransferHarness>(new CpuHarness()); }},
    {"cpu_wrapped", [] { return std::unique_ptr<TransferHarness>(new WrappedCpuHarness()); }},
};

INSTANTIATE_TEST_SUITE_P(Backends, TransferConformanceTest, ::testing::ValuesIn(kHarnesses),
                         conformance::TransferHarnessName);

// CpuTransfer's own promise beyond the contract: copies complete at once, so a
// non-waiting poll right after them hands all over, in submission order.
TEST(CpuTransferTest, CompletesAtOnceInSubmissionOrder) {
  RealEventLoop loop;
  auto transfer = MakeCpuTransfer(&loop);
  EXPECT_STREQ(transfer->caps().name, "cpu");
  EXPECT_TRUE(transfer->caps().device_is_host);
  EXPECT_TRUE(transfer->caps().delivers_data);
  std::vector<std::byte> src(64), dst(64);
  for (uint64_t i = 0; i < 20; ++i) {
    src[i] = std::byte{static_cast<unsigned char>(i + 1)};
    ASSERT_TRUE(transfer->Copy(dst.data() + i, src.data() + i, 20 - i, 100 - i).ok());
    EXPECT_EQ(dst[i], src[i]) << "copy " << i << " not done when Copy() returned";
  }
  std::vector<TransferCompletion> done;
  ASSERT_TRUE(transfer->Poll(false, &done).ok());
  ASSERT_EQ(done.size(), 20u);
  for (uint64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(done[i].tag, 100 - i);
    EXPECT_EQ(done[i].bytes, 20 - i);
  }
  EXPECT_EQ(transfer->outstanding(), 0u);
}

}  // namespace
}  // namespace colibri::engine
