// The forwarding wrappers (engine/backend_wrappers.h): every virtual method of
// each interface, the defaulted ones included, reaches the target with its
// arguments and returns the target's result; a subclass that overrides one
// method changes only that one. (The storage, transfer and compute
// conformance suites also run over a wrapper that overrides nothing.)
#include "colibri/engine/backend_wrappers.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace colibri::engine {
namespace {

// Records the calls it gets; answers each with something recognisable.
class RecordingStorage final : public StorageBackend {
 public:
  const StorageCaps& caps() const override { return caps_; }
  const StorageCounters& counters() const override { return counters_; }
  Status Submit(const ReadRequest& request) override {
    calls.push_back("Submit " + std::to_string(request.tag));
    return Status::IoError("submit answer");
  }
  Status Poll(bool wait, std::vector<ReadCompletion>* out) override {
    calls.push_back(wait ? "Poll wait" : "Poll");
    out->push_back(ReadCompletion{77, Status::Ok(), 4096, 1, 2});
    return Status::Ok();
  }
  size_t outstanding() const override { return 3; }
  Status RegisterBuffers(const std::vector<MemoryRegion>& regions) override {
    calls.push_back("RegisterBuffers " + std::to_string(regions.size()));
    return Status::Unsupported("register answer");
  }
  const std::string& warning() const override { return warning_; }

  std::vector<std::string> calls;

 private:
  StorageCaps caps_{"recording", 512, 9, false, true};
  StorageCounters counters_{5, 6, 7, 8, 9};
  std::string warning_ = "a warning";
};

TEST(StorageWrapperTest, ForwardsEveryMethod) {
  RecordingStorage target;
  StorageWrapper wrapper(&target);
  EXPECT_EQ(wrapper.target(), &target);
  EXPECT_EQ(&wrapper.caps(), &target.caps());
  EXPECT_EQ(&wrapper.counters(), &target.counters());
  EXPECT_EQ(&wrapper.warning(), &target.warning());
  EXPECT_EQ(wrapper.outstanding(), 3u);
  EXPECT_EQ(wrapper.Submit({0, 4096, nullptr, 41}).message(), "submit answer");
  std::vector<ReadCompletion> out;
  ASSERT_TRUE(wrapper.Poll(true, &out).ok());
  ASSERT_TRUE(wrapper.Poll(false, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].tag, 77u);
  char region[64];
  EXPECT_EQ(wrapper.RegisterBuffers({{region, 64}, {region, 32}}).code(), StatusCode::kUnsupported);
  EXPECT_EQ(target.calls, (std::vector<std::string>{"Submit 41", "Poll wait", "Poll", "RegisterBuffers 2"}));
}

// The defaulted RegisterBuffers reaches a target that keeps the default.
class PlainStorage final : public StorageBackend {
 public:
  const StorageCaps& caps() const override { return caps_; }
  const StorageCounters& counters() const override { return counters_; }
  Status Submit(const ReadRequest&) override { return Status::Ok(); }
  Status Poll(bool, std::vector<ReadCompletion>*) override { return Status::Ok(); }
  size_t outstanding() const override { return 0; }
  const std::string& warning() const override { return warning_; }

 private:
  StorageCaps caps_;
  StorageCounters counters_;
  std::string warning_;
};

// A subclass overriding one method: the rest still forwards.
class RenamingStorage final : public StorageWrapper {
 public:
  using StorageWrapper::StorageWrapper;
  Status Submit(const ReadRequest& request) override {
    ReadRequest renamed = request;
    renamed.tag += 1000;
    return target()->Submit(renamed);
  }
};

TEST(StorageWrapperTest, ASubclassOverridesOneMethod) {
  RecordingStorage target;
  RenamingStorage wrapper(&target);
  (void)wrapper.Submit({0, 4096, nullptr, 1});
  std::vector<ReadCompletion> out;
  ASSERT_TRUE(wrapper.Poll(false, &out).ok());
  EXPECT_EQ(target.calls, (std::vector<std::string>{"Submit 1001", "Poll"}));
  EXPECT_STREQ(wrapper.caps().name, "recording");

  PlainStorage plain;
  StorageWrapper over_plain(&plain);
  char region[64];
  EXPECT_TRUE(over_plain.RegisterBuffers({{region, 64}}).ok());
}

class RecordingTransfer final : public TransferBackend {
 public:
  const TransferCaps& caps() const override { return caps_; }
  const TransferCounters& counters() const override { return counters_; }
  Result<std::unique_ptr<SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    calls.push_back("CreateDevicePool " + std::to_string(budget_bytes) + " " + std::to_string(slot_bytes));
    return SlabPool::Create(budget_bytes, slot_bytes);
  }
  Result<std::unique_ptr<SlabPool>> CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    calls.push_back("CreateHostPool " + std::to_string(budget_bytes) + " " + std::to_string(slot_bytes));
    return Status::InvalidArgument("host pool answer");
  }
  Status Copy(std::byte*, const std::byte*, uint64_t bytes, uint64_t tag) override {
    calls.push_back("Copy " + std::to_string(bytes) + " " + std::to_string(tag));
    return Status::Ok();
  }
  Status Poll(bool wait, std::vector<TransferCompletion>* out) override {
    calls.push_back(wait ? "Poll wait" : "Poll");
    out->push_back(TransferCompletion{5, Status::Ok(), 10, 0, 1});
    return Status::Ok();
  }
  size_t outstanding() const override { return 4; }

  std::vector<std::string> calls;

 private:
  TransferCaps caps_{"recording", false, false};
  TransferCounters counters_{1, 2};
};

TEST(TransferWrapperTest, ForwardsEveryMethod) {
  RecordingTransfer target;
  TransferWrapper wrapper(&target);
  EXPECT_EQ(wrapper.target(), &target);
  EXPECT_EQ(&wrapper.caps(), &target.caps());
  EXPECT_EQ(&wrapper.counters(), &target.counters());
  EXPECT_EQ(wrapper.outstanding(), 4u);
  auto device = wrapper.CreateDevicePool(8192, 4096);
  ASSERT_TRUE(device.ok()) << device.status().message();
  EXPECT_EQ(device.value()->slot_count(), 2u);
  EXPECT_EQ(wrapper.CreateHostPool(4096, 4096).status().message(), "host pool answer");
  std::byte bytes[2] = {};
  ASSERT_TRUE(wrapper.Copy(&bytes[0], &bytes[1], 1, 6).ok());
  std::vector<TransferCompletion> out;
  ASSERT_TRUE(wrapper.Poll(true, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 5u);
  EXPECT_EQ(target.calls, (std::vector<std::string>{"CreateDevicePool 8192 4096", "CreateHostPool 4096 4096",
                                                    "Copy 1 6", "Poll wait"}));
}

// The defaulted CreateHostPool reaches a target that keeps the default (a heap pool).
class PlainTransfer final : public TransferBackend {
 public:
  const TransferCaps& caps() const override { return caps_; }
  const TransferCounters& counters() const override { return counters_; }
  Result<std::unique_ptr<SlabPool>> CreateDevicePool(uint64_t, uint64_t) override {
    return Status::Unsupported("no device");
  }
  Status Copy(std::byte*, const std::byte*, uint64_t, uint64_t) override { return Status::Ok(); }
  Status Poll(bool, std::vector<TransferCompletion>*) override { return Status::Ok(); }
  size_t outstanding() const override { return 0; }

 private:
  TransferCaps caps_;
  TransferCounters counters_;
};

TEST(TransferWrapperTest, TheDefaultedHostPoolIsTheTargets) {
  PlainTransfer target;
  TransferWrapper wrapper(&target);
  auto host = wrapper.CreateHostPool(3 * 4096, 4096);
  ASSERT_TRUE(host.ok()) << host.status().message();
  EXPECT_EQ(host.value()->slot_count(), 3u);
  EXPECT_EQ(wrapper.CreateDevicePool(4096, 4096).status().code(), StatusCode::kUnsupported);
}

class RecordingCompute final : public ComputeBackend {
 public:
  const ComputeCaps& caps() const override { return caps_; }
  Status ExpertFfn(const ExpertView&, const float* x, size_t tokens, float* y) override {
    calls.push_back("ExpertFfn " + std::to_string(tokens));
    if (y != nullptr) y[0] = x[0] * 2;
    return Status::Ok();
  }
  Status GateGemv(const float*, const float*, uint32_t experts, uint32_t hidden, const float*, size_t tokens,
                  float*) override {
    calls.push_back("GateGemv " + std::to_string(experts) + " " + std::to_string(hidden) + " " +
                    std::to_string(tokens));
    return Status::Internal("gate answer");
  }

  std::vector<std::string> calls;

 private:
  ComputeCaps caps_{"recording", true, true};
};

// A subclass overriding one method: GateGemv still forwards.
class FailingFfn final : public ComputeWrapper {
 public:
  using ComputeWrapper::ComputeWrapper;
  Status ExpertFfn(const ExpertView&, const float*, size_t, float*) override { return Status::Internal("no"); }
};

TEST(ComputeWrapperTest, ForwardsEveryMethodAndASubclassOverridesOne) {
  RecordingCompute target;
  ComputeWrapper wrapper(&target);
  EXPECT_EQ(wrapper.target(), &target);
  EXPECT_EQ(&wrapper.caps(), &target.caps());
  const float x = 1.5f;
  float y = 0;
  ASSERT_TRUE(wrapper.ExpertFfn(ExpertView{}, &x, 1, &y).ok());
  EXPECT_EQ(y, 3.0f);
  EXPECT_EQ(wrapper.GateGemv(nullptr, nullptr, 8, 16, nullptr, 2, nullptr).message(), "gate answer");
  FailingFfn failing(&target);
  EXPECT_EQ(failing.ExpertFfn(ExpertView{}, &x, 1, &y).code(), StatusCode::kInternal);
  EXPECT_EQ(failing.GateGemv(nullptr, nullptr, 4, 4, nullptr, 1, nullptr).code(), StatusCode::kInternal);
  EXPECT_EQ(target.calls, (std::vector<std::string>{"ExpertFfn 1", "GateGemv 8 16 2", "GateGemv 4 4 1"}));
}

}  // namespace
}  // namespace colibri::engine
