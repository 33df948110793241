#include "colibri/sim/fault_spec.h"

#include <array>
#include <string>

#include "colibri/bounded_echo.h"

namespace colibri::sim {
namespace {

constexpr uint64_t kMaxRateTerm = 1'000'000'000;
constexpr engine::TimeNs kMaxDurationNs = 3'600'000'000'000;  // 1 hour

struct KindInfo {
  FaultKind kind;
  std::string_view site;
  std::string_view kind_name;  // after the site's "."
  const char* name;            // the whole spec name
  bool takes_duration;
};

// In FaultKind order.
constexpr std::array<KindInfo, kFaultKindCount> kKinds = {{
    {FaultKind::kStorageEio, "storage", "eio", "storage.eio", false},
    {FaultKind::kStorageShort, "storage", "short", "storage.short", false},
    {FaultKind::kStorageSpike, "storage", "spike", "storage.spike", true},
    {FaultKind::kStorageStuck, "storage", "stuck", "storage.stuck", true},
    {FaultKind::kStorageCorrupt, "storage", "corrupt", "storage.corrupt", false},
    {FaultKind::kTransferFail, "transfer", "fail", "transfer.fail", false},
    {FaultKind::kTransferOom, "transfer", "oom", "transfer.oom", false},
    {FaultKind::kComputeFail, "compute", "fail", "compute.fail", false},
}};

struct Unit {
  std::string_view name;
  engine::TimeNs ns;
};
// Largest first (FormatFaultDuration's search order).
constexpr std::array<Unit, 4> kUnits = {{{"s", 1'000'000'000}, {"ms", 1'000'000}, {"us", 1'000}, {"ns", 1}}};

const KindInfo& Info(FaultKind kind) { return kKinds[static_cast<size_t>(kind)]; }

// The kinds of `site`, for messages: "eio, short, spike, stuck or corrupt".
std::string KindsOf(std::string_view site) {
  std::string names;
  size_t count = 0;
  for (const KindInfo& k : kKinds) count += k.site == site ? 1 : 0;
  size_t seen = 0;
  for (const KindInfo& k : kKinds) {
    if (k.site != site) continue;
    if (seen > 0) names += seen + 1 == count ? " or " : ", ";
    names += k.kind_name;
    ++seen;
  }
  return names;
}

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<FaultSpec> Parse() {
    FaultSpec spec;
    if (text_.empty() || text_ == "none") return spec;
    std::array<bool, kFaultKindCount> seen{};
    while (true) {
      COLIBRI_RETURN_IF_ERROR(Rule(&spec, &seen));
      if (at_ == text_.size()) return spec;
      if (text_[at_] != ',') return Error(at_, "expected \",\" or the end of the spec after a rule");
      ++at_;
      if (at_ == text_.size()) return Error(at_, "expected a fault rule after \",\"");
    }
  }

 private:
  Status Error(size_t at, const std::string& what) const {
    return Status::InvalidArgument("fault spec: at byte " + std::to_string(at) + ": " + what);
  }

  std::string_view Word() {
    const size_t start = at_;
    while (at_ < text_.size() && IsWordChar(text_[at_])) ++at_;
    return text_.substr(start, at_ - start);
  }

  bool Eat(char c) {
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  // A decimal integer; values above `cap` read as cap + 1 (the digits are still consumed).
  // false when there is no digit here.
  bool Number(uint64_t cap, uint64_t* value) {
    if (at_ == text_.size() || !IsDigit(text_[at_])) return false;
    uint64_t v = 0;
    while (at_ < text_.size() && IsDigit(text_[at_])) {
      v = v > cap ? cap + 1 : v * 10 + static_cast<uint64_t>(text_[at_] - '0');
      ++at_;
    }
    *value = v > cap ? cap + 1 : v;
    return true;
  }

  std::string Echo(size_t start) const { return BoundedEcho(text_.substr(start, at_ - start)); }

  Status Rule(FaultSpec* spec, std::array<bool, kFaultKindCount>* seen) {
    const size_t rule_at = at_;
    const std::string_view site = Word();
    if (site.empty()) return Error(rule_at, "expected a fault site (storage, transfer or compute)");
    if (site == "none") return Error(rule_at, "\"none\" must stand alone (it is the whole spec)");
    if (site != "storage" && site != "transfer" && site != "compute") {
      return Error(rule_at, "unknown fault site '" + BoundedEcho(site) + "' (expected storage, transfer or compute)");
    }
    if (!Eat('.')) return Error(at_, "expected \".\" after the fault site '" + std::string(site) + "'");
    const size_t kind_at = at_;
    const std::string_view kind_name = Word();
    const KindInfo* info = nullptr;
    for (const KindInfo& k : kKinds) {
      if (k.site == site && k.kind_name == kind_name) info = &k;
    }
    if (info == nullptr) {
      const std::string kinds = KindsOf(site);
      if (kind_name.empty()) return Error(kind_at, "expected a " + std::string(site) + " fault kind (" + kinds + ")");
      return Error(kind_at,
                   "unknown " + std::string(site) + " fault '" + BoundedEcho(kind_name) + "' (expected " + kinds + ")");
    }
    bool& already = (*seen)[static_cast<size_t>(info->kind)];
    if (already) return Error(rule_at, std::string(info->name) + " given twice (each kind at most once)");
    already = true;
    if (!Eat('=')) return Error(at_, "expected \"=\" after " + std::string(info->name));

    FaultRate rate;
    const size_t n_at = at_;
    uint64_t n = 0;
    if (!Number(kMaxRateTerm, &n)) return Error(at_, "expected the rate's numerator (a decimal integer) after \"=\"");
    const std::string n_text = Echo(n_at);
    if (n > kMaxRateTerm) return Error(n_at, "the rate's numerator " + n_text + " is above 1000000000");
    if (n == 0) return Error(n_at, "the rate's numerator must be >= 1 (leave the rule out to turn it off)");
    if (!Eat('/')) return Error(at_, "expected \"/\" after the rate's numerator");
    const size_t d_at = at_;
    uint64_t d = 0;
    if (!Number(kMaxRateTerm, &d)) return Error(at_, "expected the rate's denominator (a decimal integer) after \"/\"");
    const std::string d_text = Echo(d_at);
    if (d > kMaxRateTerm) return Error(d_at, "the rate's denominator " + d_text + " is above 1000000000");
    if (d == 0) return Error(d_at, "the rate's denominator must be >= 1");
    if (n > d) return Error(n_at, "rate " + n_text + "/" + d_text + ": the numerator must be <= the denominator");
    rate.n = static_cast<uint32_t>(n);
    rate.d = static_cast<uint32_t>(d);

    if (at_ < text_.size() && text_[at_] == ':') {
      if (!info->takes_duration) return Error(at_, std::string(info->name) + " takes no duration");
      ++at_;
      COLIBRI_RETURN_IF_ERROR(Duration(&rate.duration_ns));
    } else if (info->takes_duration) {
      return Error(at_, std::string(info->name) + " needs a duration: \":\" and e.g. 5ms after the rate");
    }
    spec->rate(info->kind) = rate;
    return Status::Ok();
  }

  Status Duration(engine::TimeNs* duration_ns) {
    const size_t value_at = at_;
    uint64_t value = 0;
    if (!Number(static_cast<uint64_t>(kMaxDurationNs), &value)) {
      return Error(at_, "expected a duration (a decimal integer and ns, us, ms or s) after \":\"");
    }
    const std::string value_text = Echo(value_at);
    const size_t unit_at = at_;
    const std::string_view unit_name = Word();
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_name) unit = &u;
    }
    if (unit == nullptr) {
      const std::string got = unit_name.empty() ? "" : " (got '" + BoundedEcho(unit_name) + "')";
      return Error(unit_at, "expected a duration unit (ns, us, ms or s)" + got);
    }
    if (value == 0) return Error(value_at, "the duration must be > 0");
    if (value > static_cast<uint64_t>(kMaxDurationNs / unit->ns)) {
      return Error(value_at, "the duration " + value_text + std::string(unit->name) + " is above 1 hour (3600s)");
    }
    *duration_ns = static_cast<engine::TimeNs>(value) * unit->ns;
    return Status::Ok();
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

const char* FaultKindName(FaultKind kind) { return Info(kind).name; }

bool FaultKindTakesDuration(FaultKind kind) { return Info(kind).takes_duration; }

FaultRate& FaultSpec::rate(FaultKind kind) {
  switch (kind) {
    case FaultKind::kStorageEio: return storage_eio;
    case FaultKind::kStorageShort: return storage_short;
    case FaultKind::kStorageSpike: return storage_spike;
    case FaultKind::kStorageStuck: return storage_stuck;
    case FaultKind::kStorageCorrupt: return storage_corrupt;
    case FaultKind::kTransferFail: return transfer_fail;
    case FaultKind::kTransferOom: return transfer_oom;
    case FaultKind::kComputeFail: return compute_fail;
  }
  return compute_fail;  // unreachable: every kind is listed
}

const FaultRate& FaultSpec::rate(FaultKind kind) const { return const_cast<FaultSpec*>(this)->rate(kind); }

Result<FaultSpec> ParseFaultSpec(std::string_view text) { return Parser(text).Parse(); }

std::string FormatFaultDuration(engine::TimeNs duration_ns) {
  for (const Unit& u : kUnits) {
    if (duration_ns != 0 && duration_ns % u.ns == 0) return std::to_string(duration_ns / u.ns) + std::string(u.name);
  }
  return std::to_string(duration_ns) + "ns";
}

std::string FormatFaultSpec(const FaultSpec& spec) {
  std::string text;
  for (const KindInfo& k : kKinds) {
    const FaultRate& r = spec.rate(k.kind);
    if (!r.on()) continue;
    if (!text.empty()) text += ',';
    text += std::string(k.name) + "=" + std::to_string(r.n) + "/" + std::to_string(r.d);
    if (k.takes_duration) text += ":" + FormatFaultDuration(r.duration_ns);
  }
  return text.empty() ? "none" : text;
}

}  // namespace colibri::sim
