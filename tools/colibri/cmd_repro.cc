// `colibri repro SPEC [--minimize -o SMALL.ctrace]`: replays a repro spec
// deterministically, checking its invariants at every layer batch; exit 1 on
// the first violation (with its context), 0 when every invariant holds
// (docs/REPRO.md). --minimize writes the smallest violating slice and its spec.
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "colibri/replay/repro.h"
#include "colibri/replay/run_record.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

namespace fs = std::filesystem;

struct ReproFlags {
  std::string spec;
  bool minimize = false;
  std::string output;
  bool allow_torn = false;
  StoreFlags store;
  bool json = false;
};

// Stores the repro's run: complete when the replay reached its end, failed (with the violation) when it stopped.
Result<int64_t> StoreRepro(const ReproFlags& f, const replay::ReplayConfig& config, const replay::ReproOutcome& o) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<reports::RunStore> store, OpenStore(f.store));
  COLIBRI_ASSIGN_OR_RETURN(reports::RunInfo info, replay::ReplayRunInfo(config));
  info.kind = "repro";
  StampRun(RerunArgs({}, {}), &info);
  COLIBRI_ASSIGN_OR_RETURN(const int64_t id, store->BeginRun(info));
  if (!o.result) {
    COLIBRI_RETURN_IF_ERROR(store->FailRun(id, "invariant violated: " + o.invariant + ": " + o.violation, NowUnixMs()));
  } else {
    COLIBRI_RETURN_IF_ERROR(store->FinishRun(id, replay::ReplayRunResults(*o.result, "{}"), NowUnixMs()));
  }
  StoredRunIds().push_back(id);
  return id;
}

Json OutcomeJson(const replay::ReproSpec& spec, const replay::ReproOutcome& o) {
  return Json{{"spec", spec.path},
              {"seed", spec.seed},
              {"config", Json::parse(replay::ReproSpecJson(spec, spec.trace))},
              {"outcome", o.violated ? "violation" : "pass"},
              {"expected", spec.expect_violation ? "violation" : "pass"},
              {"invariant", o.violated ? Json(o.invariant) : Json(nullptr)},
              {"violation", o.violated ? Json(o.violation) : Json(nullptr)},
              {"layer_batches", o.layer_batches},
              {"event_digest", o.result ? Json(o.result->event_digest) : Json(nullptr)}};
}

Result<Json> Minimize(const ReproFlags& f, const replay::ReproSpec& spec, const sim::HardwareCatalog& catalog) {
  if (f.output.empty()) return Status::InvalidArgument("--minimize writes a trace: pass -o SMALL.ctrace");
  const fs::path spec_out = fs::path(f.output).parent_path() / "spec.json";
  if (fs::exists(spec_out) && fs::equivalent(spec_out, spec.path)) {
    return Status::InvalidArgument("-o " + f.output + ": its folder holds the input spec; minimize into another folder");
  }
  COLIBRI_ASSIGN_OR_RETURN(const replay::MinimizeReport r, replay::MinimizeRepro(spec, catalog, f.output, spec_out.string()));
  return Json{{"spec", spec.path},
              {"invariant", r.invariant},
              {"violation", r.violation},
              {"records_before", r.records_before},
              {"records_after", r.records_after},
              {"records_fraction", r.records_before ? static_cast<double>(r.records_after) / r.records_before : 0.0},
              {"replays", r.replays},
              {"trace", f.output},
              {"spec_out", spec_out.string()}};
}

int Run(const ReproFlags& f) {
  auto catalog = sim::HardwareCatalog::BuiltIn();
  if (!catalog.ok()) return Fail(catalog.status());
  auto spec = replay::LoadReproSpec(f.spec);
  if (!spec.ok()) return Fail(spec.status());
  spec.value().allow_torn = f.allow_torn;
  if (f.minimize) return Emit(Minimize(f, spec.value(), catalog.value()), f.json, [](const Json& j) {
    std::printf("minimized %s: %llu of %llu records (%.2f%%) in %llu replays; %s\n%s\nwrote %s and %s\n",
                j["spec"].get<std::string>().c_str(), static_cast<unsigned long long>(j["records_after"].get<uint64_t>()),
                static_cast<unsigned long long>(j["records_before"].get<uint64_t>()),
                100.0 * j["records_fraction"].get<double>(), static_cast<unsigned long long>(j["replays"].get<uint64_t>()),
                j["invariant"].get<std::string>().c_str(), j["violation"].get<std::string>().c_str(),
                j["trace"].get<std::string>().c_str(), j["spec_out"].get<std::string>().c_str());
  });
  if (!f.json) std::printf("seed %llu\n%s", static_cast<unsigned long long>(spec.value().seed),
                           replay::ReproSpecJson(spec.value(), spec.value().trace).c_str());
  auto outcome = replay::RunRepro(spec.value(), catalog.value());
  if (!outcome.ok()) return Fail(outcome.status());
  Json j = OutcomeJson(spec.value(), outcome.value());
  if (!f.store.no_store) {
    auto config = replay::ReproReplayConfig(spec.value(), catalog.value());
    auto id = config.ok() ? StoreRepro(f, config.value(), outcome.value()) : Result<int64_t>(config.status());
    if (!id.ok()) return Fail(id.status());
    j["run_id"] = id.value();
  }
  if (f.json) {
    PrintJson(j);
  } else if (outcome.value().violated) {
    std::printf("VIOLATION %s\n  %s\n", outcome.value().invariant.c_str(), outcome.value().violation.c_str());
  } else {
    std::printf("PASS: every invariant held over %llu layer batches\n",
                static_cast<unsigned long long>(outcome.value().layer_batches));
  }
  return outcome.value().violated ? kExitCheckFailed : kExitOk;
}

}  // namespace

void AddReproCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<ReproFlags>();
  CLI::App* cmd = app->add_subcommand("repro", "Replay a repro spec and check its invariants (exit 1 on a violation)");
  cmd->add_option("spec", f->spec, "Repro spec (JSON, beside its trace)")->required();
  cmd->add_flag("--minimize", f->minimize, "Delta-debug the trace to the smallest slice that still violates");
  cmd->add_option("-o,--output", f->output, "--minimize: the small trace (its spec.json is written beside it)");
  AddAllowTornFlag(cmd, &f->allow_torn);
  AddStoreFlags(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Print the outcome as JSON");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace colibri::cli
