#include "cache_flags.h"

#include "colibri/reports/latency_json.h"

namespace colibri::cli {
namespace {

double Ratio(uint64_t part, uint64_t whole) { return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole); }

}  // namespace

void AddQueueFlags(CLI::App* command, uint32_t* queue_depth, uint32_t* staging_slots) {
  command->add_option("--queue-depth", *queue_depth, "NVMe reads in flight")
      ->check(CLI::Range(1u, engine::kMaxStorageQueueDepth))
      ->capture_default_str();
  command->add_option("--staging-slots", *staging_slots,
                      "Transient expert slots for reads no tier admits (L2 = 0, or a batch larger than L2)")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
}

void AddTierFlags(CLI::App* command, TierFlags* flags, const std::string& l1_help, const std::string& l2_help) {
  command->add_option("--l1-bytes", flags->l1_bytes, l1_help)->transform(SizeValidator())->capture_default_str();
  command->add_option("--l2-bytes", flags->l2_bytes, l2_help)->transform(SizeValidator())->capture_default_str();
  command->add_option("--policy", flags->policy, "L2 cache policy")
      ->check(CLI::IsMember(engine::CachePolicyNames()))
      ->capture_default_str();
  command->add_option("--l1-policy", flags->l1_policy, "L1 cache policy")
      ->check(CLI::IsMember(engine::CachePolicyNames()))
      ->capture_default_str();
  AddQueueFlags(command, &flags->queue_depth, &flags->staging_slots);
}

void AddPrefetchFlags(CLI::App* command, PrefetchFlags* flags, const std::vector<std::string>& predictors) {
  std::string known;
  for (const std::string& p : predictors) known += (known.empty() ? "" : ", ") + p;
  command->add_option("--prefetch", flags->predictor, "Prefetch the next layer's experts into L2: " + known)
      ->check(CLI::IsMember(predictors))
      ->capture_default_str();
  command->add_option("--prefetch-width", flags->width, "Experts prefetched per layer batch (0: top-k x tokens)")
      ->capture_default_str();
  command->add_option("--prefetch-decay", flags->decay, "coact: decay of the transition counts, in (0, 1]")
      ->capture_default_str();
}

void AddPinFlags(CLI::App* command, PinFlags* flags) {
  command->add_option("--pin-from", flags->from, "Policy pinned: learn the hot set from this profiling trace")
      ->check(CLI::ExistingFile);
  command->add_option("--pin-bytes", flags->bytes, "Policy pinned: the hot set's size")->transform(SizeValidator());
}

engine::PrefetchConfig ToPrefetchConfig(const PrefetchFlags& flags) {
  engine::PrefetchConfig c;
  c.predictor = flags.predictor;
  c.width = flags.width;
  c.decay = flags.decay;
  return c;
}

Json TierJson(const engine::TierCounters& c) { return reports::TierJson(c.lookups, c.hits); }

Json PrefetchJson(const std::string& predictor, const engine::PrefetchCounters& p, uint64_t l2_misses) {
  if (predictor == "none") return nullptr;
  return Json{{"predictor", predictor},
              {"issued", p.issued},
              {"issued_bytes", p.issued_bytes},
              {"hits", p.hits},
              {"wasted_bytes", p.wasted_bytes},
              {"waits", p.waits},
              {"failed", p.failed},
              {"precision", Ratio(p.predicted_used, p.predicted)},
              {"recall", Ratio(p.predicted_used, p.next_lookups)},
              {"coverage", Ratio(p.hits, p.hits + l2_misses)}};
}

}  // namespace colibri::cli
