#include "colibri/vopr/vopr.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "colibri/engine/model.h"
#include "colibri/replay/run_record.h"
#include "colibri/reports/run_store.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/random.h"

namespace colibri::vopr {
namespace {

using Json = nlohmann::ordered_json;

// The modelled drive every run reads through (latency jitter: a seeded stream).
constexpr const char* kDrive = "samsung-pm9a3";

class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(rng_.NextU64() % n); }
  bool OneIn(uint32_t n) { return Below(n) == 0; }
  template <typename T, size_t N>
  const T& Of(const T (&items)[N]) { return items[Below(N)]; }

 private:
  sim::Rng rng_;
};

sim::FaultRate Rate(uint32_t d, engine::TimeNs duration_ns = 0) { return sim::FaultRate{1, d, duration_ns}; }

std::string Repro(uint64_t seed, uint32_t index) {
  return "colibri vopr --seed " + std::to_string(seed) + " --run " + std::to_string(index);
}

replay::LocalRunOptions RunOptions(const VoprRunConfig& c, const std::string& model_dir, uint64_t block_bytes,
                                   const sim::NvmeProfile& drive, bool faulty) {
  replay::LocalRunOptions o;
  o.model_dir = model_dir;
  o.requests = c.requests;
  o.prefill_tokens = c.prefill_tokens;
  o.decode_passes = c.decode_passes;
  o.transfer = "cpu";
  o.compute = "cpu";
  o.l1_bytes = uint64_t{c.l1_blocks} * block_bytes;
  o.l2_bytes = uint64_t{c.l2_blocks} * block_bytes;
  o.l1_policy = c.l1_policy;
  o.l2_policy = c.l2_policy;
  o.prefetch.predictor = c.prefetch;
  o.staging_slots = c.staging_slots;
  o.queue_depth = c.queue_depth;
  o.threads = c.threads;
  o.seed = c.run_seed;
  o.modelled_storage = drive;
  o.read_retries = c.read_retries;
  o.isolate_failures = true;
  o.router = c.routing;
  if (faulty) o.faults = c.faults;
  return o;
}

// Stores one of a run's two results and checks it reads back intact. The run id.
Result<int64_t> Store(reports::RunStore* store, const VoprOptions& options, const VoprRunConfig& c, bool faulty,
                      const replay::LocalRunResult& result) {
  reports::RunInfo info;
  info.kind = "run";
  info.label = "vopr seed " + std::to_string(options.seed) + " run " + std::to_string(c.index) +
               (faulty ? " (faults)" : " (oracle)");
  info.config_json = Json{{"vopr_seed", options.seed}, {"run", c.index}, {"config", c.Describe()},
                          {"faults", faulty ? sim::FormatFaultSpec(c.faults) : "none"}}
                         .dump();
  info.hardware_json = "{}";
  info.backends = std::string("storage=sim(") + kDrive + ", real bytes) transfer=cpu compute=cpu";
  info.command_json = Json(std::vector<std::string>{"colibri", "vopr", "--seed", std::to_string(options.seed), "--run",
                                                    std::to_string(c.index)})
                          .dump();
  info.seed = c.run_seed;
  info.started_at_ms = reports::NowUnixMs();
  COLIBRI_ASSIGN_OR_RETURN(const int64_t id, store->BeginRun(info));
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults results, replay::LocalRunStoredResults(result, "{}"));
  COLIBRI_RETURN_IF_ERROR(store->FinishRun(id, results, reports::NowUnixMs()));
  // Read back: complete, its checksum matching (Results verifies it), the faults all there.
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunInfo stored, store->Info(id));
  if (stored.status != "complete") return Status::Corruption("run " + std::to_string(id) + " is " + stored.status);
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults read, store->Results(id));
  if (read.faults.size() != results.faults.size()) {
    return Status::Corruption("run " + std::to_string(id) + " holds " + std::to_string(read.faults.size()) +
                              " faults, " + std::to_string(results.faults.size()) + " were written");
  }
  return id;
}

// Both runs of one configuration, checked and stored.
Result<VoprRunReport> RunOne(const VoprOptions& options, const VoprRunConfig& config, const sim::NvmeProfile& drive,
                             reports::RunStore* store) {
  VoprRunReport report;
  report.config = config;
  const uint32_t index = config.index;
  report.repro = Repro(options.seed, index);
  const VoprRunConfig& c = report.config;
  const std::string dir = (std::filesystem::path(options.work_dir) / ("vopr-run-" + std::to_string(index))).string();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  COLIBRI_ASSIGN_OR_RETURN(const engine::ModelConfig model, engine::SynthModel(c.shape, c.run_seed, dir));
  const uint64_t block = model.layout.block_bytes;
  auto oracle = replay::RunLocal(RunOptions(c, dir, block, drive, false));
  auto faulty = replay::RunLocal(RunOptions(c, dir, block, drive, true));
  if (!oracle.ok()) {
    report.violations.push_back("the oracle run failed: " + oracle.status().message());
  } else if (!faulty.ok()) {
    report.violations.push_back("the faulty run failed instead of isolating: " + faulty.status().message());
  } else {
    report.violations = CheckRun(c, block, oracle.value(), faulty.value());
    report.faults_injected = faulty.value().faults.size();
    report.faults_by_kind.assign(sim::kFaultKindCount, 0);
    for (const sim::InjectedFault& f : faulty.value().faults) {
      for (size_t k = 0; k < sim::kFaultKindCount; ++k) {
        report.faults_by_kind[k] += f.kind == sim::FaultKindName(static_cast<sim::FaultKind>(k));
      }
    }
    report.read_retries = faulty.value().read_retries;
    report.failed_requests = static_cast<uint32_t>(faulty.value().failed_requests.size());
    if (store != nullptr) {
      for (const bool is_faulty : {false, true}) {
        auto id = Store(store, options, c, is_faulty, is_faulty ? faulty.value() : oracle.value());
        if (!id.ok()) {
          report.violations.push_back("the stored run is not complete and intact: " + id.status().message());
          continue;
        }
        (is_faulty ? report.faulty_run_id : report.oracle_run_id) = id.value();
      }
    }
  }
  std::filesystem::remove_all(dir, ignored);
  return report;
}

}  // namespace

std::string VoprRunConfig::Describe() const {
  std::string s = std::string(engine::DTypeName(shape.dtype)) + " " + std::to_string(shape.layer_ids.size()) + "x" +
                  std::to_string(shape.experts) + " top-" + std::to_string(shape.top_k) + " H=" +
                  std::to_string(shape.hidden) + " I=" + std::to_string(shape.intermediate) + "; router " +
                  std::string(engine::RouterModeName(routing.router.mode)) +
                  (routing.capacity_factor > 0 ? " capacity " + std::to_string(routing.capacity_factor).substr(0, 4) +
                                                     (routing.capacity_overflow == engine::CapacityOverflow::kDrop
                                                          ? " drop" : " reroute")
                                               : "") +
                  "; L1 " +
                  std::to_string(l1_blocks) + " blocks " + l1_policy + ", L2 " + std::to_string(l2_blocks) +
                  " blocks " + l2_policy + ", prefetch " + prefetch + ", staging " + std::to_string(staging_slots) +
                  ", depth " + std::to_string(queue_depth) + ", threads " + std::to_string(threads) + "; " +
                  std::to_string(requests) + " requests x (" + std::to_string(prefill_tokens) + " + " +
                  std::to_string(decode_passes) + "); retries " + std::to_string(read_retries) + "; faults " +
                  sim::FormatFaultSpec(faults);
  return s;
}

uint32_t VoprResult::failed_runs() const {
  return static_cast<uint32_t>(
      std::count_if(runs.begin(), runs.end(), [](const VoprRunReport& r) { return !r.violations.empty(); }));
}

VoprRunConfig DeriveRunConfig(uint64_t seed, uint32_t index) {
  VoprRunConfig c;
  c.index = index;
  c.run_seed = sim::DeriveSeed(seed, "vopr.run." + std::to_string(index));
  Draw d(c.run_seed);
  static constexpr engine::DType kDTypes[] = {engine::DType::kFp32, engine::DType::kBf16, engine::DType::kInt8};
  static constexpr uint32_t kExperts[] = {4, 8, 16};
  static constexpr uint32_t kHidden[] = {64, 128, 256};
  static constexpr uint32_t kIntermediate[] = {32, 64, 128};
  static constexpr uint32_t kDepths[] = {1, 2, 4, 8, 32};
  static const std::string kPolicies[] = {"lru", "lfu", "layer", "layerlfu", "lfru", "arc", "random"};
  static const std::string kPrefetch[] = {"none", "coact", "lookahead"};
  c.shape.dtype = d.Of(kDTypes);
  const uint32_t layers = 2 + d.Below(3);
  for (uint32_t l = 0; l < layers; ++l) c.shape.layer_ids.push_back(l);
  c.shape.experts = d.Of(kExperts);
  c.shape.top_k = 1 + d.Below(std::min<uint32_t>(4, c.shape.experts));
  c.shape.hidden = d.Of(kHidden);
  c.shape.intermediate = d.Of(kIntermediate);
  const uint32_t blocks = layers * c.shape.experts;
  c.l1_blocks = d.OneIn(2) ? 0 : 1 + d.Below(blocks);
  c.l2_blocks = d.OneIn(4) ? 0 : 1 + d.Below(blocks);
  c.l1_policy = d.Of(kPolicies);
  c.l2_policy = d.Of(kPolicies);
  c.prefetch = c.l2_blocks > 0 ? d.Of(kPrefetch) : "none";
  c.staging_slots = 1 + d.Below(4);
  c.queue_depth = d.Of(kDepths);
  c.threads = 1 + d.Below(2);
  c.read_retries = d.Below(4);
  c.requests = 1 + d.Below(8);
  c.prefill_tokens = 1 + d.Below(16);
  c.decode_passes = d.Below(17);
  engine::RouterConfig& router = c.routing.router;
  static constexpr engine::RouterMode kModes[] = {engine::RouterMode::kSoftmaxTopK, engine::RouterMode::kSigmoidGrouped,
                                                  engine::RouterMode::kHashProjection, engine::RouterMode::kHashToken};
  router.mode = d.Of(kModes);
  if (router.mode == engine::RouterMode::kSigmoidGrouped) {
    static constexpr uint32_t kGroups[] = {1, 2, 4};  // each divides 4, 8 and 16
    router.groups = d.Of(kGroups);
    const uint32_t per_group = c.shape.experts / router.groups;
    const uint32_t fewest = (c.shape.top_k + per_group - 1) / per_group;  // top_k <= kept x experts per group
    router.kept_groups = fewest + d.Below(router.groups - fewest + 1);
  } else if (router.mode == engine::RouterMode::kHashProjection) {
    router.projection_dims = 1 + d.Below(8);
  } else if (router.mode == engine::RouterMode::kHashToken) {
    router.vocab_size = replay::LocalRunOptions{}.vocab;  // the seeded token ids' vocabulary
  }
  if (d.OneIn(3)) {
    c.routing.capacity_factor = 1.0 + 0.25 * d.Below(5);
    c.routing.capacity_overflow = d.OneIn(2) ? engine::CapacityOverflow::kDrop : engine::CapacityOverflow::kReroute;
  }
  sim::FaultSpec& f = c.faults;
  if (d.OneIn(2)) f.storage_eio = Rate(5 + d.Below(95));
  if (d.OneIn(2)) f.storage_short = Rate(5 + d.Below(95));
  if (d.OneIn(2)) f.storage_spike = Rate(3 + d.Below(30), 1000 * (50 + d.Below(2000)));
  if (d.OneIn(2)) f.storage_stuck = Rate(10 + d.Below(100), 1000 * (100 + d.Below(5000)));
  if (d.OneIn(2)) f.storage_corrupt = Rate(5 + d.Below(95));
  if (d.OneIn(3)) f.transfer_fail = Rate(10 + d.Below(100));
  if (d.OneIn(3)) f.compute_fail = Rate(50 + d.Below(500));
  if (!f.any()) f.storage_eio = Rate(20);
  return c;
}

std::vector<std::string> CheckRun(const VoprRunConfig& c, uint64_t block_bytes, const replay::LocalRunResult& oracle,
                                  const replay::LocalRunResult& faulty) {
  std::vector<std::string> v;
  if (!oracle.failed_requests.empty() || !oracle.faults.empty()) {
    v.push_back("the oracle failed " + std::to_string(oracle.failed_requests.size()) + " requests and injected " +
                std::to_string(oracle.faults.size()) + " faults (expected none)");
  }
  if (faulty.request_output_digests.size() != oracle.request_output_digests.size()) {
    v.push_back("the runs have different request counts");
    return v;
  }
  // Expert capacity couples the tokens of a layer batch (a token's slots
  // depend on the others'): once a failed request leaves the later passes,
  // the others may be routed otherwise. Outputs are then compared only when
  // nothing failed.
  const bool coupled = c.routing.capacity_factor > 0 && !faulty.failed_requests.empty();
  for (size_t r = 0; r < faulty.request_output_digests.size() && !coupled; ++r) {
    const std::string& got = faulty.request_output_digests[r];
    if (!got.empty() && got != oracle.request_output_digests[r]) {
      v.push_back("request " + std::to_string(r) + " completed with output digest " + got + ", the oracle's is " +
                  oracle.request_output_digests[r]);
    }
  }
  for (const replay::FailedRequest& f : faulty.failed_requests) {
    if (!faulty.request_output_digests[f.request].empty()) {
      v.push_back("request " + std::to_string(f.request) + " failed but has an output digest");
    }
    if (f.error.find("of MoE layer " + std::to_string(f.layer_index)) == std::string::npos) {
      v.push_back("request " + std::to_string(f.request) + "'s failure does not name its MoE layer: " + f.error);
    }
  }
  for (const replay::LocalRunResult* r : {&oracle, &faulty}) {
    const char* which = r == &oracle ? "oracle" : "faulty run";
    for (const engine::TierCounters* t : {&r->l1, &r->l2}) {
      if (t->hits + t->misses != t->lookups) {
        v.push_back(std::string(which) + ": a tier's hits + misses (" + std::to_string(t->hits) + " + " +
                    std::to_string(t->misses) + ") != lookups (" + std::to_string(t->lookups) + ")");
      }
    }
    if (r->served > r->lookups) v.push_back(std::string(which) + ": served more than it looked up");
    const uint64_t budget = (uint64_t{c.l1_blocks} + c.l2_blocks + c.staging_slots) * block_bytes;
    if (r->pool_bytes > budget) {
      v.push_back(std::string(which) + ": pools of " + std::to_string(r->pool_bytes) + " bytes exceed the budgets (" +
                  std::to_string(budget) + ")");
    }
  }
  uint64_t read_failing = 0;
  for (const sim::InjectedFault& f : faulty.faults) read_failing += f.kind.rfind("storage.", 0) == 0 && f.kind != "storage.spike";
  if (faulty.read_retries > read_failing) {
    v.push_back("retried " + std::to_string(faulty.read_retries) + " reads after " + std::to_string(read_failing) +
                " read faults");
  }
  if (faulty.failed_requests.empty()) {
    if (faulty.output_digest != oracle.output_digest) v.push_back("no request failed, yet the output digest differs");
    // A prefetch that failed for good drops its entry (read again on demand): the cache then legitimately differs.
    const bool same_reads = faulty.prefetch.failed == 0;
    if (same_reads && (faulty.l1.hits != oracle.l1.hits || faulty.l2.hits != oracle.l2.hits ||
                       faulty.read_bytes != oracle.read_bytes)) {
      v.push_back("no read failed for good, yet the cache decisions or bytes read differ from the oracle's");
    }
  }
  return v;
}

Result<VoprResult> RunVopr(const VoprOptions& options) {
  if (options.work_dir.empty()) return Status::InvalidArgument("vopr: a work directory is required");
  if (options.runs == 0 && options.minutes <= 0 && options.only_run < 0) {
    return Status::InvalidArgument("vopr: --runs must be at least 1");
  }
  COLIBRI_ASSIGN_OR_RETURN(const sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_ASSIGN_OR_RETURN(const sim::NvmeProfile* drive, catalog.Nvme(kDrive));
  std::unique_ptr<reports::RunStore> store;
  if (!options.db_path.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(store, reports::RunStore::Open(options.db_path));
  }
  VoprResult result;
  result.faults_by_kind.assign(sim::kFaultKindCount, 0);
  const auto start = std::chrono::steady_clock::now();  // soak duration only
  const auto soaking = [&] {
    return std::chrono::duration<double, std::ratio<60>>(std::chrono::steady_clock::now() - start).count() <
           options.minutes;
  };
  const auto run = [&](uint32_t i) -> Status {
    if (options.on_run_start) options.on_run_start(i);
    COLIBRI_ASSIGN_OR_RETURN(VoprRunReport report, RunOne(options, DeriveRunConfig(options.seed, i), *drive, store.get()));
    for (size_t k = 0; k < report.faults_by_kind.size(); ++k) result.faults_by_kind[k] += report.faults_by_kind[k];
    result.runs.push_back(std::move(report));
    return Status::Ok();
  };
  if (options.only_run >= 0) {
    COLIBRI_RETURN_IF_ERROR(run(static_cast<uint32_t>(options.only_run)));
  } else if (options.minutes > 0) {
    for (uint32_t i = 0; soaking(); ++i) COLIBRI_RETURN_IF_ERROR(run(i));
  } else {
    for (uint32_t i = 0; i < options.runs; ++i) COLIBRI_RETURN_IF_ERROR(run(i));
  }
  return result;
}

Result<VoprRunReport> RunConfig(const VoprOptions& options, const VoprRunConfig& config) {
  if (options.work_dir.empty()) return Status::InvalidArgument("vopr: a work directory is required");
  COLIBRI_ASSIGN_OR_RETURN(const sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_ASSIGN_OR_RETURN(const sim::NvmeProfile* drive, catalog.Nvme(kDrive));
  return RunOne(options, config, *drive, nullptr);
}

}  // namespace colibri::vopr
