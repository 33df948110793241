// The C API (colibri/colibri.h) over a LocalEngine (the real backends).
#include "colibri/colibri.h"

#include <memory>
#include <string>

#include "colibri/engine/local_engine.h"

using colibri::Result;
using colibri::Status;
using colibri::StatusCode;
namespace engine = colibri::engine;

struct colibri_engine {
  std::unique_ptr<engine::LocalEngine> local;
  std::string last_error;
};

namespace {

thread_local std::string open_error;

colibri_status ToCode(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return COLIBRI_OK;
    case StatusCode::kInvalidArgument:
      return COLIBRI_INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return COLIBRI_NOT_FOUND;
    case StatusCode::kCorruption:
    case StatusCode::kTruncated:
      return COLIBRI_CORRUPTION;
    case StatusCode::kIoError:
      return COLIBRI_IO_ERROR;
    case StatusCode::kUnsupported:
      return COLIBRI_UNSUPPORTED;
    case StatusCode::kInternal:
      break;
  }
  return COLIBRI_INTERNAL;
}

Result<std::unique_ptr<colibri_engine>> Open(const colibri_options& o) {
  if (o.model_dir == nullptr) return Status::InvalidArgument("colibri_options.model_dir is NULL");
  engine::LocalEngineOptions options;
  options.model_dir = o.model_dir;
  options.queue_depth = o.queue_depth == 0 ? 32 : o.queue_depth;
  options.threads = o.threads == 0 ? 1 : o.threads;
  options.engine.l1_bytes = o.l1_bytes;
  options.engine.l2_bytes = o.l2_bytes;
  options.engine.l1_policy = options.engine.l2_policy = o.policy == nullptr ? "lru" : o.policy;
  auto e = std::make_unique<colibri_engine>();
  COLIBRI_ASSIGN_OR_RETURN(e->local, engine::LocalEngine::Open(options));
  return e;
}

}  // namespace

extern "C" {

colibri_status colibri_open(const colibri_options* options, colibri_engine** engine_out) {
  if (engine_out == nullptr) return COLIBRI_INVALID_ARGUMENT;
  *engine_out = nullptr;
  if (options == nullptr) {
    open_error = "colibri_open: options is NULL";
    return COLIBRI_INVALID_ARGUMENT;
  }
  auto opened = Open(*options);
  if (!opened.ok()) {
    open_error = opened.status().message();
    return ToCode(opened.status());
  }
  open_error.clear();
  *engine_out = std::move(opened).value().release();
  return COLIBRI_OK;
}

colibri_status colibri_moe_forward(colibri_engine* e, uint32_t layer, const float* hidden, size_t n_tokens,
                                   float* out) {
  if (e == nullptr) return COLIBRI_INVALID_ARGUMENT;
  Status s;
  if (hidden == nullptr || out == nullptr) {
    s = Status::InvalidArgument("colibri_moe_forward: hidden and out must not be NULL");
  } else if (layer >= e->local->model.config().layers()) {
    s = Status::InvalidArgument("colibri_moe_forward: layer " + std::to_string(layer) + " out of range (" +
                                std::to_string(e->local->model.config().layers()) + " MoE layers)");
  } else if (n_tokens > 0) {
    s = e->local->moe->Forward(layer, hidden, n_tokens, out);
  }
  e->last_error = s.message();
  return ToCode(s);
}

uint32_t colibri_num_layers(const colibri_engine* e) { return e == nullptr ? 0 : e->local->model.config().layers(); }
uint32_t colibri_hidden_size(const colibri_engine* e) { return e == nullptr ? 0 : e->local->model.config().hidden; }
const char* colibri_last_error(const colibri_engine* e) { return e == nullptr ? "" : e->last_error.c_str(); }
const char* colibri_open_error(void) { return open_error.c_str(); }
void colibri_close(colibri_engine* e) { delete e; }

}  // extern "C"
