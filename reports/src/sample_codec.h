// Sample codec (private to reports/): sequences of int64 samples, or uint64
// counts, as zigzag-delta varints compressed with zstd (level 3), for the run
// store's BLOB columns.
//
// Blob layout (little-endian): the magic "ZVI1", u64 value count, u64 varint
// bytes, then one zstd frame holding the varints. Each value is stored as the
// zigzag of its wrapping difference from the previous value (the first from
// 0), so every int64 / uint64 round-trips exactly and slowly varying
// sequences (latencies, per-expert counts) take one or two bytes a value.
//
// Thread-safety: free functions on values. Errors: Encode* return kInternal
// only when zstd fails (out of memory); Decode* return kCorruption naming
// what is wrong and never read out of bounds or crash on a malformed blob.
// Decoding allocates at most what a valid blob of that size could hold.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/status.h"

namespace colibri::reports {

Result<std::string> EncodeSamples(std::span<const int64_t> values);
Result<std::vector<int64_t>> DecodeSamples(std::string_view blob);

// The same format for unsigned counts (e.g. one layer's selections per expert).
Result<std::string> EncodeCounts(std::span<const uint64_t> counts);
Result<std::vector<uint64_t>> DecodeCounts(std::string_view blob);

}  // namespace colibri::reports
