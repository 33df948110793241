#include "calibrate_report.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace colibri::calibrate {
namespace {

using Json = nlohmann::ordered_json;

std::string Pct(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%+.1f%%", v * 100);
  return text;
}

std::string Source(const CalibrateReport& r, const CalibrateOptions& o) {
  return "measured by colibri calibrate" + (o.tool_version.empty() ? std::string() : " " + o.tool_version) + " on " +
         r.identity.cpu_model + " (" + std::to_string(r.identity.cores) + " cores, " + r.identity.kernel + "), " +
         r.identity.measured_on + ", commit " + (o.git_commit.empty() ? std::string("unknown") : o.git_commit);
}

sim::Figure Measured(const std::string& field, const std::string& source, const std::string& note = "") {
  return sim::Figure{field, sim::Basis::kMeasured, source, note};
}
sim::Figure Derived(const std::string& field, const std::string& source, const std::string& note) {
  return sim::Figure{field, sim::Basis::kDerived, source, note};
}

}  // namespace

Result<MeasuredProfiles> BuildProfiles(const CalibrateReport& r, const CalibrateOptions& o) {
  const std::string source = Source(r, o);
  const std::string& name = r.machine_name;
  MeasuredProfiles p;
  // Storage: the grid, and the channel model fitted to it.
  sim::NvmeProfile& n = p.nvme;
  n.id = name + "-nvme";
  n.name = "This machine's storage under " + o.dir + ": " + r.storage.block_device + " (" + r.storage.backend + ")";
  const sim::FittedChannelModel& c = r.storage.channel;
  n.channels = c.channels;
  n.per_op_ns = c.per_op_ns;
  n.channel_read_bytes_per_s = c.channel_read_bytes_per_s;
  n.read_bytes_per_s = c.read_bytes_per_s;
  n.read_latency = c.read_latency;
  uint32_t deepest = 1;
  for (const sim::ReadGridPoint& point : r.storage.grid.points) deepest = std::max(deepest, point.queue_depth);
  n.queue_depth = r.storage.device_queue_depth > 0 ? r.storage.device_queue_depth : deepest;
  const std::string fit = "fitted to the read grid (sim::FitChannelModel: the depth-1 medians' line over read size, "
                          "the best throughput, the smallest size's saturation); SimStorage uses the grid itself";
  for (const char* field : {"channels", "per_op_ns", "channel_read_bytes_per_s", "read_bytes_per_s",
                            "read_latency_p50_ns", "read_latency_p99_ns"}) {
    n.figures.push_back(Derived(field, source, fit));
  }
  n.figures.push_back(r.storage.device_queue_depth > 0
                          ? Measured("queue_depth", source, "the block device's tags (/sys/block/*/mq/0/nr_tags)")
                          : Derived("queue_depth", source, "the deepest depth measured (the device's tags unknown)"));
  n.read_grid = r.storage.grid;
  n.read_grid.figure = Measured("read_grid", source,
                                "random O_DIRECT reads through UringStorage on a " + std::to_string(r.storage.file_bytes) +
                                    "-byte file on " + r.storage.block_device +
                                    ", closed loop at each depth (sim::RunClosedLoopReads)");
  // Host copies: a generation-0 link with the memcpy rate.
  sim::PcieProfile& h = p.pcie;
  h.id = name + "-host";
  h.name = "No link: host memory copies (CpuTransfer) on this machine";
  h.generation = 0;
  h.lanes = 0;
  h.pinned_bytes_per_s = std::max<uint64_t>(1, r.host_copies.bytes_per_s);
  h.pageable_bytes_per_s = h.pinned_bytes_per_s;
  h.per_copy_ns = r.host_copies.per_copy_ns;
  h.copy_engines = 1;
  const std::string copies = "CpuTransfer copies of 64 KiB to 16 MiB, least squares of the medians on the size";
  h.figures = {Derived("generation", source, "0: no link, the CPU computes from host memory"),
               Derived("lanes", source, "no link"),
               Measured("pinned_bytes_per_s", source, copies),
               Measured("pageable_bytes_per_s", source, "a host memcpy has one rate: " + copies),
               Measured("per_copy_ns", source, copies),
               Derived("copy_engines", source, "one thread copies")};
  // Compute: the tables, and roofline figures from them.
  sim::ComputeProfile& cpu = p.compute;
  cpu.id = name + "-cpu";
  cpu.name = "This machine's CPU: " + r.identity.cpu_model + " (" + r.compute.isa + " kernels)";
  cpu.kind = sim::ComputeKind::kCpu;
  if (r.compute.best_flops_per_s.empty()) return Status::Internal("calibrate: no dtype measured");
  for (const auto& [dtype, flops] : r.compute.best_flops_per_s) {
    cpu.peak_flops_per_s[dtype] = std::max<uint64_t>(1, flops);
    cpu.figures.push_back(Measured("peak_flops_per_s." + dtype, source,
                                   "the best ExpertFfn rate measured over the table (2 x 3 x H x I FLOPs per token)"));
  }
  if (cpu.peak_flops_per_s.count("fp32") == 0) return Status::Internal("calibrate: fp32 not measured");
  cpu.memory_bytes_per_s = std::max<uint64_t>(1, r.compute.memory_bytes_per_s);
  cpu.launch_ns = 0;
  cpu.memory_bytes = r.identity.ram_bytes;
  cpu.figures.push_back(Measured("memory_bytes_per_s", source, "expert weight bytes a 1-token ExpertFfn streams per "
                                                               "second, the best over the table"));
  cpu.figures.push_back(Derived("launch_ns", source, "0: the measured tables include every call's fixed cost"));
  cpu.figures.push_back(Measured("memory_bytes", source, "/proc/meminfo MemTotal"));
  cpu.ffn_table = r.compute.ffn;
  cpu.ffn_table.figure = Measured("ffn_table", source, "median per CpuCompute::ExpertFfn call, distinct experts cycled");
  cpu.gate_table.entries = r.host_work.gate;
  cpu.gate_table.figure = Measured("gate_table", source, "median per CpuCompute::GateGemv call");
  // The machine.
  sim::MachineProfile& m = p.machine;
  m.name = name;
  m.description = "This machine as colibri calibrate measured it on " + r.identity.measured_on + ": " +
                  r.identity.cpu_model + ", storage under " + o.dir;
  m.nvme = n.id;
  m.pcie = h.id;
  m.compute = cpu.id;
  for (const HostWorkAtThreads& run : r.host_work.runs) {
    m.host_work.push_back(run.fit.profile);
    m.host_work.back().figure = Measured("host_work", source,
                                         "the real engine's step times on a synthetic model (1 to 256 tokens, all "
                                         "resident and no L2) at " + std::to_string(run.threads) +
                                             " compute thread(s), fitted per step (sim::FitHostWork)");
  }
  m.identity = r.identity;
  return p;
}

std::string CalibrateMarkdown(const CalibrateReport& r) {
  std::string out = "# " + r.machine_name + "\n\n";
  out += "CPU: " + r.identity.cpu_model + " (" + std::to_string(r.identity.cores) + " cores, " + r.identity.cpu_flags +
         "); kernel " + r.identity.kernel + "; storage " + r.storage.block_device + " (" + r.storage.backend + ")\n\n";
  for (const std::string& w : r.warnings) out += "> warning: " + w + "\n\n";
  out += "## Storage: measured vs the grid model and the fitted channel model\n\n";
  out += "Random reads over a " + std::to_string(r.storage.file_bytes) +
         "-byte file, every point in each of the passes over the grid; the pass with the median p99 is kept "
         "(p99 spread: largest - smallest p99 of the passes, over the kept one). "
         "Each point: the closed loop replayed on each model; error = (model - measured) / measured.\n\n";
  out += "Submit us: the median time the submitting thread spent inside one Submit call (io_uring_submit), which "
         "the engine's modelled host work charges per read issued (at the depth it is issued at).\n\n";
  out += "| read size | depth | measured MB/s | p50 us | p99 us | submit us | p99 spread | grid MB/s | grid p50 | grid p99 | "
         "channels MB/s | channels p50 | channels p99 |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const PointFit& f : r.storage.fits) {
    char row[400];
    std::snprintf(row, sizeof(row), "| %llu | %u | %.1f | %.1f | %.1f | %.1f | %.0f%% | %s | %s | %s | %s | %s | %s |\n",
                  static_cast<unsigned long long>(f.read_bytes), f.queue_depth, f.measured_bytes_per_s / 1e6,
                  f.measured_p50_ns / 1e3, f.measured_p99_ns / 1e3, f.measured_submit_ns / 1e3, f.pass_p99_spread * 100, Pct(f.grid_throughput_error).c_str(),
                  Pct(f.grid_p50_error).c_str(), Pct(f.grid_p99_error).c_str(), Pct(f.channel_throughput_error).c_str(),
                  Pct(f.channel_p50_error).c_str(), Pct(f.channel_p99_error).c_str());
    out += row;
  }
  out += std::string("\n## Storage: bursts (a batch's misses issued at once)\n\nSpan = first submit to last completion. "
                     "The grid model draws each read independently, or one draw per burst (shared); kept: ") +
         (r.storage.grid.burst == sim::ReadGridBurst::kShared ? "shared" : "independent") +
         " (the smaller mean of |p50 error| + |p99 error|).\n\n"
         "| read size | burst | bursts | measured p50 us | p99 us | independent p50 | p99 | shared p50 | p99 |\n"
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const BurstFit& b : r.storage.bursts) {
    char row[300];
    std::snprintf(row, sizeof(row), "| %llu | %u | %llu | %.1f | %.1f | %s | %s | %s | %s |\n",
                  static_cast<unsigned long long>(b.read_bytes), b.burst, static_cast<unsigned long long>(b.bursts),
                  b.measured_p50_ns / 1e3, b.measured_p99_ns / 1e3, Pct(b.independent_p50_error).c_str(),
                  Pct(b.independent_p99_error).c_str(), Pct(b.shared_p50_error).c_str(), Pct(b.shared_p99_error).c_str());
    out += row;
  }
  out += "\n## CPU expert FFN (median ns per call)\n\n| dtype | H | I | threads | tokens: ns |\n|---|---:|---:|---:|---|\n";
  for (const sim::KernelTimes& k : r.compute.ffn.entries) {
    std::string cells;
    for (size_t i = 0; i < k.tokens.size(); ++i) {
      cells += (i ? ", " : "") + std::to_string(k.tokens[i]) + ": " + std::to_string(k.ns[i]);
    }
    out += "| " + k.dtype + " | " + std::to_string(k.hidden) + " | " + std::to_string(k.rows) + " | " +
           std::to_string(k.threads) + " | " + cells + " |\n";
  }
  out += "\n## The engine's own work (fit error: median / max over the batches)\n\n"
         "| threads | step | fit | error |\n|---:|---|---|---|\n";
  for (const HostWorkAtThreads& run : r.host_work.runs) {
    const sim::HostWorkFit& fit = run.fit;
    const sim::HostWorkProfile& h = fit.profile;
    char host[900];
    std::snprintf(host, sizeof(host),
                  "| %u | routing (gate GEMV included) | %lld ns + %.3f ns per token x expert | %.1f%% / %.1f%% |\n"
                  "| %u | scheduling | %lld ns + %.1f ns per expert + %.2f ns per assignment + %.1f ns per read + "
                  "%lld ns once when reading | %.1f%% / %.1f%% |\n"
                  "| %u | gather | %lld ns per expert + %.3f ns per element | %.1f%% / %.1f%% |\n"
                  "| %u | aggregation | %lld ns + %.3f ns per element | %.1f%% / %.1f%% |\n",
                  run.threads, static_cast<long long>(h.routing_fixed_ns), h.routing_ps_per_logit / 1e3,
                  fit.routing.median * 100, fit.routing.max * 100, run.threads,
                  static_cast<long long>(h.scheduling_fixed_ns), h.scheduling_ps_per_expert / 1e3,
                  h.scheduling_ps_per_assignment / 1e3, h.scheduling_ps_per_read / 1e3,
                  static_cast<long long>(h.scheduling_read_fixed_ns), fit.scheduling.median * 100,
                  fit.scheduling.max * 100, run.threads, static_cast<long long>(h.gather_fixed_ns),
                  h.gather_ps_per_element / 1e3, fit.gather.median * 100, fit.gather.max * 100, run.threads,
                  static_cast<long long>(h.aggregation_fixed_ns), h.aggregation_ps_per_element / 1e3,
                  fit.aggregation.median * 100, fit.aggregation.max * 100);
    out += host;
  }
  out += "\n## Host copies\n\n| bytes | median ns | fit error |\n|---:|---:|---:|\n";
  for (const HostCopySize& s : r.host_copies.sizes) {
    out += "| " + std::to_string(s.bytes) + " | " + std::to_string(s.median_ns) + " | " + Pct(s.fit_error) + " |\n";
  }
  return out;
}

std::string CalibrateRaw(const CalibrateReport& r) {
  std::string out;
  for (const sim::ReadGridPoint& p : r.storage.grid.points) {
    out += Json{{"kind", "read"}, {"read_bytes", p.read_bytes}, {"queue_depth", p.queue_depth}, {"reads", p.reads},
                {"bytes_per_s", p.bytes_per_s}, {"latency_ns", p.latency_ns}}.dump() + "\n";
  }
  for (const HostWorkAtThreads& run : r.host_work.runs) {
    for (const sim::HostWorkSample& s : run.samples) {
      out += Json{{"kind", "layer_batch"}, {"threads", run.threads}, {"tokens", s.tokens}, {"distinct", s.distinct}, {"reads", s.reads},
                {"routing_ns", s.routing_ns}, {"gate_ns", s.gate_ns}, {"scheduling_ns", s.scheduling_ns},
                  {"gather_ns", s.gather_ns}, {"aggregation_ns", s.aggregation_ns}}.dump() + "\n";
    }
  }
  for (const HostCopySize& s : r.host_copies.sizes) {
    out += Json{{"kind", "host_copy"}, {"bytes", s.bytes}, {"median_ns", s.median_ns}}.dump() + "\n";
  }
  return out;
}

std::string CalibrateReportJson(const CalibrateReport& r) {
  Json fits = Json::array();
  for (const PointFit& f : r.storage.fits) {
    fits.push_back(Json{{"read_bytes", f.read_bytes}, {"queue_depth", f.queue_depth},
                        {"measured_bytes_per_s", f.measured_bytes_per_s}, {"measured_p50_ns", f.measured_p50_ns},
                        {"measured_p99_ns", f.measured_p99_ns}, {"measured_submit_ns", f.measured_submit_ns},
                        {"pass_p99_spread", f.pass_p99_spread},
                        {"grid", {{"throughput", f.grid_throughput_error}, {"p50", f.grid_p50_error}, {"p99", f.grid_p99_error}}},
                        {"channels",
                         {{"throughput", f.channel_throughput_error}, {"p50", f.channel_p50_error}, {"p99", f.channel_p99_error}}}});
  }
  Json bursts = Json::array();
  for (const BurstFit& b : r.storage.bursts) {
    bursts.push_back(Json{{"read_bytes", b.read_bytes}, {"burst", b.burst}, {"bursts", b.bursts},
                          {"measured_p50_ns", b.measured_p50_ns}, {"measured_p99_ns", b.measured_p99_ns},
                          {"independent", {{"p50", b.independent_p50_error}, {"p99", b.independent_p99_error}}},
                          {"shared", {{"p50", b.shared_p50_error}, {"p99", b.shared_p99_error}}}});
  }
  auto step = [](const sim::StepFitError& e) { return Json{{"median", e.median}, {"max", e.max}, {"batches", e.batches}}; };
  Json host_work = Json::array();
  for (const HostWorkAtThreads& run : r.host_work.runs) {
    const sim::HostWorkFit& fit = run.fit;
    host_work.push_back(Json{{"threads", run.threads}, {"routing", step(fit.routing)}, {"scheduling", step(fit.scheduling)},
                             {"gather", step(fit.gather)}, {"aggregation", step(fit.aggregation)}});
  }
  return Json{{"machine", r.machine_name},
              {"files", r.files},
              {"warnings", r.warnings},
              {"identity",
               {{"cpu_model", r.identity.cpu_model}, {"cpu_flags", r.identity.cpu_flags}, {"cores", r.identity.cores},
                {"ram_bytes", r.identity.ram_bytes}, {"kernel", r.identity.kernel},
                {"block_device", r.identity.block_device}, {"measured_on", r.identity.measured_on}}},
              {"storage", {{"backend", r.storage.backend}, {"file_bytes", r.storage.file_bytes},
                           {"burst", r.storage.grid.burst == sim::ReadGridBurst::kShared ? "shared" : "independent"},
                           {"bursts", bursts}, {"points", r.storage.grid.points.size()}, {"fit_errors", fits}}},
              {"compute", {{"isa", r.compute.isa}, {"entries", r.compute.ffn.entries.size()},
                           {"memory_bytes_per_s", r.compute.memory_bytes_per_s}}},
              {"host_work_fit_errors", host_work},
              {"host_copies", {{"per_copy_ns", r.host_copies.per_copy_ns}, {"bytes_per_s", r.host_copies.bytes_per_s}}}}
      .dump(2);
}

}  // namespace colibri::calibrate
