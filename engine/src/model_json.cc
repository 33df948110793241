#include "model_json.h"

#include <algorithm>

#include "model_io.h"

namespace colibri::engine::model_detail {

Result<Json> ParseJson(const std::string& text, const std::string& where) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    return Status::InvalidArgument(where + ": byte " + std::to_string(e.byte) + ": invalid JSON: " + what);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(where + ": invalid JSON: " + e.what());
  }
}

Result<Json> ReadJsonFile(const std::string& path, uint64_t max_bytes) {
  COLIBRI_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, max_bytes));
  return ParseJson(text, path);
}

Result<JsonObject> JsonObject::Of(const Json& json, std::string where, std::string prefix) {
  if (!json.is_object()) {
    const std::string what = prefix.empty() ? where : where + ": field '" + prefix.substr(0, prefix.size() - 1) + "'";
    return Status::InvalidArgument(what + ": expected a JSON object, found " + JsonSnippet(json));
  }
  return JsonObject(&json, std::move(where), std::move(prefix));
}

bool JsonObject::Has(const std::string& field) const { return json_->contains(field) && !(*json_)[field].is_null(); }

Status JsonObject::Error(const std::string& field, const std::string& why) const {
  return Status::InvalidArgument(where_ + ": field '" + prefix_ + field + "': " + why);
}

Result<uint64_t> JsonObject::CheckedUint(const std::string& field, const Json& value, uint64_t min_value,
                                         uint64_t max_value) const {
  if (!value.is_number_unsigned()) {
    return Error(field, "expected a non-negative integer, found " + JsonSnippet(value));
  }
  const uint64_t n = value.get<uint64_t>();
  if (n < min_value || n > max_value) {
    return Error(field, std::to_string(n) + " not in " + std::to_string(min_value) + ".." + std::to_string(max_value));
  }
  return n;
}

Result<uint64_t> JsonObject::Uint(const std::string& field, uint64_t min_value, uint64_t max_value) const {
  if (!Has(field)) return Error(field, "missing");
  return CheckedUint(field, (*json_)[field], min_value, max_value);
}

Result<uint64_t> JsonObject::UintOr(const std::string& field, uint64_t fallback, uint64_t min_value,
                                    uint64_t max_value) const {
  return Has(field) ? Uint(field, min_value, max_value) : Result<uint64_t>(fallback);
}

Result<uint64_t> JsonObject::UintAnyOf(const std::vector<std::string>& fields, uint64_t min_value,
                                       uint64_t max_value) const {
  std::string names;
  for (const std::string& field : fields) {
    if (Has(field)) return CheckedUint(field, (*json_)[field], min_value, max_value);
    names += (names.empty() ? "" : "' or '") + field;
  }
  return Error(names, "missing");
}

Result<bool> JsonObject::Bool(const std::string& field) const {
  if (!Has(field)) return Error(field, "missing");
  const Json& value = (*json_)[field];
  if (!value.is_boolean()) return Error(field, "expected true or false, found " + JsonSnippet(value));
  return value.get<bool>();
}

Result<bool> JsonObject::BoolOr(const std::string& field, bool fallback) const {
  return Has(field) ? Bool(field) : Result<bool>(fallback);
}

Result<std::string> JsonObject::String(const std::string& field) const {
  if (!Has(field)) return Error(field, "missing");
  const Json& value = (*json_)[field];
  if (!value.is_string()) return Error(field, "expected a string, found " + JsonSnippet(value));
  return value.get<std::string>();
}

Result<std::string> JsonObject::StringOr(const std::string& field, const std::string& fallback) const {
  return Has(field) ? String(field) : Result<std::string>(fallback);
}

Result<double> JsonObject::Number(const std::string& field) const {
  if (!Has(field)) return Error(field, "missing");
  const Json& value = (*json_)[field];
  if (!value.is_number()) return Error(field, "expected a number, found " + JsonSnippet(value));
  return value.get<double>();
}

Result<std::vector<uint64_t>> JsonObject::UintList(const std::string& field, uint64_t min_value,
                                                   uint64_t max_value) const {
  if (!Has(field)) return Error(field, "missing");
  const Json& list = (*json_)[field];
  if (!list.is_array()) return Error(field, "expected a list of integers, found " + JsonSnippet(list));
  std::vector<uint64_t> values;
  values.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    COLIBRI_ASSIGN_OR_RETURN(uint64_t value,
                             CheckedUint(field + "[" + std::to_string(i) + "]", list[i], min_value, max_value));
    values.push_back(value);
  }
  return values;
}

Result<std::vector<uint64_t>> JsonObject::UintListOr(const std::string& field, uint64_t min_value,
                                                     uint64_t max_value) const {
  return Has(field) ? UintList(field, min_value, max_value) : Result<std::vector<uint64_t>>(std::vector<uint64_t>{});
}

Result<JsonObject> JsonObject::Object(const std::string& field) const {
  if (!Has(field)) return Error(field, "missing");
  return Of((*json_)[field], where_, prefix_ + field + ".");
}

Status JsonObject::OnlyFields(const std::vector<std::string>& allowed) const {
  for (const auto& [key, value] : json_->items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) return Error(key, "unknown field");
  }
  return Status::Ok();
}

}  // namespace colibri::engine::model_detail
