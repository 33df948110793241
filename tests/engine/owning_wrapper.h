// OwningWrapper: a forwarding wrapper (engine/backend_wrappers.h) that owns
// the backends it forwards through, for test harnesses that hand over a
// wrapped backend as one unique_ptr: `bottom` alone (a plain wrapper over
// it), or `top` wrapping `bottom` (e.g. a fault-injecting wrapper over its
// target), calls going to `top`. Destroys `top` before `bottom`.
// Header-only; thread-safety as the wrapped interface.
#pragma once

#include <memory>
#include <utility>

#include "colibri/engine/backend_wrappers.h"

namespace colibri::engine::testing_util {

template <typename Wrapper, typename Interface>
class OwningWrapper final : public Wrapper {
 public:
  explicit OwningWrapper(std::unique_ptr<Interface> bottom, std::unique_ptr<Interface> top = nullptr)
      : Wrapper(top != nullptr ? top.get() : bottom.get()), bottom_(std::move(bottom)), top_(std::move(top)) {}

 private:
  std::unique_ptr<Interface> bottom_;
  std::unique_ptr<Interface> top_;  // declared last: destroyed first
};

using OwningStorage = OwningWrapper<StorageWrapper, StorageBackend>;
using OwningTransfer = OwningWrapper<TransferWrapper, TransferBackend>;
using OwningCompute = OwningWrapper<ComputeWrapper, ComputeBackend>;

}  // namespace colibri::engine::testing_util
