// Encodes and decodes one Record message (traces/proto/colibri_trace.proto)
// in protobuf wire format, by hand, for speed on the hot read path. Tests
// check both directions against libprotobuf. Internal to traces/.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

// Appends the encoding of `record` to `out`. Ids are written `id_width` bytes each.
void EncodeRecord(const TraceRecord& record, uint32_t id_width, std::string* out);

// Decodes [data, data+n) into `record` (cleared first). Errors name the field;
// the caller adds the byte offset and record index.
Status DecodeRecord(const uint8_t* data, size_t n, uint32_t id_width, TraceRecord* record);

}  // namespace colibri::traces
