// colibri: one binary, CLI11 subcommands. Exit codes: 0 ok, 1 a check failed,
// 2 bad input or usage (see cli_common.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <new>

#include "cli_common.h"
#include "version.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {

int RunCommandLine(std::vector<std::string> args) {
  CLI::App app{"Colibri: MoE inference engine with expert offloading, and its trace/replay testbed"};
  app.set_version_flag("--version", std::string("colibri ") + ColibriVersion() + " (" + ColibriGitCommit() + ")");
  app.require_subcommand(1);
  int exit_code = kExitOk;

  CLI::App* trace = app.add_subcommand("trace", "Import, inspect, validate and summarise routing traces");
  trace->require_subcommand(1);
  AddTraceImportCommand(trace, &exit_code);
  AddTraceSynthCommand(trace, &exit_code);
  AddTraceInspectCommands(trace, &exit_code);

  CLI::App* model = app.add_subcommand("model", "Write, convert and verify models in the Colibri on-disk format");
  model->require_subcommand(1);
  AddModelCommands(model, &exit_code);

  AddRunCommand(&app, &exit_code);
  AddHwCommand(&app, &exit_code);
  AddReplayCommand(&app, &exit_code);
  AddRunsCommands(&app, &exit_code);
  AddReportCommands(&app, &exit_code);
  AddCacheCommands(&app, &exit_code);
  AddReproCommand(&app, &exit_code);
  AddRouteCommands(&app, &exit_code);
  AddFidelityCommand(&app, &exit_code);
  AddCalibrateCommand(&app, &exit_code);
  AddVoprCommand(&app, &exit_code);

  CLI::App* bench = app.add_subcommand("bench", "Micro-benchmarks, side by side with reference tools");
  bench->require_subcommand(1);
  AddBenchCommands(bench, &exit_code);

  ApplyStrictNumbers(&app);
  SetInvocation(args);
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  // Commands run inside parse(). No exception reaches std::terminate: an
  // allocation the machine cannot satisfy (sizes from flags or files) and any
  // other escaped exception become a message and exit 2, after the stack has
  // unwound (temporary outputs are removed by their owners on the way).
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "colibri: out of memory: the sizes asked for (flags or input files) need more memory than this "
                 "process could allocate; nothing was written\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "colibri: internal error (an exception escaped): " << e.what() << "\n";
    return kExitBadInput;
  }
  return exit_code;
}

}  // namespace colibri::cli

int main(int argc, char** argv) { return colibri::cli::RunCommandLine(std::vector<std::string>(argv + 1, argv + argc)); }
