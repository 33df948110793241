// Fuzzes the switch-json importer (RunImporter) over arbitrary bytes; see fuzz_util.h.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return colibri::fuzz::FuzzImporter("switch-json", colibri::fuzz::ShapeSource::kExpertBytes, data, size);
}
