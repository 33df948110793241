// Subcommand registration. Each function adds its subcommands to `parent`;
// a subcommand's callback stores its exit code in *exit_code.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace colibri::cli {

void AddTraceImportCommand(CLI::App* trace, int* exit_code);    // cmd_trace_import.cc
void AddTraceSynthCommand(CLI::App* trace, int* exit_code);     // cmd_trace_synth.cc
void AddTraceInspectCommands(CLI::App* trace, int* exit_code);  // cmd_trace_inspect.cc: inspect validate stats slice merge
void AddBenchCommands(CLI::App* bench, int* exit_code);         // cmd_bench.cc
void AddModelCommands(CLI::App* model, int* exit_code);  // cmd_model.cc: synth export quantize verify
void AddRunCommand(CLI::App* app, int* exit_code);               // cmd_run.cc
void AddBenchComputeCommand(CLI::App* bench, int* exit_code);   // cmd_bench_compute.cc
void AddBenchIoCommand(CLI::App* bench, int* exit_code);        // cmd_bench_io.cc
void AddBenchPcieCommand(CLI::App* bench, int* exit_code);      // cmd_bench_pcie.cc
void AddBenchReplayCommand(CLI::App* bench, int* exit_code);    // cmd_bench_replay.cc
void AddBenchStoreCommand(CLI::App* bench, int* exit_code);     // cmd_bench_store.cc
void AddHwCommand(CLI::App* app, int* exit_code);               // cmd_hw.cc: hw list, hw show
void AddReplayCommand(CLI::App* app, int* exit_code);           // cmd_replay.cc
void AddRunsCommands(CLI::App* app, int* exit_code);            // cmd_runs.cc: runs list show export delete rerun
void AddReportCommands(CLI::App* app, int* exit_code);          // cmd_report.cc: report compare, report gate
void AddCacheCommands(CLI::App* app, int* exit_code);           // cmd_cache.cc: cache sweep
void AddReproCommand(CLI::App* app, int* exit_code);            // cmd_repro.cc: repro SPEC [--minimize]
void AddRouteCommands(CLI::App* app, int* exit_code);           // cmd_route.cc: route stability
void AddFidelityCommand(CLI::App* app, int* exit_code);         // cmd_fidelity.cc
void AddCalibrateCommand(CLI::App* app, int* exit_code);        // cmd_calibrate.cc
void AddVoprCommand(CLI::App* app, int* exit_code);             // cmd_vopr.cc

// Parses and runs one command line (argv without the program name): what
// main() does, and what `runs rerun` does with a stored run's argv. Returns the exit code.
int RunCommandLine(std::vector<std::string> args);

}  // namespace colibri::cli
