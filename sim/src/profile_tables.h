// The measured parts of profile files (docs/HARDWARE_PROFILES.md, "Measured
// profiles"): an nvme profile's read_grid, a compute profile's ffn_table and
// gate_table, a machine's host_work and identity. Each is optional: absent
// from a file, it stays empty. Parsing (with the shared Reader, whose errors
// name the file and field) and writing back the same JSON. Internal to sim/.
// Thread-safety: free functions over their arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "colibri/sim/hardware.h"
#include "colibri/status.h"
#include "profile_reader.h"

namespace colibri::sim::profile_internal {

// doc["read_grid"], when present, into *grid (points sorted by size, then depth).
Status ReadReadGrid(Reader& r, const Json& doc, ReadGrid* grid);
// doc[key] ("ffn_table" or "gate_table"), when present; `gate` selects the
// gate table's shape fields (experts instead of dtype and intermediate).
Status ReadKernelTable(Reader& r, const Json& doc, const char* key, bool gate, KernelTable* table);
// doc["host_work"] and doc["identity"] of a machine, when present. host_work
// is one object (its "threads" optional) or an array of objects, one per
// thread count ("threads" required, distinct).
Status ReadHostWork(Reader& r, const Json& doc, std::vector<HostWorkProfile>* host_work);
Status ReadMachineIdentity(Reader& r, const Json& doc, MachineIdentity* identity);
// doc["host_memory"] of a machine, when present: every field a figure. Takes
// the reader's figures (call it before any other figure is read).
Status ReadHostMemory(Reader& r, const Json& doc, HostMemoryProfile* host_memory);

// The JSON the readers accept.
Json ReadGridJson(const ReadGrid& grid);
Json KernelTableJson(const KernelTable& table, bool gate);
Json HostWorkJson(const std::vector<HostWorkProfile>& host_work);  // requires a non-empty vector
Json MachineIdentityJson(const MachineIdentity& identity);
// A figure's provenance members ("basis", "source", "note" when not empty) added to `object`.
void AddProvenance(const Figure& figure, Json* object);

}  // namespace colibri::sim::profile_internal
