#include <string>

#include "colibri/engine/storage.h"

namespace colibri::engine {

const std::vector<std::string>& StorageBackendNames() {
  static const std::vector<std::string> names = {"auto", "uring", "pread"};
  return names;
}

Result<std::unique_ptr<StorageBackend>> OpenStorage(const std::string& name, const std::string& path,
                                                    const StorageOptions& options, std::string* fallback) {
  if (name == "pread") return OpenPreadStorage(path, options);
  if (name != "auto" && name != "uring") {
    return Status::InvalidArgument("unknown storage backend '" + name + "' (auto, uring or pread)");
  }
  auto uring = OpenUringStorage(path, options);
  if (uring.ok() || name == "uring" || uring.status().code() != StatusCode::kUnsupported) return uring;
  if (fallback != nullptr) *fallback = "io_uring unavailable (" + uring.status().message() + "); using pread";
  return OpenPreadStorage(path, options);
}

}  // namespace colibri::engine
