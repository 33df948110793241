// BoundedEcho: a piece of input as an error message may echo it. Stateless,
// thread-safe, header-only; used by every folder that quotes its input.
#pragma once

#include <string>
#include <string_view>

namespace colibri {

// Whole up to 80 bytes, else its first 80 bytes and its length (a 20 MB
// field is not echoed whole).
inline std::string BoundedEcho(std::string_view text) {
  constexpr size_t kShown = 80;
  if (text.size() <= kShown) return std::string(text);
  return std::string(text.substr(0, kShown)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace colibri
