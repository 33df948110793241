// Subcommand registration. Each function adds its subcommands to `parent`;
// a subcommand's callback stores its exit code in *exit_code.
#pragma once

#include <CLI/CLI.hpp>

namespace colibri::cli {

void AddTraceImportCommand(CLI::App* trace, int* exit_code);    // cmd_trace_import.cc
void AddTraceSynthCommand(CLI::App* trace, int* exit_code);     // cmd_trace_synth.cc
void AddTraceInspectCommands(CLI::App* trace, int* exit_code);  // cmd_trace_inspect.cc: inspect validate stats slice merge
void AddBenchCommands(CLI::App* bench, int* exit_code);         // cmd_bench.cc

}  // namespace colibri::cli
