#include "profile_tables.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "colibri/engine/storage.h"

namespace colibri::sim::profile_internal {
namespace {

constexpr std::string_view kReadGridFields[] = {"basis", "source", "note", "quantiles", "burst", "points"};
constexpr std::string_view kGridPointFields[] = {"read_bytes", "queue_depth", "reads", "bytes_per_s", "latency_ns", "submit_ns"};
constexpr std::string_view kTableFields[] = {"basis", "source", "note", "entries"};
constexpr std::string_view kFfnEntryFields[] = {"dtype", "hidden", "intermediate", "threads", "tokens", "ns"};
constexpr std::string_view kGateEntryFields[] = {"experts", "hidden", "threads", "tokens", "ns"};
constexpr std::string_view kDtypeNames[] = {"fp32", "bf16", "fp16", "int8"};
constexpr std::string_view kIdentityFields[] = {"cpu_model", "cpu_flags", "cores",       "ram_bytes",
                                                "kernel",    "block_device", "measured_on", "commit"};
constexpr std::string_view kHostMemoryFields[] = {"ram_bytes", "available_bytes", "fault_read_bytes"};
constexpr uint64_t kAlignmentBytes = 4096;
constexpr uint32_t kMaxQueueDepth = engine::kMaxStorageQueueDepth;
constexpr size_t kMaxQuantiles = 64;

// The members of HostWorkProfile in file order: (name, pointer to member as uint64_t).
struct HostWorkField {
  const char* name;
  uint64_t (*get)(const HostWorkProfile&);
  void (*set)(HostWorkProfile*, uint64_t);
};

#define COLIBRI_HOST_WORK_FIELD(member)                                                           \
  HostWorkField {                                                                                 \
    #member, [](const HostWorkProfile& h) { return static_cast<uint64_t>(h.member); },           \
        [](HostWorkProfile* h, uint64_t v) { h->member = static_cast<decltype(h->member)>(v); } \
  }
const HostWorkField kHostWorkFields[] = {
    COLIBRI_HOST_WORK_FIELD(routing_fixed_ns),          COLIBRI_HOST_WORK_FIELD(routing_ps_per_logit),
    COLIBRI_HOST_WORK_FIELD(scheduling_fixed_ns),       COLIBRI_HOST_WORK_FIELD(scheduling_ps_per_expert),
    COLIBRI_HOST_WORK_FIELD(scheduling_ps_per_assignment), COLIBRI_HOST_WORK_FIELD(scheduling_ps_per_read),
    COLIBRI_HOST_WORK_FIELD(scheduling_read_fixed_ns),
    COLIBRI_HOST_WORK_FIELD(gather_fixed_ns),           COLIBRI_HOST_WORK_FIELD(gather_ps_per_element),
    COLIBRI_HOST_WORK_FIELD(aggregation_fixed_ns),      COLIBRI_HOST_WORK_FIELD(aggregation_ps_per_element),
};
#undef COLIBRI_HOST_WORK_FIELD

// An array of unsigned integers at object[key], each within `range`.
Result<std::vector<uint64_t>> Integers(const Reader& r, const Json& object, const std::string& prefix,
                                       const std::string& key, const Range& range) {
  COLIBRI_ASSIGN_OR_RETURN(const Json* array, r.Find(object, prefix, key));
  if (!array->is_array() || array->empty()) return r.Error(prefix + key, "expected a non-empty array of integers", array);
  std::vector<uint64_t> values;
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& v = (*array)[i];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < range.min || v.get<uint64_t>() > range.max) {
      return r.Error(prefix + key + "[" + std::to_string(i) + "]", range.Expected(), &v);
    }
    values.push_back(v.get<uint64_t>());
  }
  return values;
}

// The object at doc[key] (checked against `fields`) or null when absent.
Result<const Json*> OptionalObject(const Reader& r, const Json& doc, const char* key, Fields fields) {
  auto it = doc.find(key);
  if (it == doc.end()) return static_cast<const Json*>(nullptr);
  if (!it->is_object()) return r.Error(key, "expected an object", &*it);
  COLIBRI_RETURN_IF_ERROR(r.CheckFields(*it, fields, std::string(key) + "."));
  return &*it;
}

Status ReadQuantiles(const Reader& r, const Json& grid, std::vector<double>* quantiles) {
  const std::string field = "read_grid.quantiles";
  COLIBRI_ASSIGN_OR_RETURN(const Json* array, r.Find(grid, "read_grid.", "quantiles"));
  if (!array->is_array() || array->size() < 2 || array->size() > kMaxQuantiles) {
    return r.Error(field, "expected an array of 2 to 64 numbers from 0 to 1", array);
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& q = (*array)[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!q.is_number()) return r.Error(at, "expected a number", &q);
    const double value = q.get<double>();
    if (!(value >= 0.0 && value <= 1.0)) return r.Error(at, "expected a number from 0 to 1", &q);
    if (!quantiles->empty() && !(value > quantiles->back())) return r.Error(at, "expected quantiles strictly increasing", &q);
    quantiles->push_back(value);
  }
  if (quantiles->front() != 0.0 || quantiles->back() != 1.0) {
    return r.Error(field, "expected the first quantile 0 (the minimum) and the last 1 (the maximum)", array);
  }
  return Status::Ok();
}

Result<ReadGridPoint> ReadGridPointAt(const Reader& r, const Json& point, const std::string& prefix, size_t quantiles) {
  if (!point.is_object()) return r.Error(prefix.substr(0, prefix.size() - 1), "expected an object", &point);
  COLIBRI_RETURN_IF_ERROR(r.CheckFields(point, kGridPointFields, prefix));
  ReadGridPoint p;
  COLIBRI_ASSIGN_OR_RETURN(p.read_bytes, r.PlainInteger(point, prefix, "read_bytes", Range::Positive()));
  if (p.read_bytes % kAlignmentBytes != 0) {
    return r.Error(prefix + "read_bytes", "expected a multiple of 4096 (O_DIRECT reads)", &point["read_bytes"]);
  }
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t depth, r.PlainInteger(point, prefix, "queue_depth", Range{1, kMaxQueueDepth}));
  p.queue_depth = static_cast<uint32_t>(depth);
  COLIBRI_ASSIGN_OR_RETURN(p.reads, r.PlainInteger(point, prefix, "reads", Range::Positive()));
  COLIBRI_ASSIGN_OR_RETURN(p.bytes_per_s, r.PlainInteger(point, prefix, "bytes_per_s", Range::Positive()));
  const Range latency{1, uint64_t{1} << 50, nullptr};
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> ns, Integers(r, point, prefix, "latency_ns", latency));
  if (ns.size() != quantiles) {
    return r.Error(prefix + "latency_ns", "expected " + std::to_string(quantiles) + " values, one per quantile",
                   &point["latency_ns"]);
  }
  for (size_t i = 1; i < ns.size(); ++i) {
    if (ns[i] < ns[i - 1]) {
      return r.Error(prefix + "latency_ns[" + std::to_string(i) + "]", "expected values non-decreasing with the quantile",
                     &point["latency_ns"][i]);
    }
  }
  p.latency_ns.assign(ns.begin(), ns.end());
  if (point.contains("submit_ns")) {  // optional: older grids did not measure it
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t submit, r.PlainInteger(point, prefix, "submit_ns", latency));
    p.submit_ns = static_cast<TimeNs>(submit);
  }
  return p;
}

Result<KernelTimes> ReadKernelEntry(const Reader& r, const Json& entry, const std::string& prefix, bool gate) {
  if (!entry.is_object()) return r.Error(prefix.substr(0, prefix.size() - 1), "expected an object", &entry);
  COLIBRI_RETURN_IF_ERROR(r.CheckFields(entry, gate ? Fields(kGateEntryFields) : Fields(kFfnEntryFields), prefix));
  KernelTimes k;
  const Range dim{1, UINT32_MAX, nullptr};
  if (gate) {
    k.dtype = "fp32";
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t experts, r.PlainInteger(entry, prefix, "experts", dim));
    k.rows = static_cast<uint32_t>(experts);
  } else {
    COLIBRI_ASSIGN_OR_RETURN(k.dtype, r.String(entry, prefix, "dtype"));
    if (std::find(std::begin(kDtypeNames), std::end(kDtypeNames), k.dtype) == std::end(kDtypeNames)) {
      return r.Error(prefix + "dtype", "expected fp32, bf16, fp16 or int8, got \"" + k.dtype + "\"");
    }
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t intermediate, r.PlainInteger(entry, prefix, "intermediate", dim));
    k.rows = static_cast<uint32_t>(intermediate);
  }
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t hidden, r.PlainInteger(entry, prefix, "hidden", dim));
  k.hidden = static_cast<uint32_t>(hidden);
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t threads, r.PlainInteger(entry, prefix, "threads", Range{1, 4096, nullptr}));
  k.threads = static_cast<uint32_t>(threads);
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> tokens, Integers(r, entry, prefix, "tokens", Range{1, 1 << 20, nullptr}));
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] <= tokens[i - 1]) {
      return r.Error(prefix + "tokens[" + std::to_string(i) + "]", "expected token counts strictly increasing",
                     &entry["tokens"][i]);
    }
  }
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> ns, Integers(r, entry, prefix, "ns", Range{1, uint64_t{1} << 50, nullptr}));
  if (ns.size() != tokens.size()) {
    return r.Error(prefix + "ns", "expected " + std::to_string(tokens.size()) + " values, one per token count",
                   &entry["ns"]);
  }
  k.tokens.assign(tokens.begin(), tokens.end());
  k.ns.assign(ns.begin(), ns.end());
  return k;
}

}  // namespace

void AddProvenance(const Figure& figure, Json* object) {
  (*object)["basis"] = BasisName(figure.basis);
  (*object)["source"] = figure.source;
  if (!figure.note.empty()) (*object)["note"] = figure.note;
}

Status ReadReadGrid(Reader& r, const Json& doc, ReadGrid* grid) {
  COLIBRI_ASSIGN_OR_RETURN(const Json* object, OptionalObject(r, doc, "read_grid", kReadGridFields));
  if (object == nullptr) return Status::Ok();
  COLIBRI_ASSIGN_OR_RETURN(grid->figure, r.Provenance(*object, "read_grid"));
  COLIBRI_RETURN_IF_ERROR(ReadQuantiles(r, *object, &grid->quantiles));
  if (object->contains("burst")) {
    COLIBRI_ASSIGN_OR_RETURN(const std::string burst, r.String(*object, "read_grid.", "burst"));
    if (burst == "shared") {
      grid->burst = ReadGridBurst::kShared;
    } else if (burst != "independent") {
      return r.Error("read_grid.burst", "expected \"independent\" or \"shared\"", &(*object)["burst"]);
    }
  }
  COLIBRI_ASSIGN_OR_RETURN(const Json* points, r.Find(*object, "read_grid.", "points"));
  if (!points->is_array() || points->empty()) return r.Error("read_grid.points", "expected a non-empty array", points);
  std::set<std::pair<uint64_t, uint32_t>> seen;
  for (size_t i = 0; i < points->size(); ++i) {
    const std::string prefix = "read_grid.points[" + std::to_string(i) + "].";
    COLIBRI_ASSIGN_OR_RETURN(ReadGridPoint p, ReadGridPointAt(r, (*points)[i], prefix, grid->quantiles.size()));
    if (!seen.emplace(p.read_bytes, p.queue_depth).second) {
      return r.Error(prefix + "queue_depth", "expected one point per (read_bytes, queue_depth); " +
                                                 std::to_string(p.read_bytes) + " bytes at depth " +
                                                 std::to_string(p.queue_depth) + " repeats");
    }
    grid->points.push_back(std::move(p));
  }
  std::sort(grid->points.begin(), grid->points.end(), [](const ReadGridPoint& a, const ReadGridPoint& b) {
    return std::tie(a.read_bytes, a.queue_depth) < std::tie(b.read_bytes, b.queue_depth);
  });
  for (const ReadGridPoint& p : grid->points) {
    if (!seen.count({p.read_bytes, 1})) {
      return r.Error("read_grid.points", "expected a point at queue_depth 1 for every read size; " +
                                             std::to_string(p.read_bytes) + " bytes has none");
    }
  }
  return Status::Ok();
}

Status ReadKernelTable(Reader& r, const Json& doc, const char* key, bool gate, KernelTable* table) {
  COLIBRI_ASSIGN_OR_RETURN(const Json* object, OptionalObject(r, doc, key, kTableFields));
  if (object == nullptr) return Status::Ok();
  COLIBRI_ASSIGN_OR_RETURN(table->figure, r.Provenance(*object, key));
  COLIBRI_ASSIGN_OR_RETURN(const Json* entries, r.Find(*object, std::string(key) + ".", "entries"));
  if (!entries->is_array() || entries->empty()) return r.Error(std::string(key) + ".entries", "expected a non-empty array", entries);
  std::set<std::tuple<std::string, uint32_t, uint32_t, uint32_t>> seen;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string prefix = std::string(key) + ".entries[" + std::to_string(i) + "].";
    COLIBRI_ASSIGN_OR_RETURN(KernelTimes k, ReadKernelEntry(r, (*entries)[i], prefix, gate));
    if (!seen.emplace(k.dtype, k.rows, k.hidden, k.threads).second) {
      return r.Error(prefix.substr(0, prefix.size() - 1), "expected one entry per shape, dtype and thread count");
    }
    table->entries.push_back(std::move(k));
  }
  return Status::Ok();
}

namespace {

// One host_work object at `field` ("host_work" or "host_work[i]"); "threads"
// is required in an array (`need_threads`), optional alone.
Status ReadOneHostWork(Reader& r, const Json& object, const std::string& field, bool need_threads,
                       HostWorkProfile* host_work) {
  std::vector<std::string_view> fields = {"basis", "source", "note", "threads"};
  for (const HostWorkField& f : kHostWorkFields) fields.emplace_back(f.name);
  if (!object.is_object()) return r.Error(field, "expected an object", &object);
  COLIBRI_RETURN_IF_ERROR(r.CheckFields(object, fields, field + "."));
  COLIBRI_ASSIGN_OR_RETURN(host_work->figure, r.Provenance(object, field));
  for (const HostWorkField& f : kHostWorkFields) {
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t value,
                             r.PlainInteger(object, field + ".", f.name, Range{0, uint64_t{1} << 50, nullptr}));
    f.set(host_work, value);
  }
  if (need_threads || object.contains("threads")) {
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t threads, r.PlainInteger(object, field + ".", "threads", Range{1, 4096, nullptr}));
    host_work->threads = static_cast<uint32_t>(threads);
  }
  host_work->present = true;
  return Status::Ok();
}

}  // namespace

Status ReadHostWork(Reader& r, const Json& doc, std::vector<HostWorkProfile>* host_work) {
  auto it = doc.find("host_work");
  if (it == doc.end()) return Status::Ok();
  if (it->is_object()) {
    HostWorkProfile one;
    COLIBRI_RETURN_IF_ERROR(ReadOneHostWork(r, *it, "host_work", false, &one));
    host_work->push_back(std::move(one));
    return Status::Ok();
  }
  if (!it->is_array() || it->empty()) {
    return r.Error("host_work", "expected an object, or a non-empty array of objects with distinct \"threads\"", &*it);
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string field = "host_work[" + std::to_string(i) + "]";
    HostWorkProfile one;
    COLIBRI_RETURN_IF_ERROR(ReadOneHostWork(r, (*it)[i], field, true, &one));
    for (const HostWorkProfile& earlier : *host_work) {
      if (earlier.threads == one.threads) return r.Error(field + ".threads", "expected one entry per thread count", &(*it)[i]["threads"]);
    }
    host_work->push_back(std::move(one));
  }
  return Status::Ok();
}

Status ReadMachineIdentity(Reader& r, const Json& doc, MachineIdentity* identity) {
  COLIBRI_ASSIGN_OR_RETURN(const Json* object, OptionalObject(r, doc, "identity", kIdentityFields));
  if (object == nullptr) return Status::Ok();
  const std::string prefix = "identity.";
  COLIBRI_ASSIGN_OR_RETURN(identity->cpu_model, r.String(*object, prefix, "cpu_model"));
  COLIBRI_ASSIGN_OR_RETURN(identity->cpu_flags, r.String(*object, prefix, "cpu_flags", /*nonempty=*/false));
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t cores, r.PlainInteger(*object, prefix, "cores", Range{1, 1 << 20, nullptr}));
  identity->cores = static_cast<uint32_t>(cores);
  COLIBRI_ASSIGN_OR_RETURN(identity->ram_bytes, r.PlainInteger(*object, prefix, "ram_bytes", Range::Positive()));
  COLIBRI_ASSIGN_OR_RETURN(identity->kernel, r.String(*object, prefix, "kernel"));
  COLIBRI_ASSIGN_OR_RETURN(identity->block_device, r.String(*object, prefix, "block_device", /*nonempty=*/false));
  COLIBRI_ASSIGN_OR_RETURN(identity->measured_on, r.String(*object, prefix, "measured_on"));
  COLIBRI_ASSIGN_OR_RETURN(identity->commit, r.String(*object, prefix, "commit", /*nonempty=*/false));
  return Status::Ok();
}

Status ReadHostMemory(Reader& r, const Json& doc, HostMemoryProfile* host_memory) {
  COLIBRI_ASSIGN_OR_RETURN(const Json* object, OptionalObject(r, doc, "host_memory", kHostMemoryFields));
  if (object == nullptr) return Status::Ok();
  const std::string prefix = "host_memory.";
  COLIBRI_ASSIGN_OR_RETURN(host_memory->ram_bytes, r.Figure(*object, prefix, "ram_bytes", Range::Positive()));
  const Range available{1, host_memory->ram_bytes, "at most host_memory.ram_bytes"};
  COLIBRI_ASSIGN_OR_RETURN(host_memory->available_bytes, r.Figure(*object, prefix, "available_bytes", available));
  const Range fault{kAlignmentBytes, uint64_t{1} << 30, nullptr};
  COLIBRI_ASSIGN_OR_RETURN(host_memory->fault_read_bytes, r.Figure(*object, prefix, "fault_read_bytes", fault));
  if (host_memory->fault_read_bytes % kAlignmentBytes != 0) {
    return r.Error(prefix + "fault_read_bytes.value", "expected a multiple of 4096 (whole pages)",
                   &(*object)["fault_read_bytes"]["value"]);
  }
  host_memory->figures = r.TakeFigures();
  host_memory->present = true;
  return Status::Ok();
}

Json ReadGridJson(const ReadGrid& grid) {
  Json object = Json::object();
  AddProvenance(grid.figure, &object);
  object["quantiles"] = grid.quantiles;
  object["burst"] = grid.burst == ReadGridBurst::kShared ? "shared" : "independent";
  Json points = Json::array();
  for (const ReadGridPoint& p : grid.points) {
    Json point{{"read_bytes", p.read_bytes},
               {"queue_depth", p.queue_depth},
               {"reads", p.reads},
               {"bytes_per_s", p.bytes_per_s},
               {"latency_ns", p.latency_ns}};
    if (p.submit_ns > 0) point["submit_ns"] = p.submit_ns;
    points.push_back(std::move(point));
  }
  object["points"] = std::move(points);
  return object;
}

Json KernelTableJson(const KernelTable& table, bool gate) {
  Json object = Json::object();
  AddProvenance(table.figure, &object);
  Json entries = Json::array();
  for (const KernelTimes& k : table.entries) {
    Json entry = gate ? Json{{"experts", k.rows}} : Json{{"dtype", k.dtype}, {"intermediate", k.rows}};
    entry["hidden"] = k.hidden;
    entry["threads"] = k.threads;
    entry["tokens"] = k.tokens;
    entry["ns"] = k.ns;
    entries.push_back(std::move(entry));
  }
  object["entries"] = std::move(entries);
  return object;
}

Json HostWorkJson(const std::vector<HostWorkProfile>& host_work) {
  auto one = [](const HostWorkProfile& h) {
    Json object = Json::object();
    AddProvenance(h.figure, &object);
    if (h.threads != 0) object["threads"] = h.threads;
    for (const HostWorkField& f : kHostWorkFields) object[f.name] = f.get(h);
    return object;
  };
  if (host_work.size() == 1) return one(host_work.front());
  Json array = Json::array();
  for (const HostWorkProfile& h : host_work) array.push_back(one(h));
  return array;
}

Json MachineIdentityJson(const MachineIdentity& identity) {
  return Json{{"cpu_model", identity.cpu_model}, {"cpu_flags", identity.cpu_flags},
              {"cores", identity.cores},         {"ram_bytes", identity.ram_bytes},
              {"kernel", identity.kernel},       {"block_device", identity.block_device},
              {"measured_on", identity.measured_on}, {"commit", identity.commit}};
}

}  // namespace colibri::sim::profile_internal
