// `colibri route stability [TRACE | --synthetic]`: how often each routing
// mode's decisions change under tiny input perturbations, the near-tie count,
// and the load deviation of each mode (docs/ROUTING.md). The measurement is
// replay/route_stability.h; this file parses flags and prints.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli_common.h"
#include "colibri/replay/route_stability.h"
#include "commands.h"

namespace colibri::cli {
namespace {

constexpr uint32_t kSyntheticVocab = 32000;

struct StabilityFlags {
  std::string trace;
  bool allow_torn = false;
  bool synthetic = false;
  std::string modes = "softmax-topk,sigmoid-grouped,hash-projection,hash-token";
  std::string noise = "fp16,bf16,gauss:1e-6";
  double tau = 1e-4;
  bool load_aware = false;
  uint32_t load_window_tokens = 4096;
  double load_threshold = 0.35;
  uint64_t seed = 1;
  uint32_t top_k = 0;
  uint32_t projection_dims = 4;
  uint32_t vocab = 0;
  uint32_t groups = 0;
  uint32_t kept_groups = 0;
  double scaling = 1.0;
  // --synthetic only.
  std::string experts = "16,64,256";
  uint32_t layers = 4;
  uint32_t tokens = 4096;
  uint32_t hidden = 256;
  double zipf = 1.1;
  double state_noise = 0.05;
  bool json = false;
};

Result<std::vector<engine::RouterMode>> Modes(const std::string& text) {
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<std::string> names, SplitList(text, "--modes"));
  std::vector<engine::RouterMode> modes;
  for (const std::string& name : names) {
    const Result<engine::RouterMode> mode = engine::ParseRouterMode(name);
    if (!mode.ok()) return Status::InvalidArgument("--modes: " + mode.status().message());
    modes.push_back(mode.value());
  }
  return modes;
}

Result<std::vector<replay::RouteNoise>> Noises(const std::string& text) {
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<std::string> specs, SplitList(text, "--noise"));
  std::vector<replay::RouteNoise> noises;
  for (const std::string& spec : specs) {
    const Result<replay::RouteNoise> noise = replay::ParseRouteNoise(spec);
    if (!noise.ok()) return Status::InvalidArgument("--noise: " + noise.status().message());
    noises.push_back(noise.value());
  }
  return noises;
}

Result<std::vector<uint32_t>> ExpertCounts(const std::string& text) {
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<std::string> parts, SplitList(text, "--experts"));
  std::vector<uint32_t> counts;
  for (const std::string& part : parts) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(part.c_str(), &end, 10);
    if (end == part.c_str() || *end != '\0' || part[0] == '-' || n == 0 || n > (1u << 20)) {
      return Status::InvalidArgument("--experts: '" + part + "' is not an expert count in [1, 2^20]");
    }
    counts.push_back(static_cast<uint32_t>(n));
  }
  return counts;
}

Result<replay::StabilityOptions> Options(const StabilityFlags& f) {
  replay::StabilityOptions o;
  COLIBRI_ASSIGN_OR_RETURN(o.modes, Modes(f.modes));
  COLIBRI_ASSIGN_OR_RETURN(o.noises, Noises(f.noise));
  o.tau = static_cast<float>(f.tau);
  o.seed = f.seed;
  o.allow_torn = f.allow_torn;
  o.top_k = f.top_k;
  o.projection_dims = f.projection_dims;
  o.vocab_size = f.vocab;
  o.groups = f.groups;
  o.kept_groups = f.kept_groups;
  o.routed_scaling_factor = static_cast<float>(f.scaling);
  o.load_aware.enabled = f.load_aware;
  o.load_aware.window_tokens = f.load_window_tokens;
  o.load_aware.threshold = static_cast<float>(f.load_threshold);
  return o;
}

Result<replay::SyntheticRouteOptions> Synthetic(const StabilityFlags& f) {
  replay::SyntheticRouteOptions s;
  COLIBRI_ASSIGN_OR_RETURN(s.experts, ExpertCounts(f.experts));
  s.layers = f.layers;
  s.tokens = f.tokens;
  s.hidden_size = f.hidden;
  s.vocab_size = f.vocab != 0 ? f.vocab : kSyntheticVocab;
  s.zipf_exponent = f.zipf;
  s.state_noise = f.state_noise;
  return s;
}

Json RowJson(const replay::StabilityRow& r, bool load_aware) {
  Json j{{"mode", engine::RouterModeName(r.mode)}, {"experts", r.experts}};
  if (!r.skipped.empty()) {
    j.update(Json{{"noise", nullptr}, {"decisions", 0}, {"changed_set_fraction", nullptr},
                  {"changed_ranked_fraction", nullptr}, {"near_ties", nullptr}, {"load", nullptr},
                  {"skipped", r.skipped}});
    return j;
  }
  j.update(Json{{"noise", r.noise},
                {"decisions", r.decisions},
                {"changed_set_fraction", r.changed_set_fraction},
                {"changed_ranked_fraction", r.changed_ranked_fraction},
                {"near_ties", r.near_ties ? Json(*r.near_ties) : Json(nullptr)},
                {"load", Json{{"cv", r.load.cv}, {"max_over_mean", r.load.max_over_mean}, {"gini", r.load.gini}}}});
  if (load_aware) j["redirected_fraction"] = r.redirected_fraction.value_or(0.0);
  return j;
}

Json ConfigJson(const StabilityFlags& f, uint32_t top_k) {
  Json c{{"top_k", top_k},
         {"tau", f.tau},
         {"seed", f.seed},
         {"projection_dims", f.projection_dims},
         {"groups", f.groups == 0 ? Json("auto") : Json(f.groups)},
         {"kept_groups", f.kept_groups == 0 ? Json("auto") : Json(f.kept_groups)},
         {"scaling", f.scaling},
         {"load_aware", f.load_aware}};
  if (f.load_aware) {
    c["load_window_tokens"] = f.load_window_tokens;
    c["load_threshold"] = f.load_threshold;
  }
  if (f.synthetic) {
    c["synthetic"] = Json{{"layers", f.layers}, {"tokens", f.tokens},  {"hidden", f.hidden},
                          {"vocab", f.vocab != 0 ? f.vocab : kSyntheticVocab}, {"zipf", f.zipf},
                          {"state_noise", f.state_noise}};
  }
  return c;
}

Result<Json> Stability(const StabilityFlags& f) {
  if (f.synthetic && !f.trace.empty()) {
    return Status::InvalidArgument("--synthetic takes no TRACE (got " + f.trace + ")");
  }
  if (!f.synthetic && f.trace.empty()) return Status::InvalidArgument("give a TRACE or --synthetic");
  COLIBRI_ASSIGN_OR_RETURN(const replay::StabilityOptions options, Options(f));
  replay::StabilityReport report;
  if (f.synthetic) {
    COLIBRI_ASSIGN_OR_RETURN(const replay::SyntheticRouteOptions synthetic, Synthetic(f));
    COLIBRI_ASSIGN_OR_RETURN(report, replay::MeasureSyntheticStability(synthetic, options));
  } else {
    COLIBRI_ASSIGN_OR_RETURN(report, replay::MeasureTraceStability(f.trace, options));
  }
  Json rows = Json::array();
  for (const replay::StabilityRow& r : report.rows) rows.push_back(RowJson(r, f.load_aware));
  Json out{{"source", f.synthetic ? "synthetic" : "trace"},
           {"trace", f.synthetic ? Json(nullptr) : Json(f.trace)},
           {"config", ConfigJson(f, report.top_k)},
           {"results", rows}};
  if (report.truncated) out["truncated"] = true;
  return out;
}

std::string Fixed(const Json& v, const char* format, double scale = 1.0) {
  if (v.is_null()) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), format, v.get<double>() * scale);
  return text;
}

void PrintHuman(const Json& j) {
  const Json& c = j["config"];
  std::printf("source: %s, top-k %u, tau %g, seed %llu%s\n",
              j["trace"].is_null() ? "synthetic" : j["trace"].get<std::string>().c_str(), c["top_k"].get<uint32_t>(),
              c["tau"].get<double>(), static_cast<unsigned long long>(c["seed"].get<uint64_t>()),
              c["load_aware"].get<bool>() ? ", load-aware" : "");
  if (c.contains("synthetic")) {
    const Json& s = c["synthetic"];
    std::printf("synthetic: %u layers, %u tokens, hidden %u, vocab %u, Zipf %g, state noise %g\n",
                s["layers"].get<uint32_t>(), s["tokens"].get<uint32_t>(), s["hidden"].get<uint32_t>(),
                s["vocab"].get<uint32_t>(), s["zipf"].get<double>(), s["state_noise"].get<double>());
  }
  if (j.contains("truncated")) std::printf("warning: the trace has a torn tail; its complete records were measured\n");
  std::printf("%7s  %-15s  %-12s  %9s  %9s  %9s  %9s  %7s  %8s  %6s%s\n", "experts", "mode", "noise", "decisions",
              "set chg%", "rank chg%", "near-ties", "load cv", "max/mean", "gini",
              c["load_aware"].get<bool>() ? "  redirected%" : "");
  for (const Json& r : j["results"]) {
    const std::string mode = r["mode"].get<std::string>();
    if (r.contains("skipped")) {
      std::printf("%7u  %-15s  skipped: %s\n", r["experts"].get<uint32_t>(), mode.c_str(),
                  r["skipped"].get<std::string>().c_str());
      continue;
    }
    const Json& load = r["load"];
    std::printf("%7u  %-15s  %-12s  %9llu  %9s  %9s  %9s  %7s  %8s  %6s", r["experts"].get<uint32_t>(), mode.c_str(),
                r["noise"].get<std::string>().c_str(), static_cast<unsigned long long>(r["decisions"].get<uint64_t>()),
                Fixed(r["changed_set_fraction"], "%.3f", 100).c_str(),
                Fixed(r["changed_ranked_fraction"], "%.3f", 100).c_str(),
                r["near_ties"].is_null() ? "-" : std::to_string(r["near_ties"].get<uint64_t>()).c_str(),
                Fixed(load["cv"], "%.3f").c_str(), Fixed(load["max_over_mean"], "%.2f").c_str(),
                Fixed(load["gini"], "%.3f").c_str());
    if (r.contains("redirected_fraction")) std::printf("  %11s", Fixed(r["redirected_fraction"], "%.3f", 100).c_str());
    std::printf("\n");
  }
}

void AddStabilityCommand(CLI::App* route, int* exit_code) {
  auto f = std::make_shared<StabilityFlags>();
  CLI::App* cmd = route->add_subcommand(
      "stability", "Decisions changed under tiny input noise, near-ties and load deviation, per routing mode");
  cmd->add_option("trace", f->trace, "Trace with router logits, hidden states and/or token ids")
      ->check(CLI::ExistingFile);
  AddAllowTornFlag(cmd, &f->allow_torn);
  CLI::Option* synthetic = cmd->add_flag("--synthetic", f->synthetic, "Route seeded synthetic layer sets instead");
  cmd->add_option("--modes", f->modes, "Routing modes, comma-separated: softmax-topk, sigmoid-grouped, "
                                       "hash-projection, hash-token")
      ->capture_default_str();
  cmd->add_option("--noise", f->noise, "Perturbations, comma-separated: fp16, bf16 (round the input and back), "
                                       "gauss:SIGMA (add N(0, SIGMA^2), absolute)")
      ->capture_default_str();
  cmd->add_option("--tau", f->tau, "A baseline decision whose selection margin is below this is a near-tie")
      ->check(NonNegativeNumber())
      ->capture_default_str();
  cmd->add_flag("--load-aware", f->load_aware, "Route load-aware (token window), and report the redirected fraction");
  cmd->add_option("--load-window-tokens", f->load_window_tokens, "Load-aware window, in tokens")->capture_default_str();
  cmd->add_option("--rebalance-threshold", f->load_threshold, "Load-aware: redirect from experts above mean x (1 + this)")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of W_r, the hash-token tables, the Gaussian noise and the synthetic sets")
      ->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "Experts per token (default: the trace's; 4 with --synthetic)");
  cmd->add_option("--projection-dims", f->projection_dims, "hash-projection: P, the columns of W_r (1 to 8)")
      ->capture_default_str();
  cmd->add_option("--vocab", f->vocab, "hash-token vocabulary (default: the trace's largest token id + 1; "
                                       "32000 with --synthetic)");
  cmd->add_option("--n-group", f->groups, "sigmoid-grouped: expert groups (default: 8 when it divides the expert "
                                         "count, else 1)");
  cmd->add_option("--topk-group", f->kept_groups, "sigmoid-grouped: groups kept (default: min(4, groups))");
  cmd->add_option("--routed-scaling-factor", f->scaling, "sigmoid-grouped: routed scaling factor")->capture_default_str();
  cmd->add_option("--experts", f->experts, "Expert counts, comma-separated")
      ->capture_default_str()
      ->needs(synthetic);
  cmd->add_option("--layers", f->layers, "Layers per set")->capture_default_str()->needs(synthetic);
  cmd->add_option("--tokens", f->tokens, "Tokens routed")->capture_default_str()->needs(synthetic);
  cmd->add_option("--hidden", f->hidden, "Hidden size")->capture_default_str()->needs(synthetic);
  cmd->add_option("--zipf", f->zipf, "Zipf exponent of the token ids")
      ->capture_default_str()
      ->needs(synthetic);
  cmd->add_option("--state-noise", f->state_noise, "Std of the noise added to a token's embedding")
      ->capture_default_str()
      ->needs(synthetic);
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([f, exit_code] { *exit_code = Emit(Stability(*f), f->json, PrintHuman); });
}

}  // namespace

void AddRouteCommands(CLI::App* app, int* exit_code) {
  CLI::App* route = app->add_subcommand("route", "Routing-mode analyses (docs/ROUTING.md)");
  route->require_subcommand(1);
  AddStabilityCommand(route, exit_code);
}

}  // namespace colibri::cli
