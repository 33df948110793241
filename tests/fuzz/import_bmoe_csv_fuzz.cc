// Fuzzes the bmoe-csv importer (RunImporter) over arbitrary bytes; see fuzz_util.h.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return colibri::fuzz::FuzzImporter("bmoe-csv", colibri::fuzz::ShapeSource::kInput, data, size);
}
