#include "server/tokenizer/tokenizer_config.h"

#include <algorithm>
#include <map>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_document.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace dflash {
namespace {

// Ids beyond this are not a real vocabulary; the bound keeps a hostile file from sizing tables.
constexpr int64_t kMaxTokenId = int64_t{1} << 24;
// transformers writes int(1e30) (or the float 1e30) for "no length limit"; anything this large
// means the same.
constexpr double kUnlimitedLength = 1e15;

absl::StatusOr<std::optional<nlohmann::json>> ReadOptionalJsonObject(
    const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  DFLASH_ASSIGN_OR_RETURN(std::string text, ReadFile(path, size_t{16} << 20));
  DFLASH_ASSIGN_OR_RETURN(nlohmann::json root, ParseJsonDocument(text, path.string()));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": expected a JSON object"));
  }
  return root;
}

// A token given as "[MASK]" or as an AddedToken object {"content": "[MASK]", ...}. Returns
// nullopt for a JSON null.
absl::StatusOr<std::optional<std::string>> TokenContent(const nlohmann::json& value,
                                                        const JsonFields& fields,
                                                        absl::string_view key) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) {
    const auto content = value.find("content");
    if (content != value.end() && content->is_string()) return content->get<std::string>();
  }
  return fields.FieldError(key, absl::StrCat("must be a token string or an object with a string "
                                             "\"content\", got ",
                                             JsonExcerpt(value)));
}

// Reads the five named special tokens that are present in `root` into `config`.
absl::Status ReadNamedTokens(const nlohmann::json& root, const JsonFields& fields,
                             TokenizerConfig* config) {
  const std::pair<const char*, std::string*> named[] = {
      {"cls_token", &config->cls_token},   {"sep_token", &config->sep_token},
      {"pad_token", &config->pad_token},   {"unk_token", &config->unk_token},
      {"mask_token", &config->mask_token},
  };
  for (const auto& [key, target] : named) {
    const auto it = root.find(key);
    if (it == root.end()) continue;
    DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> content, TokenContent(*it, fields, key));
    // A null token (transformers' "no such token") keeps the DeBERTa default, which the
    // template needs anyway.
    if (content.has_value()) *target = std::move(*content);
  }
  return absl::OkStatus();
}

// Appends the entries of "additional_special_tokens" / "extra_special_tokens": a list of tokens
// (strings or objects) or, as some 4.x versions wrote, an object {name: token}.
absl::Status ReadExtraTokens(const nlohmann::json& root, const JsonFields& fields,
                             std::vector<std::string>* tokens) {
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
    const auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_array() && !it->is_object()) {
      return fields.FieldError(key,
                               absl::StrCat("must be a list of tokens, got ", JsonExcerpt(*it)));
    }
    for (const nlohmann::json& item : *it) {
      DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> content, TokenContent(item, fields, key));
      if (content.has_value() &&
          std::find(tokens->begin(), tokens->end(), *content) == tokens->end()) {
        tokens->push_back(std::move(*content));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckedId(int64_t id, const JsonFields& fields, absl::string_view key,
                                  absl::string_view token) {
  if (id < 0 || id >= kMaxTokenId) {
    return fields.FieldError(key, absl::StrCat("gives token \"", token, "\" the id ", id,
                                               "; expected an id in [0, ", kMaxTokenId, ")"));
  }
  return id;
}

// added_tokens_decoder: {"<id>": {"content": ..., ...}} (or, leniently, {"<id>": "token"}).
absl::Status ReadAddedTokensDecoder(const nlohmann::json& decoder, const JsonFields& fields,
                                    std::map<std::string, int64_t>* ids) {
  constexpr absl::string_view kKey = "added_tokens_decoder";
  if (!decoder.is_object()) {
    return fields.FieldError(kKey, absl::StrCat("must be an object {\"<id>\": {\"content\": ...}}, "
                                                "got ",
                                                JsonExcerpt(decoder)));
  }
  for (const auto& [id_text, value] : decoder.items()) {
    int64_t id = -1;
    if (!absl::SimpleAtoi(id_text, &id)) {
      return fields.FieldError(kKey, absl::StrCat("has key \"", id_text, "\", which is not an id"));
    }
    DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> content, TokenContent(value, fields, kKey));
    if (!content.has_value()) continue;
    DFLASH_ASSIGN_OR_RETURN(id, CheckedId(id, fields, kKey, *content));
    const auto [it, inserted] = ids->emplace(*content, id);
    if (!inserted && it->second != id) {
      return fields.FieldError(
          kKey, absl::StrCat("gives token \"", *content, "\" two ids, ", it->second, " and ", id));
    }
  }
  return absl::OkStatus();
}

// added_tokens.json: {"token": id}.
absl::Status ReadAddedTokensFile(const nlohmann::json& root, const JsonFields& fields,
                                 std::map<std::string, int64_t>* ids) {
  for (const auto& [token, value] : root.items()) {
    DFLASH_ASSIGN_OR_RETURN(int64_t id, fields.Int(token, -1));
    DFLASH_ASSIGN_OR_RETURN(id, CheckedId(id, fields, token, token));
    ids->emplace(token, id);
  }
  return absl::OkStatus();
}

absl::Status ReadLengthAndSide(const JsonFields& fields, TokenizerConfig* config) {
  if (fields.Has("model_max_length")) {
    DFLASH_ASSIGN_OR_RETURN(double length, fields.Number("model_max_length", 0.0));
    if (length >= kUnlimitedLength) {
      config->model_max_length = std::nullopt;
    } else if (length >= 1.0 && length == static_cast<double>(static_cast<int64_t>(length))) {
      config->model_max_length = static_cast<int64_t>(length);
    } else {
      return fields.FieldError("model_max_length",
                               absl::StrCat("is ", length, "; expected a positive integer"));
    }
  }
  DFLASH_ASSIGN_OR_RETURN(std::string side, fields.String("truncation_side", "right"));
  absl::StatusOr<TruncationSide> parsed_side = ParseTruncationSide(side);
  if (!parsed_side.ok()) {
    return fields.FieldError("truncation_side",
                             absl::StrCat("is \"", side, "\"; expected \"right\" or \"left\""));
  }
  config->truncation_side = *parsed_side;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::filesystem::path& model_dir) {
  TokenizerConfig config;
  std::map<std::string, int64_t> ids;
  bool has_decoder = false;

  const std::filesystem::path config_path = model_dir / "tokenizer_config.json";
  DFLASH_ASSIGN_OR_RETURN(std::optional<nlohmann::json> tokenizer_config,
                          ReadOptionalJsonObject(config_path));
  if (tokenizer_config.has_value()) {
    const JsonFields fields(*tokenizer_config, config_path.string());
    DFLASH_ASSIGN_OR_RETURN(config.do_lower_case, fields.Bool("do_lower_case", false));
    DFLASH_ASSIGN_OR_RETURN(config.split_by_punct, fields.Bool("split_by_punct", false));
    DFLASH_RETURN_IF_ERROR(ReadLengthAndSide(fields, &config));
    DFLASH_RETURN_IF_ERROR(ReadNamedTokens(*tokenizer_config, fields, &config));
    DFLASH_RETURN_IF_ERROR(
        ReadExtraTokens(*tokenizer_config, fields, &config.additional_special_tokens));
    const auto decoder = tokenizer_config->find("added_tokens_decoder");
    if (decoder != tokenizer_config->end() && !decoder->is_null()) {
      has_decoder = true;
      DFLASH_RETURN_IF_ERROR(ReadAddedTokensDecoder(*decoder, fields, &ids));
    }
  }

  if (!has_decoder) {
    const std::filesystem::path map_path = model_dir / "special_tokens_map.json";
    DFLASH_ASSIGN_OR_RETURN(std::optional<nlohmann::json> special_tokens_map,
                            ReadOptionalJsonObject(map_path));
    if (special_tokens_map.has_value()) {
      const JsonFields fields(*special_tokens_map, map_path.string());
      DFLASH_RETURN_IF_ERROR(ReadNamedTokens(*special_tokens_map, fields, &config));
      DFLASH_RETURN_IF_ERROR(
          ReadExtraTokens(*special_tokens_map, fields, &config.additional_special_tokens));
    }
    const std::filesystem::path added_path = model_dir / "added_tokens.json";
    DFLASH_ASSIGN_OR_RETURN(std::optional<nlohmann::json> added_tokens,
                            ReadOptionalJsonObject(added_path));
    if (added_tokens.has_value()) {
      const JsonFields fields(*added_tokens, added_path.string());
      DFLASH_RETURN_IF_ERROR(ReadAddedTokensFile(*added_tokens, fields, &ids));
    }
  }

  // The five named tokens are not "additional".
  const std::string named[] = {config.cls_token, config.sep_token, config.pad_token,
                               config.unk_token, config.mask_token};
  std::erase_if(config.additional_special_tokens, [&](const std::string& token) {
    return token.empty() || std::find(std::begin(named), std::end(named), token) != std::end(named);
  });
  config.explicit_token_ids.assign(ids.begin(), ids.end());
  std::sort(config.explicit_token_ids.begin(), config.explicit_token_ids.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  for (size_t i = 1; i < config.explicit_token_ids.size(); ++i) {
    const auto& [previous_token, previous_id] = config.explicit_token_ids[i - 1];
    const auto& [token, id] = config.explicit_token_ids[i];
    if (id == previous_id) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_dir.string(), ": the tokenizer files give tokens \"", previous_token,
                       "\" and \"", token, "\" the same id ", id));
    }
  }
  return config;
}

}  // namespace dflash
