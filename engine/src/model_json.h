// Typed, validated access to JSON objects for the model tools (config.json of
// a Colibri model or of a Hugging Face checkpoint, safetensors headers).
// Every error names where the object came from and the field:
// "<where>: field '<field>': <why>". Plain values, not thread-safe to mutate.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "colibri/json_snippet.h"
#include "colibri/status.h"

namespace colibri::engine::model_detail {

using Json = nlohmann::json;

// Parses `text`; `where` names its source in errors (with the byte offset).
Result<Json> ParseJson(const std::string& text, const std::string& where);
// Reads and parses a JSON file of at most `max_bytes`.
Result<Json> ReadJsonFile(const std::string& path, uint64_t max_bytes);

class JsonObject {
 public:
  // An error unless `json` is an object.
  static Result<JsonObject> Of(const Json& json, std::string where, std::string prefix = "");

  const Json& json() const { return *json_; }
  bool Has(const std::string& field) const;
  Status Error(const std::string& field, const std::string& why) const;

  // An integer in [min_value, max_value] (required, or `fallback` when absent or null).
  Result<uint64_t> Uint(const std::string& field, uint64_t min_value, uint64_t max_value) const;
  Result<uint64_t> UintOr(const std::string& field, uint64_t fallback, uint64_t min_value, uint64_t max_value) const;
  // The first present of several names for one setting (required); missing: "field 'a' or 'b': missing".
  Result<uint64_t> UintAnyOf(const std::vector<std::string>& fields, uint64_t min_value, uint64_t max_value) const;
  // `value`, found at `field` (a list element), as an integer in [min_value, max_value].
  Result<uint64_t> CheckedUint(const std::string& field, const Json& value, uint64_t min_value,
                               uint64_t max_value) const;
  Result<bool> Bool(const std::string& field) const;
  Result<bool> BoolOr(const std::string& field, bool fallback) const;
  Result<std::string> String(const std::string& field) const;
  Result<std::string> StringOr(const std::string& field, const std::string& fallback) const;
  Result<double> Number(const std::string& field) const;
  // A list of integers, each in [min_value, max_value] (absent: empty when optional).
  Result<std::vector<uint64_t>> UintList(const std::string& field, uint64_t min_value, uint64_t max_value) const;
  Result<std::vector<uint64_t>> UintListOr(const std::string& field, uint64_t min_value, uint64_t max_value) const;
  Result<JsonObject> Object(const std::string& field) const;
  // Fails naming the first field not in `allowed`.
  Status OnlyFields(const std::vector<std::string>& allowed) const;

 private:
  JsonObject(const Json* json, std::string where, std::string prefix)
      : json_(json), where_(std::move(where)), prefix_(std::move(prefix)) {}

  const Json* json_;    // not owned: the caller keeps the document alive
  std::string where_;   // file name
  std::string prefix_;  // "files.experts." for nested objects
};

}  // namespace colibri::engine::model_detail
