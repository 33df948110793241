// colibri: one binary, CLI11 subcommands. Exit codes: 0 ok, 1 a check failed,
// 2 bad input or usage (see cli_common.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli_common.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Colibri: MoE inference engine with expert offloading, and its trace/replay testbed"};
  app.set_version_flag("--version", std::string("colibri ") + COLIBRI_VERSION + " (" + COLIBRI_GIT_COMMIT + ")");
  app.require_subcommand(1);
  int exit_code = colibri::cli::kExitOk;

  CLI::App* trace = app.add_subcommand("trace", "Import, inspect, validate and summarise routing traces");
  trace->require_subcommand(1);
  colibri::cli::AddTraceImportCommand(trace, &exit_code);
  colibri::cli::AddTraceSynthCommand(trace, &exit_code);
  colibri::cli::AddTraceInspectCommands(trace, &exit_code);

  CLI::App* model = app.add_subcommand("model", "Write, convert and verify models in the Colibri on-disk format");
  model->require_subcommand(1);
  colibri::cli::AddModelCommands(model, &exit_code);

  colibri::cli::AddRunCommand(&app, &exit_code);
  colibri::cli::AddHwCommand(&app, &exit_code);
  colibri::cli::AddReplayCommand(&app, &exit_code);

  CLI::App* bench = app.add_subcommand("bench", "Micro-benchmarks, side by side with reference tools");
  bench->require_subcommand(1);
  colibri::cli::AddBenchCommands(bench, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? colibri::cli::kExitOk : colibri::cli::kExitBadInput;
  }
  return exit_code;
}
