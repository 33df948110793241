// JsonSnippet: a JSON value as an error message may quote it. Stateless,
// thread-safe, header-only; the one definition for every folder that reads
// JSON (the engine's model tools, traces' importers and config reader).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "colibri/bounded_echo.h"

namespace colibri {

// A scalar's text through BoundedEcho (at most 80 bytes and the length), or
// the kind and size of a list or object: containers are described, not
// dumped (dump() recurses, and input may nest deeply).
inline std::string JsonSnippet(const nlohmann::json& value) {
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + " entries";
  if (value.is_object()) return "an object with " + std::to_string(value.size()) + " fields";
  return BoundedEcho(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace colibri
