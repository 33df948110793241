// The reader of profile files' fields, shared by the profile parsers
// (profiles.cc, profile_tables.cc). Internal to sim/. A Reader keeps the
// provenance of every figure it reads; its errors name the file (origin) and
// the field. Not thread-safe (one per file parsed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/sim/hardware.h"
#include "colibri/sim/profiles.h"
#include "colibri/status.h"

namespace colibri::sim::profile_internal {

using Json = nlohmann::json;
using Fields = std::span<const std::string_view>;

inline constexpr std::string_view kFigureFields[] = {"value", "basis", "source", "note"};

inline std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

inline std::string Join(Fields items) {
  return Join(std::vector<std::string>(items.begin(), items.end()));
}

// A short rendering of a JSON value for messages.
inline std::string Describe(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(value.type_name()) + " " + text;
}

// Bounds of an integer field.
struct Range {
  uint64_t min = 0;
  uint64_t max = std::numeric_limits<uint64_t>::max();
  const char* why = nullptr;  // appended to the message, e.g. "generation 0 is no link"

  static Range Positive() { return {1}; }
  static Range NonNegative() { return {0}; }
  static Range Zero(const char* why) { return {0, 0, why}; }

  std::string Expected() const {
    std::string text;
    if (min == max) {
      text = "expected " + std::to_string(min);
    } else if (max < uint64_t{std::numeric_limits<uint32_t>::max()}) {
      text = "expected an integer from " + std::to_string(min) + " to " + std::to_string(max);
    } else {
      text = min == 0 ? "expected a non-negative integer"
             : min == 1 ? "expected a positive integer"
                        : "expected an integer >= " + std::to_string(min);
      if (max == std::numeric_limits<uint32_t>::max()) text += " below 2^32";
    }
    return why == nullptr ? text : text + " (" + why + ")";
  }
};

// Reads the fields of one profile file, keeping each figure's provenance.
class Reader {
 public:
  explicit Reader(const std::string& origin) : origin_(origin) {}

  Status Error(const std::string& field, const std::string& expected, const Json* got = nullptr) const {
    return Status::InvalidArgument(origin_ + ": field " + field + ": " + expected +
                                   (got == nullptr ? "" : ", got " + Describe(*got)));
  }

  // Every key of `object` must be in `allowed`; `prefix` names the object ("" at the top).
  Status CheckFields(const Json& object, Fields allowed, const std::string& prefix) const {
    for (const auto& item : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
      return Status::InvalidArgument(origin_ + ": unknown field " + prefix + item.key() + " (expected: " +
                                     Join(allowed) + ")");
    }
    return Status::Ok();
  }

  Result<const Json*> Find(const Json& object, const std::string& prefix, const std::string& key) const {
    auto it = object.find(key);
    if (it == object.end()) return Status::InvalidArgument(origin_ + ": missing field " + prefix + key);
    return &*it;
  }

  // A string field; `nonempty` rejects "".
  Result<std::string> String(const Json& object, const std::string& prefix, const std::string& key,
                             bool nonempty = true) const {
    COLIBRI_ASSIGN_OR_RETURN(const Json* value, Find(object, prefix, key));
    if (!value->is_string() || (nonempty && value->get_ref<const std::string&>().empty())) {
      return Error(prefix + key, nonempty ? "expected a non-empty string" : "expected a string", value);
    }
    return value->get<std::string>();
  }

  // An id or machine name: lowercase letters, digits, '.', '_' and '-'.
  Result<std::string> Id(const Json& object, const std::string& key) const {
    COLIBRI_ASSIGN_OR_RETURN(std::string id, String(object, "", key));
    const bool ok = std::all_of(id.begin(), id.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    });
    if (!ok) return Error(key, "expected lowercase letters, digits, '.', '_' or '-', got \"" + id + "\"");
    return id;
  }

  // The "kind" field must be `expected`, and every key must be in `allowed`.
  Status CheckKind(const Json& doc, const char* expected, Fields allowed) const {
    COLIBRI_ASSIGN_OR_RETURN(std::string kind, String(doc, "", "kind"));
    if (kind != expected) return Error("kind", std::string("expected \"") + expected + "\", got \"" + kind + "\"");
    return CheckFields(doc, allowed, "");
  }

  // A figure object at object[key]: returns its value and records its provenance.
  Result<uint64_t> Figure(const Json& object, const std::string& prefix, const std::string& key, const Range& range) {
    const std::string field = prefix + key;
    COLIBRI_ASSIGN_OR_RETURN(const Json* figure, Find(object, prefix, key));
    if (!figure->is_object()) {
      return Error(field, "expected an object {\"value\", \"basis\", \"source\", \"note\"}", figure);
    }
    COLIBRI_RETURN_IF_ERROR(CheckFields(*figure, kFigureFields, field + "."));
    COLIBRI_ASSIGN_OR_RETURN(uint64_t value, Integer(*figure, field, range));
    COLIBRI_ASSIGN_OR_RETURN(Basis basis, ReadBasis(*figure, field));
    COLIBRI_ASSIGN_OR_RETURN(std::string source, String(*figure, field + ".", "source"));
    COLIBRI_ASSIGN_OR_RETURN(std::string note, Note(*figure, field, basis));
    figures_.push_back(sim::Figure{field, basis, std::move(source), std::move(note)});
    return value;
  }

  // The provenance ("basis", "source", optional "note") of a table object at
  // `field` (its other keys are the caller's to check); not recorded among
  // the figures.
  Result<sim::Figure> Provenance(const Json& object, const std::string& field) const {
    COLIBRI_ASSIGN_OR_RETURN(Basis basis, ReadBasis(object, field));
    COLIBRI_ASSIGN_OR_RETURN(std::string source, String(object, field + ".", "source"));
    COLIBRI_ASSIGN_OR_RETURN(std::string note, Note(object, field, basis));
    return sim::Figure{field, basis, std::move(source), std::move(note)};
  }

  // A plain non-negative integer (not a figure) at object[key], within `range`.
  Result<uint64_t> PlainInteger(const Json& object, const std::string& prefix, const std::string& key,
                                const Range& range) const {
    COLIBRI_ASSIGN_OR_RETURN(const Json* value, Find(object, prefix, key));
    if (!value->is_number_unsigned() || value->get<uint64_t>() < range.min || value->get<uint64_t>() > range.max) {
      return Error(prefix + key, range.Expected(), value);
    }
    return value->get<uint64_t>();
  }

  const std::string& origin() const { return origin_; }

  // A top-level figure stored into `out`, whose type bounds the range.
  template <typename T>
  Status Read(const Json& doc, const std::string& key, Range range, T* out) {
    range.max = std::min<uint64_t>(range.max, static_cast<uint64_t>(std::numeric_limits<T>::max()));
    COLIBRI_ASSIGN_OR_RETURN(uint64_t value, Figure(doc, "", key, range));
    *out = static_cast<T>(value);
    return Status::Ok();
  }

  std::vector<sim::Figure> TakeFigures() { return std::move(figures_); }

 private:
  Result<uint64_t> Integer(const Json& figure, const std::string& field, const Range& range) const {
    COLIBRI_ASSIGN_OR_RETURN(const Json* value, Find(figure, field + ".", "value"));
    // Non-negative integers parse as unsigned; negative ones and fractions do not.
    if (!value->is_number_unsigned() || value->get<uint64_t>() < range.min || value->get<uint64_t>() > range.max) {
      return Error(field + ".value", range.Expected(), value);
    }
    return value->get<uint64_t>();
  }

  Result<Basis> ReadBasis(const Json& figure, const std::string& field) const {
    COLIBRI_ASSIGN_OR_RETURN(std::string name, String(figure, field + ".", "basis"));
    for (Basis basis : {Basis::kSpec, Basis::kMeasured, Basis::kDerived, Basis::kAssumed}) {
      if (name == BasisName(basis)) return basis;
    }
    return Error(field + ".basis", "expected spec, measured, derived or assumed, got \"" + name + "\"");
  }

  // Optional, but derived and assumed figures must say how.
  Result<std::string> Note(const Json& figure, const std::string& field, Basis basis) const {
    const bool required = basis == Basis::kDerived || basis == Basis::kAssumed;
    if (!required && !figure.contains("note")) return std::string();
    auto note = String(figure, field + ".", "note");
    if (!note.ok() && required) {
      return Error(field + ".note", std::string("expected a non-empty string saying how the ") + BasisName(basis) +
                                        " value was obtained");
    }
    return note;
  }

  const std::string& origin_;
  std::vector<sim::Figure> figures_;
};

}  // namespace colibri::sim::profile_internal
