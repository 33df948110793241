// Fuzzes the run store's BLOB decoders, which parse bytes read back from a
// SQLite file that may be corrupt or hostile: DecodeSamples, DecodeCounts
// (reports/src/sample_codec.h) and LatencyHistogram::Deserialize. The first
// input byte selects the decoder (mod 3), the rest is the blob. A kCorruption
// Status is fine; crashes, leaks, undefined behaviour and unbounded
// allocation are the bugs, and so is an accepted blob that does not
// round-trip: re-encoding the decoded values and decoding again must give the
// same values, and a histogram's Serialize() must Deserialize to an equal
// histogram (count, min, max, sum, buckets, every percentile 1..100) and be
// the very bytes accepted (the form is canonical: every field is checked).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string_view>
#include <vector>

#include "colibri/reports/latency_histogram.h"
#include "sample_codec.h"

namespace {

using colibri::StatusCode;
using colibri::reports::LatencyHistogram;

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "run store blob decoder broke its contract: %s\n", what);
  __builtin_trap();
}

// Re-encoding costs ~10 bytes a value on top of the decoded 8, and decoding
// again as much once more; above this many values (reachable only by a
// hand-made zstd frame of RLE blocks, ~32768 varint bytes per 4 input bytes)
// the round trip would exceed the fuzzer's -rss_limit_mb, so it checks the
// decode alone.
constexpr size_t kMaxRoundTripValues = size_t{1} << 24;

template <typename T, typename EncodeFn, typename DecodeFn>
void CheckCodec(std::string_view blob, EncodeFn encode, DecodeFn decode) {
  auto decoded = decode(blob);
  if (!decoded.ok()) {
    if (decoded.status().code() != StatusCode::kCorruption) Violation("a decode error other than Corruption");
    return;
  }
  const std::vector<T>& values = *decoded;
  if (values.size() > kMaxRoundTripValues) return;
  auto encoded = encode(std::span<const T>(values));
  if (!encoded.ok()) Violation("re-encoding decoded values failed");
  auto again = decode(*encoded);
  if (!again.ok()) Violation("a re-encoded blob does not decode");
  if (*again != values) Violation("a re-encoded blob decodes to different values");
}

void CheckHistogram(std::string_view blob) {
  auto h = LatencyHistogram::Deserialize(blob);
  if (!h.ok()) {
    if (h.status().code() != StatusCode::kCorruption) Violation("a Deserialize error other than Corruption");
    return;
  }
  const std::string bytes = h->Serialize();
  if (bytes != blob) Violation("Serialize() of an accepted histogram differs from the accepted bytes");
  auto again = LatencyHistogram::Deserialize(bytes);
  if (!again.ok()) Violation("Serialize() of an accepted histogram does not Deserialize");
  if (again->count() != h->count() || again->min() != h->min() || again->max() != h->max() ||
      again->sum() != h->sum()) {
    Violation("a re-serialized histogram has a different count, min, max or sum");
  }
  for (int p = 1; p <= 100; ++p) {
    const int64_t v = h->Percentile(p);
    if (again->Percentile(p) != v) Violation("a re-serialized histogram has a different percentile");
    if (h->count() > 0 && (v < h->min() || v > h->max())) Violation("a percentile outside [min, max]");
  }
  const auto buckets = h->NonEmptyBuckets();
  const auto buckets_again = again->NonEmptyBuckets();
  if (buckets.size() != buckets_again.size()) Violation("a re-serialized histogram has other buckets");
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].upper_ns != buckets_again[i].upper_ns || buckets[i].count != buckets_again[i].count) {
      Violation("a re-serialized histogram has other buckets");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace colibri::reports;
  if (size == 0) return 0;
  const std::string_view blob(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      CheckCodec<int64_t>(blob, EncodeSamples, DecodeSamples);
      break;
    case 1:
      CheckCodec<uint64_t>(blob, EncodeCounts, DecodeCounts);
      break;
    default:
      CheckHistogram(blob);
      break;
  }
  return 0;
}
