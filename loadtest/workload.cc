#include "loadtest/workload.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace dflash::loadtest {
namespace {

using nlohmann::json;

// Bounds that keep a typo (a million words, a million documents) from exhausting memory.
constexpr int64_t kMaxTextLength = 100000;
constexpr int64_t kMaxInputsPerCall = 100000;

// Error context: the file and the path of the field inside it ("mix[2].text_words").
class Where {
 public:
  Where(absl::string_view source, std::string field) : source_(source), field_(std::move(field)) {}
  Where Key(absl::string_view key) const {
    return Where(source_, field_.empty() ? std::string(key) : absl::StrCat(field_, ".", key));
  }
  Where Index(size_t index) const { return Where(source_, absl::StrCat(field_, "[", index, "]")); }
  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", field_.empty() ? "workload" : field_, " ", problem));
  }

 private:
  absl::string_view source_;
  std::string field_;
};

absl::Status CheckObject(const json& value, const Where& where,
                         std::initializer_list<absl::string_view> allowed) {
  if (!value.is_object()) return where.Error("must be a JSON object");
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    bool known = false;
    for (absl::string_view name : allowed) known = known || key == name;
    if (!known) {
      return where.Key(key).Error(absl::StrCat(
          "is not a known field (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseInteger(const json& value, const Where& where, int64_t lo,
                                     int64_t hi) {
  int64_t number = 0;
  if (value.is_number_unsigned()) {
    const auto unsigned_number = value.get<uint64_t>();
    if (unsigned_number > static_cast<uint64_t>(hi)) {
      return where.Error(absl::StrCat("must be at most ", hi));
    }
    number = static_cast<int64_t>(unsigned_number);
  } else if (value.is_number_integer()) {
    number = value.get<int64_t>();
  } else {
    return where.Error("must be an integer");
  }
  if (number < lo || number > hi) {
    return where.Error(absl::StrCat("must be in [", lo, ", ", hi, "], got ", number));
  }
  return number;
}

absl::StatusOr<double> ParseNumber(const json& value, const Where& where) {
  if (!value.is_number()) return where.Error("must be a number");
  const auto number = value.get<double>();
  if (!std::isfinite(number)) return where.Error("must be finite");
  return number;
}

absl::StatusOr<std::string> ParseString(const json& value, const Where& where) {
  if (!value.is_string()) return where.Error("must be a string");
  return value.get<std::string>();
}

absl::StatusOr<CountDistribution> ParseCount(const json& value, const Where& where, int64_t lo,
                                             int64_t hi) {
  CountDistribution count;
  if (value.is_number()) {
    DFLASH_ASSIGN_OR_RETURN(count.min, ParseInteger(value, where, lo, hi));
    count.max = count.min;
    return count;
  }
  if (!value.is_object() || value.size() != 1) {
    return where.Error("must be an integer or an object with one key: fixed, uniform or lognormal");
  }
  DFLASH_RETURN_IF_ERROR(CheckObject(value, where, {"fixed", "uniform", "lognormal"}));
  if (value.contains("fixed")) {
    DFLASH_ASSIGN_OR_RETURN(count.min, ParseInteger(value["fixed"], where.Key("fixed"), lo, hi));
    count.max = count.min;
    return count;
  }
  if (value.contains("uniform")) {
    const Where uniform = where.Key("uniform");
    const json& range = value["uniform"];
    if (!range.is_array() || range.size() != 2) return uniform.Error("must be [LO, HI]");
    count.kind = CountDistribution::Kind::kUniform;
    DFLASH_ASSIGN_OR_RETURN(count.min, ParseInteger(range[0], uniform.Index(0), lo, hi));
    DFLASH_ASSIGN_OR_RETURN(count.max, ParseInteger(range[1], uniform.Index(1), lo, hi));
    if (count.min > count.max) return uniform.Error("must have LO <= HI");
    return count;
  }
  const Where lognormal = where.Key("lognormal");
  const json& parameters = value["lognormal"];
  DFLASH_RETURN_IF_ERROR(CheckObject(parameters, lognormal, {"median", "sigma", "min", "max"}));
  for (const char* key : {"median", "sigma", "min", "max"}) {
    if (!parameters.contains(key)) return lognormal.Key(key).Error("is required");
  }
  count.kind = CountDistribution::Kind::kLogNormal;
  DFLASH_ASSIGN_OR_RETURN(count.median, ParseNumber(parameters["median"], lognormal.Key("median")));
  DFLASH_ASSIGN_OR_RETURN(count.sigma, ParseNumber(parameters["sigma"], lognormal.Key("sigma")));
  DFLASH_ASSIGN_OR_RETURN(count.min, ParseInteger(parameters["min"], lognormal.Key("min"), lo, hi));
  DFLASH_ASSIGN_OR_RETURN(count.max, ParseInteger(parameters["max"], lognormal.Key("max"), lo, hi));
  if (count.median <= 0.0) return lognormal.Key("median").Error("must be positive");
  if (count.sigma < 0.0) return lognormal.Key("sigma").Error("must not be negative");
  if (count.min > count.max) return lognormal.Error("must have min <= max");
  return count;
}

// Reads "<prefix>_words" or "<prefix>_tokens" (exactly one) from a mix entry.
absl::StatusOr<std::optional<TextLength>> ParseTextLength(const json& entry, const Where& where,
                                                          absl::string_view prefix) {
  const std::string words_key = absl::StrCat(prefix, "_words");
  const std::string tokens_key = absl::StrCat(prefix, "_tokens");
  const bool has_words = entry.contains(words_key);
  const bool has_tokens = entry.contains(tokens_key);
  if (has_words && has_tokens) {
    return where.Error(absl::StrCat("sets both ", words_key, " and ", tokens_key));
  }
  if (!has_words && !has_tokens) return std::optional<TextLength>();
  TextLength length;
  length.in_tokens = has_tokens;
  const std::string& key = has_tokens ? tokens_key : words_key;
  DFLASH_ASSIGN_OR_RETURN(length.count, ParseCount(entry[key], where.Key(key), 0, kMaxTextLength));
  return std::optional<TextLength>(length);
}

absl::StatusOr<MixEntry> ParseMixEntry(const json& entry, const Where& where, RpcKind rpc) {
  const bool rerank = rpc == RpcKind::kRerank;
  const absl::string_view first = rerank ? "query" : "text";
  const absl::string_view second = rerank ? "document" : "pair";
  if (rerank) {
    DFLASH_RETURN_IF_ERROR(CheckObject(
        entry, where,
        {"weight", "query_words", "query_tokens", "document_words", "document_tokens"}));
  } else {
    DFLASH_RETURN_IF_ERROR(CheckObject(
        entry, where, {"weight", "text_words", "text_tokens", "pair_words", "pair_tokens"}));
  }
  MixEntry parsed;
  if (entry.contains("weight")) {
    DFLASH_ASSIGN_OR_RETURN(parsed.weight, ParseNumber(entry["weight"], where.Key("weight")));
    if (parsed.weight <= 0.0) return where.Key("weight").Error("must be positive");
  }
  DFLASH_ASSIGN_OR_RETURN(std::optional<TextLength> first_length,
                          ParseTextLength(entry, where, first));
  if (!first_length) {
    return where.Error(absl::StrCat("needs ", first, "_words or ", first, "_tokens"));
  }
  parsed.first = *first_length;
  DFLASH_ASSIGN_OR_RETURN(parsed.second, ParseTextLength(entry, where, second));
  if (rerank && !parsed.second) {
    return where.Error("needs document_words or document_tokens");
  }
  if (!parsed.second.has_value()) return parsed;
  if (rpc == RpcKind::kEmbed || rpc == RpcKind::kZeroShot) {
    return where.Error(
        absl::StrCat("sets a text pair, but ", RpcKindName(rpc), " takes single texts"));
  }
  return parsed;
}

absl::StatusOr<dflash::v1::Priority> ParsePriority(const json& value, const Where& where) {
  DFLASH_ASSIGN_OR_RETURN(std::string name, ParseString(value, where));
  if (name == "unspecified") return dflash::v1::PRIORITY_UNSPECIFIED;
  if (name == "low") return dflash::v1::PRIORITY_LOW;
  if (name == "normal") return dflash::v1::PRIORITY_NORMAL;
  if (name == "high") return dflash::v1::PRIORITY_HIGH;
  return where.Error(
      absl::StrCat("'", name, "' is not a priority (expected unspecified, low, normal or high)"));
}

}  // namespace

absl::StatusOr<RpcKind> ParseRpcKind(absl::string_view name) {
  for (RpcKind kind : {RpcKind::kClassify, RpcKind::kRerank, RpcKind::kEmbed, RpcKind::kZeroShot,
                       RpcKind::kTokenize}) {
    if (name == RpcKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown rpc '", name, "' (expected classify, rerank, embed, zeroshot or tokenize)"));
}

absl::string_view RpcKindName(RpcKind kind) {
  switch (kind) {
    case RpcKind::kClassify:
      return "classify";
    case RpcKind::kRerank:
      return "rerank";
    case RpcKind::kEmbed:
      return "embed";
    case RpcKind::kZeroShot:
      return "zeroshot";
    case RpcKind::kTokenize:
      return "tokenize";
  }
  return "unknown";
}

int64_t CountDistribution::Sample(Rng& rng) const {
  switch (kind) {
    case Kind::kFixed:
      return min;
    case Kind::kUniform:
      return UniformInt(rng, min, max);
    case Kind::kLogNormal: {
      const double value = median * std::exp(sigma * StandardNormal(rng));
      const double clipped =
          std::clamp(std::round(value), static_cast<double>(min), static_cast<double>(max));
      return static_cast<int64_t>(clipped);
    }
  }
  return min;
}

absl::StatusOr<Workload> ParseWorkload(absl::string_view json_text, absl::string_view source) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", error.what()));
  }
  const Where top(source, "");
  DFLASH_RETURN_IF_ERROR(CheckObject(
      root, top,
      {"description", "rpc", "model", "priority", "truncate", "tokens_per_word", "inputs_per_call",
       "mix", "candidate_labels", "hypothesis_template", "multi_label"}));
  Workload workload;
  if (!root.contains("rpc")) return top.Key("rpc").Error("is required");
  {
    DFLASH_ASSIGN_OR_RETURN(std::string rpc_name, ParseString(root["rpc"], top.Key("rpc")));
    absl::StatusOr<RpcKind> rpc = ParseRpcKind(rpc_name);
    if (!rpc.ok()) return top.Key("rpc").Error(rpc.status().message());
    workload.rpc = *rpc;
  }
  if (root.contains("description")) {
    DFLASH_ASSIGN_OR_RETURN(workload.description,
                            ParseString(root["description"], top.Key("description")));
  }
  if (root.contains("model")) {
    DFLASH_ASSIGN_OR_RETURN(workload.model, ParseString(root["model"], top.Key("model")));
  }
  if (root.contains("priority")) {
    if (workload.rpc == RpcKind::kTokenize) {
      return top.Key("priority").Error("is not a tokenize option (Tokenize does not queue)");
    }
    DFLASH_ASSIGN_OR_RETURN(workload.priority,
                            ParsePriority(root["priority"], top.Key("priority")));
  }
  if (root.contains("truncate")) {
    if (!root["truncate"].is_boolean()) return top.Key("truncate").Error("must be true or false");
    workload.truncate = root["truncate"].get<bool>();
  }
  if (root.contains("tokens_per_word")) {
    DFLASH_ASSIGN_OR_RETURN(workload.tokens_per_word,
                            ParseNumber(root["tokens_per_word"], top.Key("tokens_per_word")));
    if (workload.tokens_per_word <= 0.0) {
      return top.Key("tokens_per_word").Error("must be positive");
    }
  }
  workload.inputs_per_call.min = workload.inputs_per_call.max = 1;
  if (root.contains("inputs_per_call")) {
    DFLASH_ASSIGN_OR_RETURN(
        workload.inputs_per_call,
        ParseCount(root["inputs_per_call"], top.Key("inputs_per_call"), 1, kMaxInputsPerCall));
  }
  if (!root.contains("mix")) return top.Key("mix").Error("is required");
  const json& mix = root["mix"];
  if (!mix.is_array() || mix.empty()) return top.Key("mix").Error("must be a non-empty list");
  for (size_t i = 0; i < mix.size(); ++i) {
    DFLASH_ASSIGN_OR_RETURN(MixEntry entry,
                            ParseMixEntry(mix[i], top.Key("mix").Index(i), workload.rpc));
    workload.mix.push_back(entry);
  }
  const bool zero_shot = workload.rpc == RpcKind::kZeroShot;
  for (const char* key : {"candidate_labels", "hypothesis_template", "multi_label"}) {
    if (root.contains(key) && !zero_shot) return top.Key(key).Error("is only for rpc zeroshot");
  }
  if (zero_shot) {
    const Where labels_where = top.Key("candidate_labels");
    if (!root.contains("candidate_labels")) return labels_where.Error("is required for zeroshot");
    const json& labels = root["candidate_labels"];
    if (!labels.is_array() || labels.empty()) {
      return labels_where.Error("must be a non-empty list of strings");
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      DFLASH_ASSIGN_OR_RETURN(std::string label, ParseString(labels[i], labels_where.Index(i)));
      workload.candidate_labels.push_back(std::move(label));
    }
    if (root.contains("hypothesis_template")) {
      DFLASH_ASSIGN_OR_RETURN(
          workload.hypothesis_template,
          ParseString(root["hypothesis_template"], top.Key("hypothesis_template")));
    }
    if (root.contains("multi_label")) {
      if (!root["multi_label"].is_boolean()) {
        return top.Key("multi_label").Error("must be true or false");
      }
      workload.multi_label = root["multi_label"].get<bool>();
    }
  }
  return workload;
}

absl::StatusOr<Workload> LoadWorkloadFile(const std::string& path) {
  DFLASH_ASSIGN_OR_RETURN(std::string text, ReadFile(path, size_t{1} << 20));
  return ParseWorkload(text, path);
}

}  // namespace dflash::loadtest
