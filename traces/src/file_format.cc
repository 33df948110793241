#include "file_format.h"

#include <cstring>

#include "colibri/traces/crc32c.h"
#include "colibri_trace.pb.h"
#include "wire.h"

namespace colibri::traces {
namespace {

namespace pb = ::colibri::trace::v1;

void ToProto(const ModelShape& s, pb::ModelShape* out) {
  out->set_model_name(s.model_name);
  for (uint32_t id : s.moe_layer_ids) out->add_moe_layer_ids(id);
  out->set_experts_per_layer(s.experts_per_layer);
  out->set_top_k(s.top_k);
  for (uint64_t b : s.expert_bytes) out->add_expert_bytes(b);
  for (uint64_t b : s.dense_bytes) out->add_dense_bytes(b);
  out->set_dtype(s.dtype);
  out->set_hidden_size(s.hidden_size);
  out->set_hidden_dtype(static_cast<pb::HiddenDtype>(s.hidden_dtype));
  out->set_total_layers(s.total_layers);
  for (const AttentionShape& a : s.attention) {
    pb::AttentionLayer* layer = out->add_attention();
    layer->set_q_heads(a.q_heads);
    layer->set_kv_heads(a.kv_heads);
    layer->set_key_dim(a.key_dim);
    layer->set_value_dim(a.value_dim);
    layer->set_window(a.window);
  }
  out->set_kv_element_bytes(s.kv_element_bytes);
  out->set_other_dense_bytes(s.other_dense_bytes);
}

void FromProto(const pb::ModelShape& s, ModelShape* out) {
  out->model_name = s.model_name();
  out->moe_layer_ids.assign(s.moe_layer_ids().begin(), s.moe_layer_ids().end());
  out->experts_per_layer = s.experts_per_layer();
  out->top_k = s.top_k();
  out->expert_bytes.assign(s.expert_bytes().begin(), s.expert_bytes().end());
  out->dense_bytes.assign(s.dense_bytes().begin(), s.dense_bytes().end());
  out->dtype = s.dtype();
  out->hidden_size = s.hidden_size();
  out->hidden_dtype = static_cast<HiddenDtype>(s.hidden_dtype());
  out->total_layers = s.total_layers();
  out->attention.clear();
  for (const pb::AttentionLayer& a : s.attention()) {
    out->attention.push_back({a.q_heads(), a.kv_heads(), a.key_dim(), a.value_dim(), a.window()});
  }
  out->kv_element_bytes = s.kv_element_bytes();
  out->other_dense_bytes = s.other_dense_bytes();
}

void ToProto(const Provenance& p, pb::Provenance* out) {
  out->set_source_engine(p.source_engine);
  out->set_capture_date(p.capture_date);
  out->set_importer(p.importer);
  out->set_importer_version(p.importer_version);
  for (const SourceFile& f : p.sources) {
    pb::SourceFile* sf = out->add_sources();
    sf->set_path(f.path);
    sf->set_sha256(f.sha256);
    sf->set_size_bytes(f.size_bytes);
  }
  out->set_license(p.license);
  out->set_attribution(p.attribution);
  out->set_notes(p.notes);
}

void FromProto(const pb::Provenance& p, Provenance* out) {
  out->source_engine = p.source_engine();
  out->capture_date = p.capture_date();
  out->importer = p.importer();
  out->importer_version = p.importer_version();
  out->sources.clear();
  for (const pb::SourceFile& f : p.sources()) out->sources.push_back({f.path(), f.sha256(), f.size_bytes()});
  out->license = p.license();
  out->attribution = p.attribution();
  out->notes = p.notes();
}

}  // namespace

std::string EncodeHeader(const TraceHeader& header) {
  pb::TraceHeader msg;
  ToProto(header.shape, msg.mutable_shape());
  ToProto(header.provenance, msg.mutable_provenance());
  msg.set_compression(static_cast<pb::Compression>(header.compression));
  msg.set_expert_id_width_bytes(header.expert_id_width_bytes);
  std::string out;
  msg.SerializeToString(&out);
  return out;
}

Status DecodeHeader(const uint8_t* data, size_t n, TraceHeader* header) {
  pb::TraceHeader msg;
  if (!msg.ParseFromArray(data, static_cast<int>(n))) return Status::Corruption("trace header does not parse");
  FromProto(msg.shape(), &header->shape);
  FromProto(msg.provenance(), &header->provenance);
  if (msg.compression() != pb::COMPRESSION_NONE && msg.compression() != pb::COMPRESSION_ZSTD) {
    return Status::Unsupported("unknown compression " + std::to_string(msg.compression()));
  }
  header->compression = static_cast<Compression>(msg.compression());
  header->expert_id_width_bytes = msg.expert_id_width_bytes();
  const uint32_t w = header->expert_id_width_bytes;
  if (w != 1 && w != 2 && w != 4) return Status::Corruption("expert_id_width_bytes " + std::to_string(w) + " not 1, 2 or 4");
  if (w < ExpertIdWidthBytes(header->shape.experts_per_layer)) {
    return Status::Corruption("expert_id_width_bytes " + std::to_string(w) + " too small for " +
                              std::to_string(header->shape.experts_per_layer) + " experts");
  }
  return header->shape.Validate().WithPrefix("trace header");
}

std::string EncodeTrailer(const Trailer& trailer) {
  std::string out(kTrailerMagic, sizeof(kTrailerMagic));
  wire::PutFixed64(&out, trailer.records);
  wire::PutFixed64(&out, trailer.frames);
  wire::PutFixed64(&out, trailer.frames_end_offset);
  wire::PutFixed32(&out, trailer.frames_crc32c);
  wire::PutFixed32(&out, Crc32c(out.data(), out.size()));
  return out;
}

bool DecodeTrailer(const uint8_t* data, Trailer* trailer) {
  if (std::memcmp(data, kTrailerMagic, sizeof(kTrailerMagic)) != 0) return false;
  if (Crc32c(data, kTrailerBytes - 4) != wire::LoadFixed32(data + kTrailerBytes - 4)) return false;
  trailer->records = wire::LoadFixed64(data + 8);
  trailer->frames = wire::LoadFixed64(data + 16);
  trailer->frames_end_offset = wire::LoadFixed64(data + 24);
  trailer->frames_crc32c = wire::LoadFixed32(data + 32);
  return true;
}

}  // namespace colibri::traces
