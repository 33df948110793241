// This machine's identity (hardware.h, MachineIdentity), read from /proc and
// /sys: `colibri calibrate` writes it into the profiles it measures, and a
// replay on a measured profile compares it with the machine it runs on, so a
// profile measured elsewhere is said to be so (in the output and the stored
// run). Reading never fails: what cannot be read stays empty (0 for numbers).
// Thread-safety: free functions reading the file system.
#pragma once

#include <string>

#include "colibri/sim/hardware.h"

namespace colibri::sim {

// The CPU model, the ISA flags the engine's kernels use, online CPUs, RAM,
// the kernel release, and (when `path` is given) the block device under it;
// `measured_on` and `commit` are left for the caller.
MachineIdentity ThisMachineIdentity(const std::string& path = "");

// Empty when `measured` (a profile's) describes `here`, else what differs,
// e.g. "measured on AMD EPYC 9R14 (2 cores, 23.5 GiB), this machine is Intel
// Xeon Platinum 8488C (2 cores, 23.5 GiB)". Compared: CPU model, flags,
// cores, and RAM within 5%. An empty `measured` (a published profile) is no
// mismatch.
std::string IdentityMismatch(const MachineIdentity& measured, const MachineIdentity& here);

// A file-name slug of the CPU model: lowercase letters and digits joined by
// '-', vendor words and marks dropped ("AMD EPYC 9R14 96-Core Processor" ->
// "amd-epyc-9r14"), at most 32 characters; "cpu" when empty.
std::string CpuSlug(const std::string& cpu_model);

}  // namespace colibri::sim
