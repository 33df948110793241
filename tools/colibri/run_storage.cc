#include "run_storage.h"
#include "version.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace colibri::cli {

void AddDbFlag(CLI::App* command, StoreFlags* flags) {
  command->add_option("--db", flags->db, "Run store (SQLite; default $COLIBRI_DB or ./colibri-runs.db)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            return text.empty() ? std::string("an empty path (leave --db out for the default store)") : std::string();
          },
          ""));
}

void AddStoreFlags(CLI::App* command, StoreFlags* flags) {
  AddDbFlag(command, flags);
  command->add_flag("--no-store", flags->no_store, "Do not store the run in the run store");
}

std::string DbPath(const StoreFlags& flags) { return flags.db.empty() ? reports::DefaultDbPath() : flags.db; }

Result<std::unique_ptr<reports::RunStore>> OpenStore(const StoreFlags& flags) {
  return reports::RunStore::Open(DbPath(flags));
}

Result<std::unique_ptr<reports::RunStore>> OpenStoreForReading(const StoreFlags& flags) {
  reports::RunStore::Options options;
  options.read_only = true;
  return reports::RunStore::Open(DbPath(flags), options);
}

namespace {
std::vector<std::string>& InvocationStorage() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void SetInvocation(std::vector<std::string> args) { InvocationStorage() = std::move(args); }
const std::vector<std::string>& Invocation() { return InvocationStorage(); }

std::vector<std::string> RerunArgs(const std::vector<std::string>& options_to_drop,
                                   const std::vector<std::string>& extra) {
  std::vector<std::string> with_value = options_to_drop;
  with_value.insert(with_value.end(), {"--db", "-o", "--output"});
  const std::vector<std::string> flags{"--no-store", "--json"};
  std::vector<std::string> out;
  const std::vector<std::string>& args = Invocation();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string name = a.substr(0, a.find('='));
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) continue;
    if (std::find(with_value.begin(), with_value.end(), name) != with_value.end()) {
      if (name == a) ++i;  // "--opt value": skip the value too
      continue;
    }
    out.push_back(a);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

void StampRun(const std::vector<std::string>& rerun_args, reports::RunInfo* info) {
  info->tool_version = ColibriVersion();
  info->git_commit = ColibriGitCommit();
  info->started_at_ms = NowUnixMs();
  info->command_json = nlohmann::json(rerun_args).dump();
}

std::vector<int64_t>& StoredRunIds() {
  static std::vector<int64_t> ids;
  return ids;
}

}  // namespace colibri::cli
