#include "colibri/sim/profiles.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "profile_reader.h"
#include "profile_tables.h"

namespace colibri::sim {

// Defined in the build tree's embedded_profiles.cc (sim/cmake/embed_profiles.cmake):
// every sim/profiles/**/*.json as (path relative to the source root, contents).
namespace profiles_internal {
extern const std::pair<std::string_view, std::string_view> kEmbeddedProfiles[];
extern const std::size_t kEmbeddedProfileCount;
}  // namespace profiles_internal

namespace {

using namespace profile_internal;  // NOLINT: the shared reader

constexpr std::string_view kNvmeFields[] = {"kind", "id", "name", "channels", "queue_depth",
                                            "per_op_ns", "channel_read_bytes_per_s", "read_bytes_per_s",
                                            "read_latency_p50_ns", "read_latency_p99_ns", "read_grid"};
constexpr std::string_view kPcieFields[] = {"kind", "id", "name", "generation", "lanes", "pinned_bytes_per_s",
                                            "pageable_bytes_per_s", "per_copy_ns", "copy_engines"};
constexpr std::string_view kComputeFields[] = {"kind", "id", "name", "compute_kind", "peak_flops_per_s",
                                               "memory_bytes_per_s", "launch_ns", "memory_bytes",
                                               "ffn_table", "gate_table"};
constexpr std::string_view kDtypes[] = {"fp32", "bf16", "fp16", "int8"};
constexpr std::string_view kMachineFields[] = {"kind", "name", "description", "nvme", "pcie",
                                               "compute", "host_work", "host_memory", "identity"};
constexpr uint32_t kMaxPcieGeneration = 7;

// Records the message of the first syntax error; everything else is accepted.
class ErrorLocator final : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    message = error.what();
    const size_t bracket = message.find("] ");
    if (message.starts_with("[json.exception") && bracket != std::string::npos) message.erase(0, bracket + 2);
    return false;
  }
  std::string message = "syntax error";
};

// Parses a profile file's text into a JSON object, without exceptions.
Result<Json> ParseObject(std::string_view text, const std::string& origin) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    ErrorLocator locator;
    Json::sax_parse(text, &locator);
    return Status::InvalidArgument(origin + ": not valid JSON: " + locator.message);
  }
  if (!doc.is_object()) return Status::InvalidArgument(origin + ": expected a JSON object, got " + Describe(doc));
  return doc;
}

Status ReadIdentity(const Reader& r, const Json& doc, std::string* id, std::string* name) {
  COLIBRI_ASSIGN_OR_RETURN(*id, r.Id(doc, "id"));
  COLIBRI_ASSIGN_OR_RETURN(*name, r.String(doc, "", "name"));
  return Status::Ok();
}

Result<NvmeProfile> NvmeFromJson(const Json& doc, const std::string& origin) {
  Reader r(origin);
  COLIBRI_RETURN_IF_ERROR(r.CheckKind(doc, "nvme", kNvmeFields));
  NvmeProfile p;
  COLIBRI_RETURN_IF_ERROR(ReadIdentity(r, doc, &p.id, &p.name));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "channels", Range::Positive(), &p.channels));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "queue_depth", Range::Positive(), &p.queue_depth));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "per_op_ns", Range::NonNegative(), &p.per_op_ns));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "channel_read_bytes_per_s", Range::Positive(), &p.channel_read_bytes_per_s));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "read_bytes_per_s", Range::Positive(), &p.read_bytes_per_s));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "read_latency_p50_ns", Range::NonNegative(), &p.read_latency.p50_ns));
  // p99 >= p50; a jittered latency needs a positive median (a log-normal's).
  const Range p99{static_cast<uint64_t>(p.read_latency.p50_ns), std::numeric_limits<uint64_t>::max(),
                  "at least read_latency_p50_ns"};
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "read_latency_p99_ns", p99, &p.read_latency.p99_ns));
  if (p.read_latency.has_jitter() && p.read_latency.p50_ns == 0) {
    return r.Error("read_latency_p50_ns.value", "expected a positive integer when read_latency_p99_ns exceeds it");
  }
  COLIBRI_RETURN_IF_ERROR(ReadReadGrid(r, doc, &p.read_grid));
  p.figures = r.TakeFigures();
  return p;
}

Result<PcieProfile> PcieFromJson(const Json& doc, const std::string& origin) {
  Reader r(origin);
  COLIBRI_RETURN_IF_ERROR(r.CheckKind(doc, "pcie", kPcieFields));
  PcieProfile p;
  COLIBRI_RETURN_IF_ERROR(ReadIdentity(r, doc, &p.id, &p.name));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "generation", Range{0, kMaxPcieGeneration}, &p.generation));
  // Generation 0 is "no link": no lanes; its rates are 0 (free copies) or a
  // measured host memcpy (pinned and pageable alike, from calibrate).
  const bool link = p.generation > 0;
  const Range no_link = Range::Zero("generation 0 is no link");
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "lanes", link ? Range{1, 32} : no_link, &p.lanes));
  COLIBRI_RETURN_IF_ERROR(
      r.Read(doc, "pinned_bytes_per_s", link ? Range::Positive() : Range::NonNegative(), &p.pinned_bytes_per_s));
  const Range host_copy{p.pinned_bytes_per_s, p.pinned_bytes_per_s, "generation 0: a host memcpy has one rate"};
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "pageable_bytes_per_s", link ? Range::Positive() : host_copy, &p.pageable_bytes_per_s));
  const Range copy_cost = link || p.pinned_bytes_per_s > 0 ? Range::NonNegative() : Range::Zero("generation 0 without a host copy rate is free");
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "per_copy_ns", copy_cost, &p.per_copy_ns));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "copy_engines", Range::Positive(), &p.copy_engines));
  p.figures = r.TakeFigures();
  return p;
}

Status ReadPeakFlops(Reader& r, const Json& doc, ComputeProfile* p) {
  const std::string field = "peak_flops_per_s";
  COLIBRI_ASSIGN_OR_RETURN(const Json* peaks, r.Find(doc, "", field));
  if (!peaks->is_object() || peaks->empty()) {
    return r.Error(field, "expected an object with at least one of " + Join(kDtypes) + ", each a figure", peaks);
  }
  COLIBRI_RETURN_IF_ERROR(r.CheckFields(*peaks, kDtypes, field + "."));
  for (std::string_view dtype : kDtypes) {
    if (!peaks->contains(dtype)) continue;
    COLIBRI_ASSIGN_OR_RETURN(p->peak_flops_per_s[std::string(dtype)],
                             r.Figure(*peaks, field + ".", std::string(dtype), Range::Positive()));
  }
  return Status::Ok();
}

Result<ComputeProfile> ComputeFromJson(const Json& doc, const std::string& origin) {
  Reader r(origin);
  COLIBRI_RETURN_IF_ERROR(r.CheckKind(doc, "compute", kComputeFields));
  ComputeProfile p;
  COLIBRI_RETURN_IF_ERROR(ReadIdentity(r, doc, &p.id, &p.name));
  COLIBRI_ASSIGN_OR_RETURN(std::string kind, r.String(doc, "", "compute_kind"));
  if (kind != "gpu" && kind != "cpu") return r.Error("compute_kind", "expected \"gpu\" or \"cpu\", got \"" + kind + "\"");
  p.kind = kind == "gpu" ? ComputeKind::kGpu : ComputeKind::kCpu;
  COLIBRI_RETURN_IF_ERROR(ReadPeakFlops(r, doc, &p));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "memory_bytes_per_s", Range::Positive(), &p.memory_bytes_per_s));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "launch_ns", Range::NonNegative(), &p.launch_ns));
  COLIBRI_RETURN_IF_ERROR(r.Read(doc, "memory_bytes", Range::NonNegative(), &p.memory_bytes));
  COLIBRI_RETURN_IF_ERROR(ReadKernelTable(r, doc, "ffn_table", /*gate=*/false, &p.ffn_table));
  COLIBRI_RETURN_IF_ERROR(ReadKernelTable(r, doc, "gate_table", /*gate=*/true, &p.gate_table));
  p.figures = r.TakeFigures();
  return p;
}

Result<MachineProfile> MachineFromJson(const Json& doc, const std::string& origin) {
  Reader r(origin);
  COLIBRI_RETURN_IF_ERROR(r.CheckKind(doc, "machine", kMachineFields));
  MachineProfile m;
  COLIBRI_ASSIGN_OR_RETURN(m.name, r.Id(doc, "name"));
  COLIBRI_ASSIGN_OR_RETURN(m.description, r.String(doc, "", "description"));
  COLIBRI_ASSIGN_OR_RETURN(m.nvme, r.Id(doc, "nvme"));
  COLIBRI_ASSIGN_OR_RETURN(m.pcie, r.Id(doc, "pcie"));
  COLIBRI_ASSIGN_OR_RETURN(m.compute, r.Id(doc, "compute"));
  COLIBRI_RETURN_IF_ERROR(ReadHostWork(r, doc, &m.host_work));
  COLIBRI_RETURN_IF_ERROR(ReadHostMemory(r, doc, &m.host_memory));
  COLIBRI_RETURN_IF_ERROR(ReadMachineIdentity(r, doc, &m.identity));
  return m;
}

// The "kind" of a profile file: nvme, pcie, compute or machine.
Result<std::string> KindOf(const Json& doc, const std::string& origin) {
  Reader r(origin);
  COLIBRI_ASSIGN_OR_RETURN(std::string kind, r.String(doc, "", "kind"));
  if (kind == "nvme" || kind == "pcie" || kind == "compute" || kind == "machine") return kind;
  return r.Error("kind", "expected nvme, pcie, compute or machine, got \"" + kind + "\"");
}

template <typename T>
Result<T> ParseText(std::string_view text, const std::string& origin,
                    Result<T> (*from_json)(const Json&, const std::string&)) {
  COLIBRI_ASSIGN_OR_RETURN(Json doc, ParseObject(text, origin));
  return from_json(doc, origin);
}

Result<std::string> ReadFile(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return Status::NotFound(path + ": no such file");
  if (!std::filesystem::is_regular_file(path, error)) return Status::InvalidArgument(path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return Status::IoError(path + ": cannot read");
  return text.str();
}

template <typename Map>
std::vector<std::string> KeysOf(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& item : map) keys.push_back(item.first);
  return keys;
}

template <typename T>
Result<const T*> Find(const std::map<std::string, T>& map, const std::string& id, const char* what) {
  auto it = map.find(id);
  if (it == map.end()) {
    return Status::NotFound(std::string("unknown ") + what + " '" + id + "' (known: " + Join(KeysOf(map)) + ")");
  }
  return &it->second;
}

std::vector<Parameter> WithFigures(std::vector<std::pair<std::string, uint64_t>> values,
                                   const std::vector<Figure>& figures) {
  std::vector<Parameter> out;
  for (auto& entry : values) {
    const std::string& field = entry.first;  // a plain reference: clang < 16 cannot capture structured bindings
    auto it = std::find_if(figures.begin(), figures.end(), [&](const Figure& f) { return f.field == field; });
    Figure figure = it != figures.end() ? *it : Figure{field, Basis::kAssumed, "", ""};
    out.push_back(Parameter{std::move(entry.first), entry.second, std::move(figure)});
  }
  return out;
}

template <typename T>
ComponentInfo InfoOf(ComponentKind kind, const T& profile, const std::string& origin) {
  return ComponentInfo{kind, profile.id, profile.name, origin, "", ParametersOf(profile)};
}

}  // namespace

const char* BasisName(Basis basis) {
  switch (basis) {
    case Basis::kSpec: return "spec";
    case Basis::kMeasured: return "measured";
    case Basis::kDerived: return "derived";
    case Basis::kAssumed: return "assumed";
  }
  return "assumed";
}

const char* ComponentKindName(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kNvme: return "nvme";
    case ComponentKind::kPcie: return "pcie";
    case ComponentKind::kCompute: return "compute";
  }
  return "nvme";
}

Result<NvmeProfile> ParseNvmeProfile(std::string_view json_text, const std::string& origin) {
  return ParseText(json_text, origin, &NvmeFromJson);
}
Result<PcieProfile> ParsePcieProfile(std::string_view json_text, const std::string& origin) {
  return ParseText(json_text, origin, &PcieFromJson);
}
Result<ComputeProfile> ParseComputeProfile(std::string_view json_text, const std::string& origin) {
  return ParseText(json_text, origin, &ComputeFromJson);
}
Result<MachineProfile> ParseMachineProfile(std::string_view json_text, const std::string& origin) {
  return ParseText(json_text, origin, &MachineFromJson);
}

std::vector<Parameter> ParametersOf(const NvmeProfile& p) {
  return WithFigures({{"channels", p.channels},
                      {"queue_depth", p.queue_depth},
                      {"per_op_ns", static_cast<uint64_t>(p.per_op_ns)},
                      {"channel_read_bytes_per_s", p.channel_read_bytes_per_s},
                      {"read_bytes_per_s", p.read_bytes_per_s},
                      {"read_latency_p50_ns", static_cast<uint64_t>(p.read_latency.p50_ns)},
                      {"read_latency_p99_ns", static_cast<uint64_t>(p.read_latency.p99_ns)}},
                     p.figures);
}

std::vector<Parameter> ParametersOf(const PcieProfile& p) {
  return WithFigures({{"generation", p.generation},
                      {"lanes", p.lanes},
                      {"pinned_bytes_per_s", p.pinned_bytes_per_s},
                      {"pageable_bytes_per_s", p.pageable_bytes_per_s},
                      {"per_copy_ns", static_cast<uint64_t>(p.per_copy_ns)},
                      {"copy_engines", p.copy_engines}},
                     p.figures);
}

std::vector<Parameter> ParametersOf(const ComputeProfile& p) {
  std::vector<std::pair<std::string, uint64_t>> values;
  for (std::string_view dtype : kDtypes) {
    auto it = p.peak_flops_per_s.find(std::string(dtype));
    if (it != p.peak_flops_per_s.end()) values.emplace_back("peak_flops_per_s." + it->first, it->second);
  }
  values.emplace_back("memory_bytes_per_s", p.memory_bytes_per_s);
  values.emplace_back("launch_ns", static_cast<uint64_t>(p.launch_ns));
  values.emplace_back("memory_bytes", p.memory_bytes);
  return WithFigures(std::move(values), p.figures);
}

std::vector<Parameter> ParametersOf(const HostMemoryProfile& p) {
  if (!p.present) return {};
  return WithFigures({{"host_memory.ram_bytes", p.ram_bytes},
                      {"host_memory.available_bytes", p.available_bytes},
                      {"host_memory.fault_read_bytes", p.fault_read_bytes}},
                     p.figures);
}

Result<HardwareCatalog> HardwareCatalog::BuiltIn() {
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < profiles_internal::kEmbeddedProfileCount; ++i) {
    const auto& [path, text] = profiles_internal::kEmbeddedProfiles[i];
    files.emplace_back(std::string(path), std::string(text));
  }
  HardwareCatalog catalog;
  COLIBRI_RETURN_IF_ERROR(catalog.AddAll(files));
  return catalog;
}

Status HardwareCatalog::AddFiles(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& path : paths) {
    COLIBRI_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    files.emplace_back(path, std::move(text));
  }
  return AddAll(files);
}

Status HardwareCatalog::AddAll(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<const std::pair<std::string, std::string>*> machines;
  for (const auto& file : files) {
    COLIBRI_ASSIGN_OR_RETURN(Json doc, ParseObject(file.second, file.first));
    COLIBRI_ASSIGN_OR_RETURN(std::string kind, KindOf(doc, file.first));
    if (kind == "machine") {
      machines.push_back(&file);
    } else {
      COLIBRI_RETURN_IF_ERROR(AddText(file.second, file.first));
    }
  }
  for (const auto* file : machines) COLIBRI_RETURN_IF_ERROR(AddText(file->second, file->first));
  return Status::Ok();
}

Status HardwareCatalog::AddText(std::string_view json_text, const std::string& origin) {
  COLIBRI_ASSIGN_OR_RETURN(Json doc, ParseObject(json_text, origin));
  COLIBRI_ASSIGN_OR_RETURN(std::string kind, KindOf(doc, origin));
  if (kind == "machine") {
    COLIBRI_ASSIGN_OR_RETURN(MachineProfile machine, MachineFromJson(doc, origin));
    return AddMachine(std::move(machine), origin);
  }
  // Adds a parsed component under a new id (copied first: the profile is moved into the entry).
  auto add = [&](auto& map, auto profile) -> Status {
    COLIBRI_RETURN_IF_ERROR(CheckNewComponentId(profile.id, origin));
    std::string id = profile.id;
    map.emplace(std::move(id), Entry<decltype(profile)>{std::move(profile), origin});
    return Status::Ok();
  };
  if (kind == "nvme") {
    COLIBRI_ASSIGN_OR_RETURN(NvmeProfile p, NvmeFromJson(doc, origin));
    return add(nvme_, std::move(p));
  }
  if (kind == "pcie") {
    COLIBRI_ASSIGN_OR_RETURN(PcieProfile p, PcieFromJson(doc, origin));
    return add(pcie_, std::move(p));
  }
  COLIBRI_ASSIGN_OR_RETURN(ComputeProfile p, ComputeFromJson(doc, origin));
  return add(compute_, std::move(p));
}

Status HardwareCatalog::CheckNewComponentId(const std::string& id, const std::string& origin) const {
  const std::string* other = nullptr;
  if (auto it = nvme_.find(id); it != nvme_.end()) other = &it->second.origin;
  if (auto it = pcie_.find(id); it != pcie_.end()) other = &it->second.origin;
  if (auto it = compute_.find(id); it != compute_.end()) other = &it->second.origin;
  if (other == nullptr) return Status::Ok();
  return Status::InvalidArgument(origin + ": field id: component '" + id + "' is already defined by " + *other);
}

Status HardwareCatalog::AddMachine(MachineProfile machine, const std::string& origin) {
  if (auto it = machines_.find(machine.name); it != machines_.end()) {
    return Status::InvalidArgument(origin + ": field name: machine '" + machine.name + "' is already defined by " +
                                   it->second.origin);
  }
  const std::pair<const char*, Status> parts[] = {{"nvme", Nvme(machine.nvme).status()},
                                                  {"pcie", Pcie(machine.pcie).status()},
                                                  {"compute", Compute(machine.compute).status()}};
  for (const auto& [field, status] : parts) {
    if (!status.ok()) return Status::InvalidArgument(origin + ": field " + field + ": " + status.message());
  }
  const std::string name = machine.name;
  machines_.emplace(name, Entry<MachineProfile>{std::move(machine), origin});
  return Status::Ok();
}

Result<const NvmeProfile*> HardwareCatalog::Nvme(const std::string& id) const {
  COLIBRI_ASSIGN_OR_RETURN(const Entry<NvmeProfile>* entry, Find(nvme_, id, "nvme profile"));
  return &entry->profile;
}

Result<const PcieProfile*> HardwareCatalog::Pcie(const std::string& id) const {
  COLIBRI_ASSIGN_OR_RETURN(const Entry<PcieProfile>* entry, Find(pcie_, id, "pcie profile"));
  return &entry->profile;
}

Result<const ComputeProfile*> HardwareCatalog::Compute(const std::string& id) const {
  COLIBRI_ASSIGN_OR_RETURN(const Entry<ComputeProfile>* entry, Find(compute_, id, "compute profile"));
  return &entry->profile;
}

Result<const MachineProfile*> HardwareCatalog::Machine(const std::string& name) const {
  COLIBRI_ASSIGN_OR_RETURN(const Entry<MachineProfile>* entry, Find(machines_, name, "machine"));
  return &entry->profile;
}

Result<std::string> HardwareCatalog::MachineOrigin(const std::string& name) const {
  COLIBRI_ASSIGN_OR_RETURN(const Entry<MachineProfile>* entry, Find(machines_, name, "machine"));
  return entry->origin;
}

Result<ComponentInfo> HardwareCatalog::Component(const std::string& id) const {
  const size_t slash = id.find('/');
  const std::string kind = slash == std::string::npos ? "" : id.substr(0, slash);
  const std::string bare = slash == std::string::npos ? id : id.substr(slash + 1);
  if (!kind.empty() && kind != "nvme" && kind != "pcie" && kind != "compute") {
    return Status::NotFound("unknown component kind '" + kind + "' in '" + id + "' (expected nvme, pcie or compute)");
  }
  for (ComponentInfo& info : Components()) {
    if (info.id == bare && (kind.empty() || kind == ComponentKindName(info.kind))) return std::move(info);
  }
  std::vector<std::string> known;
  for (const ComponentInfo& info : Components()) known.push_back(std::string(ComponentKindName(info.kind)) + "/" + info.id);
  return Status::NotFound("unknown component '" + id + "' (known: " + Join(known) + ")");
}

std::vector<std::string> HardwareCatalog::NvmeIds() const { return KeysOf(nvme_); }
std::vector<std::string> HardwareCatalog::PcieIds() const { return KeysOf(pcie_); }
std::vector<std::string> HardwareCatalog::ComputeIds() const { return KeysOf(compute_); }
std::vector<std::string> HardwareCatalog::MachineNames() const { return KeysOf(machines_); }

std::vector<ComponentInfo> HardwareCatalog::Components() const {
  std::vector<ComponentInfo> out;
  for (const auto& [id, e] : nvme_) out.push_back(InfoOf(ComponentKind::kNvme, e.profile, e.origin));
  for (const auto& [id, e] : pcie_) out.push_back(InfoOf(ComponentKind::kPcie, e.profile, e.origin));
  for (const auto& [id, e] : compute_) {
    out.push_back(InfoOf(ComponentKind::kCompute, e.profile, e.origin));
    out.back().compute_kind = e.profile.kind == ComputeKind::kGpu ? "gpu" : "cpu";
  }
  return out;
}

Result<ResolvedMachine> HardwareCatalog::Resolve(const std::string& name, const MachineOverrides& overrides) const {
  COLIBRI_ASSIGN_OR_RETURN(const MachineProfile* machine, Machine(name));
  ResolvedMachine out;
  out.machine = *machine;
  std::vector<std::string> changes;
  const std::pair<const char*, std::pair<const std::string*, std::string*>> parts[] = {
      {"nvme", {&overrides.nvme, &out.machine.nvme}},
      {"pcie", {&overrides.pcie, &out.machine.pcie}},
      {"compute", {&overrides.compute, &out.machine.compute}}};
  for (const auto& [part, ids] : parts) {
    if (ids.first->empty() || *ids.first == *ids.second) continue;
    *ids.second = *ids.first;
    changes.push_back(std::string(part) + "=" + *ids.first);
  }
  COLIBRI_ASSIGN_OR_RETURN(const NvmeProfile* nvme, Nvme(out.machine.nvme));
  COLIBRI_ASSIGN_OR_RETURN(const PcieProfile* pcie, Pcie(out.machine.pcie));
  COLIBRI_ASSIGN_OR_RETURN(const ComputeProfile* compute, Compute(out.machine.compute));
  out.nvme = *nvme;
  out.pcie = *pcie;
  out.compute = *compute;
  out.label = changes.empty() ? name : name + " (" + Join(changes) + ")";
  return out;
}

}  // namespace colibri::sim
