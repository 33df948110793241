#include "record_codec.h"

#include <cstring>

#include "wire.h"

namespace colibri::traces {
namespace {

using wire::PutTag;
using wire::PutVarint;

enum Field : uint32_t {
  kRequestId = 1,
  kPassId = 2,
  kLayer = 3,
  kPrefill = 4,
  kFirstPosition = 5,
  kTokenCount = 6,
  kPositions = 7,
  kExpertIds = 8,
  kGateWeights = 9,
  kRouterLogits = 10,
  kTokenIds = 11,
  kHiddenStates = 12,
  kPhysicalExpertIds = 13,
  kCacheOutcomes = 14,
  kArrivalNs = 15,
  kStartNs = 16,
  kEndNs = 17,
};

void PutVarintField(std::string* out, uint32_t field, uint64_t v) {
  if (v == 0) return;  // proto3 default: omitted
  PutTag(out, field, wire::kVarint);
  PutVarint(out, v);
}

void PutOptionalField(std::string* out, uint32_t field, const std::optional<uint64_t>& v) {
  if (!v) return;
  PutTag(out, field, wire::kVarint);
  PutVarint(out, *v);
}

void PutBytesField(std::string* out, uint32_t field, const void* data, size_t n) {
  if (n == 0) return;
  PutTag(out, field, wire::kLengthDelimited);
  PutVarint(out, n);
  out->append(static_cast<const char*>(data), n);
}

void PutIds(std::string* out, uint32_t field, const std::vector<uint32_t>& ids, uint32_t width) {
  if (ids.empty()) return;
  PutTag(out, field, wire::kLengthDelimited);
  PutVarint(out, ids.size() * width);
  const size_t start = out->size();
  out->resize(start + ids.size() * width);
  char* dst = out->data() + start;
  if (width == 1) {
    for (size_t i = 0; i < ids.size(); ++i) dst[i] = static_cast<char>(ids[i]);
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::memcpy(dst + i * width, &ids[i], width);  // little-endian
  }
}

template <typename T>
void PutPackedVarints(std::string* out, uint32_t field, const std::vector<T>& values) {
  if (values.empty()) return;
  size_t bytes = 0;
  for (T v : values) bytes += wire::VarintLength(v);
  PutTag(out, field, wire::kLengthDelimited);
  PutVarint(out, bytes);
  for (T v : values) PutVarint(out, v);
}

bool PositionsContiguous(const std::vector<uint64_t>& positions) {
  for (size_t i = 1; i < positions.size(); ++i) {
    if (positions[i] != positions[0] + i) return false;
  }
  return true;
}

// ---- decoding ----

struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
};

Status FieldError(uint32_t field, const char* what) {
  return Status::Corruption("record field " + std::to_string(field) + ": " + what);
}

Status ReadIds(const uint8_t* p, size_t n, uint32_t width, uint32_t field, std::vector<uint32_t>* ids) {
  if (n % width != 0) return FieldError(field, "id bytes not a multiple of the id width");
  const size_t count = n / width;
  ids->resize(count);
  if (width == 1) {
    for (size_t i = 0; i < count; ++i) (*ids)[i] = p[i];
  } else {
    for (size_t i = 0; i < count; ++i) {
      uint32_t v = 0;
      std::memcpy(&v, p + i * width, width);
      (*ids)[i] = v;
    }
  }
  return Status::Ok();
}

// Appends floats from a packed (wire type 2) or single (wire type 5) encoding.
Status ReadFloats(Cursor* c, uint32_t type, uint32_t field, std::vector<float>* out) {
  if (type == wire::kFixed32) {
    if (c->end - c->p < 4) return FieldError(field, "float runs past the record end");
    float f;
    std::memcpy(&f, c->p, 4);
    out->push_back(f);
    c->p += 4;
    return Status::Ok();
  }
  uint64_t n;
  if (!wire::GetVarint(&c->p, c->end, &n) || n > static_cast<uint64_t>(c->end - c->p) || n % 4 != 0) {
    return FieldError(field, "bad packed float length");
  }
  const size_t old = out->size();
  out->resize(old + n / 4);
  if (n > 0) std::memcpy(out->data() + old, c->p, n);
  c->p += n;
  return Status::Ok();
}

// Appends varints from a packed (wire type 2) or single (wire type 0) encoding.
template <typename T>
Status ReadVarints(Cursor* c, uint32_t type, uint32_t field, std::vector<T>* out) {
  uint64_t v;
  if (type == wire::kVarint) {
    if (!wire::GetVarint(&c->p, c->end, &v)) return FieldError(field, "bad varint");
    out->push_back(static_cast<T>(v));
    return Status::Ok();
  }
  uint64_t n;
  if (!wire::GetVarint(&c->p, c->end, &n) || n > static_cast<uint64_t>(c->end - c->p)) {
    return FieldError(field, "bad packed length");
  }
  const uint8_t* stop = c->p + n;
  while (c->p < stop) {
    if (!wire::GetVarint(&c->p, stop, &v)) return FieldError(field, "bad packed varint");
    out->push_back(static_cast<T>(v));
  }
  return Status::Ok();
}

Status ExpectType(uint32_t field, uint32_t type, uint32_t expected) {
  if (type == expected) return Status::Ok();
  return FieldError(field, "unexpected wire type");
}

Status SkipField(Cursor* c, uint32_t field, uint32_t type) {
  uint64_t v;
  switch (type) {
    case wire::kVarint:
      if (!wire::GetVarint(&c->p, c->end, &v)) return FieldError(field, "bad varint in unknown field");
      return Status::Ok();
    case wire::kFixed64:
      if (c->end - c->p < 8) return FieldError(field, "unknown fixed64 runs past the record end");
      c->p += 8;
      return Status::Ok();
    case wire::kFixed32:
      if (c->end - c->p < 4) return FieldError(field, "unknown fixed32 runs past the record end");
      c->p += 4;
      return Status::Ok();
    case wire::kLengthDelimited:
      if (!wire::GetVarint(&c->p, c->end, &v) || v > static_cast<uint64_t>(c->end - c->p)) {
        return FieldError(field, "unknown field length runs past the record end");
      }
      c->p += v;
      return Status::Ok();
    default:
      return FieldError(field, "unsupported wire type");
  }
}

struct Scalars {
  uint64_t first_position = 0;
  uint64_t token_count = 0;
  const uint8_t* expert_ids = nullptr;
  size_t expert_ids_bytes = 0;
  const uint8_t* physical_ids = nullptr;
  size_t physical_ids_bytes = 0;
};

Status ReadBytes(Cursor* c, uint32_t field, uint32_t type, const uint8_t** data, size_t* n) {
  COLIBRI_RETURN_IF_ERROR(ExpectType(field, type, wire::kLengthDelimited));
  uint64_t len;
  if (!wire::GetVarint(&c->p, c->end, &len) || len > static_cast<uint64_t>(c->end - c->p)) {
    return FieldError(field, "length runs past the record end");
  }
  *data = c->p;
  *n = len;
  c->p += len;
  return Status::Ok();
}

Status ReadScalar(Cursor* c, uint32_t field, uint32_t type, uint64_t* v) {
  COLIBRI_RETURN_IF_ERROR(ExpectType(field, type, wire::kVarint));
  if (!wire::GetVarint(&c->p, c->end, v)) return FieldError(field, "bad varint");
  return Status::Ok();
}

Status DecodeField(Cursor* c, uint32_t field, uint32_t type, Scalars* s, TraceRecord* r) {
  uint64_t v = 0;
  const uint8_t* data = nullptr;
  size_t n = 0;
  switch (field) {
    case kRequestId:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      r->request_id = v;
      return Status::Ok();
    case kPassId:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      r->pass_id = v;
      return Status::Ok();
    case kLayer:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      if (v > UINT32_MAX) return FieldError(field, "layer exceeds 32 bits");
      r->layer = static_cast<uint32_t>(v);
      return Status::Ok();
    case kPrefill:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      r->prefill = v != 0;
      return Status::Ok();
    case kFirstPosition:
      return ReadScalar(c, field, type, &s->first_position);
    case kTokenCount:
      return ReadScalar(c, field, type, &s->token_count);
    case kPositions:
      return ReadVarints(c, type, field, &r->positions);
    case kExpertIds:
      return ReadBytes(c, field, type, &s->expert_ids, &s->expert_ids_bytes);
    case kGateWeights:
      return ReadFloats(c, type, field, &r->gate_weights);
    case kRouterLogits:
      return ReadFloats(c, type, field, &r->router_logits);
    case kTokenIds:
      return ReadVarints(c, type, field, &r->token_ids);
    case kHiddenStates:
      COLIBRI_RETURN_IF_ERROR(ReadBytes(c, field, type, &data, &n));
      r->hidden_states.assign(reinterpret_cast<const char*>(data), n);
      return Status::Ok();
    case kPhysicalExpertIds:
      return ReadBytes(c, field, type, &s->physical_ids, &s->physical_ids_bytes);
    case kCacheOutcomes:
      COLIBRI_RETURN_IF_ERROR(ReadBytes(c, field, type, &data, &n));
      r->cache_outcomes.assign(data, data + n);
      return Status::Ok();
    case kArrivalNs:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      r->arrival_ns = v;
      return Status::Ok();
    case kStartNs:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      r->start_ns = v;
      return Status::Ok();
    case kEndNs:
      COLIBRI_RETURN_IF_ERROR(ReadScalar(c, field, type, &v));
      r->end_ns = v;
      return Status::Ok();
    default:
      return SkipField(c, field, type);
  }
}

}  // namespace

void EncodeRecord(const TraceRecord& r, uint32_t id_width, std::string* out) {
  PutVarintField(out, kRequestId, r.request_id);
  PutVarintField(out, kPassId, r.pass_id);
  PutVarintField(out, kLayer, r.layer);
  PutVarintField(out, kPrefill, r.prefill ? 1 : 0);
  PutVarintField(out, kFirstPosition, r.positions.empty() ? 0 : r.positions[0]);
  PutVarintField(out, kTokenCount, r.positions.size());
  if (!PositionsContiguous(r.positions)) PutPackedVarints(out, kPositions, r.positions);
  PutIds(out, kExpertIds, r.expert_ids, id_width);
  PutBytesField(out, kGateWeights, r.gate_weights.data(), r.gate_weights.size() * sizeof(float));
  PutBytesField(out, kRouterLogits, r.router_logits.data(), r.router_logits.size() * sizeof(float));
  PutPackedVarints(out, kTokenIds, r.token_ids);
  PutBytesField(out, kHiddenStates, r.hidden_states.data(), r.hidden_states.size());
  PutIds(out, kPhysicalExpertIds, r.physical_expert_ids, id_width);
  PutBytesField(out, kCacheOutcomes, r.cache_outcomes.data(), r.cache_outcomes.size());
  PutOptionalField(out, kArrivalNs, r.arrival_ns);
  PutOptionalField(out, kStartNs, r.start_ns);
  PutOptionalField(out, kEndNs, r.end_ns);
}

Status DecodeRecord(const uint8_t* data, size_t n, uint32_t id_width, TraceRecord* r) {
  r->clear();
  Cursor c{data, data + n};
  Scalars s;
  while (c.p < c.end) {
    uint64_t tag;
    if (!wire::GetVarint(&c.p, c.end, &tag)) return Status::Corruption("bad field tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    if (field == 0 || tag > UINT32_MAX) return Status::Corruption("bad field number");
    COLIBRI_RETURN_IF_ERROR(DecodeField(&c, field, static_cast<uint32_t>(tag & 7), &s, r));
  }
  if (s.token_count > (1u << 24)) return FieldError(kTokenCount, "token_count above 16M");
  if (r->positions.empty()) {
    r->positions.resize(s.token_count);
    for (size_t i = 0; i < s.token_count; ++i) r->positions[i] = s.first_position + i;
  } else if (r->positions.size() != s.token_count) {
    return FieldError(kPositions, "positions count differs from token_count");
  }
  COLIBRI_RETURN_IF_ERROR(ReadIds(s.expert_ids, s.expert_ids_bytes, id_width, kExpertIds, &r->expert_ids));
  return ReadIds(s.physical_ids, s.physical_ids_bytes, id_width, kPhysicalExpertIds, &r->physical_expert_ids);
}

}  // namespace colibri::traces
