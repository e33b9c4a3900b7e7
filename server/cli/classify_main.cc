// dflash-classify: runs a DeBERTa-v2/v3 checkpoint directory on texts or text pairs with the CPU
// or CUDA engine (--backend) and prints label scores (sequence classifiers), per-token labels
// (token classifiers) or sentence embeddings (encoder-only models). The gRPC service supersedes it
// for serving; it stays the quickest way to try a checkpoint.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/flags_help.h"
#include "common/json_document.h"
#include "common/status_macros.h"
#include "engine/engine_factory.h"
#include "engine/model/checkpoint.h"
#include "server/scoring/label_scores.h"
#include "server/tokenizer/tokenizer_loader.h"

ABSL_FLAG(std::string, model, "",
          "Checkpoint directory: config.json, model.safetensors, spm.model.");
ABSL_FLAG(std::string, text, "", "The text to classify (or the premise / query of a pair).");
ABSL_FLAG(std::string, text_pair, "", "Optional second text of a pair (hypothesis / passage).");
ABSL_FLAG(std::string, input, "",
          "A JSONL file of inputs instead of --text: one {\"text\": ..., \"text_pair\": ...} per "
          "line.");
ABSL_FLAG(int, max_length, 0,
          "Truncate inputs to this many tokens, specials included (0: the tokenizer's "
          "model_max_length, or max_position_embeddings for absolute-position models).");
ABSL_FLAG(std::string, truncation, "longest_first",
          "longest_first, only_first, only_second or do_not_truncate.");
ABSL_FLAG(std::string, truncation_side, "",
          "right or left (default: the tokenizer's truncation_side, else right).");
ABSL_FLAG(std::string, scores, "default",
          "default (softmax, or sigmoid for multi-label and one-label models), softmax, sigmoid "
          "or raw.");
ABSL_FLAG(std::string, format, "text", "Output format: text or jsonl.");
ABSL_FLAG(int, batch_tokens, 8192, "Tokens per packed engine batch.");
ABSL_FLAG(int, threads, 0, "BLAS threads of the CPU engine (0: all cores).");
ABSL_FLAG(std::string, backend, "cpu",
          "Engine: cpu, cuda (GPU --device), auto (cuda where this build has the CUDA engine and "
          "the machine a usable GPU, else cpu) or null (computes nothing; every output is zero).");
ABSL_FLAG(std::string, dtype, "auto",
          "Engine precision: auto (float16 on cuda, float32 on cpu), float32, float16 or "
          "bfloat16 (float16 and bfloat16 on cuda only).");
ABSL_FLAG(int, device, 0, "CUDA device ordinal of --backend=cuda.");

namespace dflash {
namespace {

struct Input {
  std::string text;
  std::optional<std::string> pair;
};

absl::StatusOr<std::vector<Input>> ReadInputs() {
  std::vector<Input> inputs;
  const std::string path = absl::GetFlag(FLAGS_input);
  if (path.empty()) {
    if (absl::GetFlag(FLAGS_text).empty()) {
      return absl::InvalidArgumentError("give --text (and optionally --text_pair) or --input");
    }
    Input input{absl::GetFlag(FLAGS_text), std::nullopt};
    if (!absl::GetFlag(FLAGS_text_pair).empty()) input.pair = absl::GetFlag(FLAGS_text_pair);
    inputs.push_back(std::move(input));
    return inputs;
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat(path, ":", number);
    DFLASH_ASSIGN_OR_RETURN(nlohmann::json object, ParseJsonDocument(line, where));
    const JsonFields fields(object, where);
    DFLASH_ASSIGN_OR_RETURN(std::string text, fields.String("text", ""));
    if (text.empty()) return fields.FieldError("text", "is missing or empty");
    Input input{std::move(text), std::nullopt};
    if (fields.Has("text_pair")) {
      DFLASH_ASSIGN_OR_RETURN(std::string pair, fields.String("text_pair", ""));
      input.pair = std::move(pair);
    }
    inputs.push_back(std::move(input));
  }
  return inputs;
}

absl::StatusOr<TruncationOptions> Truncation(const Tokenizer& tokenizer,
                                             const ModelConfig& config) {
  TruncationOptions options = tokenizer.DefaultTruncation();
  DFLASH_ASSIGN_OR_RETURN(options.strategy,
                          ParseTruncationStrategy(absl::GetFlag(FLAGS_truncation)));
  if (!absl::GetFlag(FLAGS_truncation_side).empty()) {
    DFLASH_ASSIGN_OR_RETURN(options.side,
                            ParseTruncationSide(absl::GetFlag(FLAGS_truncation_side)));
  }
  if (absl::GetFlag(FLAGS_max_length) > 0) {
    options.max_length = absl::GetFlag(FLAGS_max_length);
  } else if (options.max_length <= 0) {
    // No limit in the tokenizer files: relative-position models take any length; absolute ones
    // stop at their position table.
    options.max_length = config.position_biased_input ? config.max_position_embeddings : 0;
    if (options.max_length == 0) options.strategy = TruncationStrategy::kDoNotTruncate;
  }
  return options;
}

absl::StatusOr<ScoreFunction> ChosenScoreFunction(const ModelConfig& config) {
  const std::string name = absl::GetFlag(FLAGS_scores);
  if (name == "default") return DefaultScoreFunction(config);
  if (name == "softmax") return ScoreFunction::kSoftmax;
  if (name == "sigmoid") return ScoreFunction::kSigmoid;
  if (name == "raw") return ScoreFunction::kRawLogits;
  return absl::InvalidArgumentError(
      absl::StrCat("--scores=", name, ": expected default, softmax, sigmoid or raw"));
}

nlohmann::json SequenceResult(const ModelConfig& config, std::span<const float> logits,
                              ScoreFunction function) {
  const std::vector<float> scores = ScoreLogits(logits, function);
  std::vector<int> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  nlohmann::json labels = nlohmann::json::array();
  for (int label : order) {
    labels.push_back({{"label", config.id2label[label]}, {"score", scores[label]}});
  }
  return labels;
}

absl::Status Run() {
  const std::string model_dir = absl::GetFlag(FLAGS_model);
  if (model_dir.empty()) return absl::InvalidArgumentError("--model is required");
  DFLASH_ASSIGN_OR_RETURN(std::vector<Input> inputs, ReadInputs());
  DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(model_dir));
  DFLASH_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadCheckpoint(model_dir));
  const EmbeddingConfig embedding = checkpoint.embedding;
  DFLASH_ASSIGN_OR_RETURN(const TruncationOptions truncation,
                          Truncation(*tokenizer, checkpoint.config));
  const int batch_tokens = std::max(1, absl::GetFlag(FLAGS_batch_tokens));
  EngineSpec spec;
  spec.model_name = model_dir;
  DFLASH_ASSIGN_OR_RETURN(spec.backend, ParseEngineBackend(absl::GetFlag(FLAGS_backend)));
  DFLASH_ASSIGN_OR_RETURN(spec.dtype, ParseEngineDtype(absl::GetFlag(FLAGS_dtype)));
  spec.devices = {absl::GetFlag(FLAGS_device)};
  spec.cpu_threads = absl::GetFlag(FLAGS_threads);
  // A batch holds at least one input, which may alone be longer than --batch_tokens.
  spec.max_batch_tokens = std::max<int64_t>(batch_tokens, truncation.max_length);
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Engine>> engines,
                          CreateEngines(spec, std::move(checkpoint)));
  Engine& engine = *engines.front();
  const ModelConfig& config = engine.config();
  DFLASH_ASSIGN_OR_RETURN(const ScoreFunction score_function, ChosenScoreFunction(config));
  const bool jsonl = absl::GetFlag(FLAGS_format) == "jsonl";
  if (!jsonl && absl::GetFlag(FLAGS_format) != "text") {
    return absl::InvalidArgumentError("--format must be text or jsonl");
  }

  RunOptions run_options;
  run_options.pooling = embedding.pooling;
  run_options.normalize = embedding.normalize || !embedding.from_sentence_transformers;
  switch (config.head) {
    case HeadKind::kSequenceClassification:
      run_options.outputs = kSequenceLogits;
      break;
    case HeadKind::kTokenClassification:
      run_options.outputs = kTokenLogits;
      break;
    case HeadKind::kEncoderOnly:
      run_options.outputs = kEmbeddings;
      break;
  }
  if (!jsonl) {
    std::cout << "model: " << model_dir << " (" << HeadKindName(config.head) << ", "
              << config.num_hidden_layers << " layers, hidden " << config.hidden_size
              << ", backend " << engine.Info().backend << ")\n";
  }

  size_t next = 0;
  while (next < inputs.size()) {
    // Pack inputs until the token budget is reached (always at least one).
    PackedBatch batch;
    std::vector<Encoding> encodings;
    const size_t first = next;
    while (next < inputs.size()) {
      const Input& input = inputs[next];
      absl::StatusOr<Encoding> encoding = tokenizer->Encode(
          input.text, input.pair ? std::optional<absl::string_view>(*input.pair) : std::nullopt,
          truncation);
      if (!encoding.ok()) {
        return absl::Status(encoding.status().code(),
                            absl::StrCat("input ", next, ": ", encoding.status().message()));
      }
      if (!encodings.empty() &&
          batch.total_tokens() + static_cast<int>(encoding->ids.size()) > batch_tokens) {
        break;
      }
      batch.Append(encoding->ids, encoding->token_type_ids);
      encodings.push_back(*std::move(encoding));
      ++next;
    }
    DFLASH_ASSIGN_OR_RETURN(BatchOutput output, engine.Run(batch, run_options));
    if (inputs.size() > 100) {
      std::cerr << "dflash-classify: " << next << "/" << inputs.size() << " inputs\n";
    }
    for (size_t s = 0; s < encodings.size(); ++s) {
      const Encoding& encoding = encodings[s];
      nlohmann::json result = {
          {"index", first + s}, {"tokens", encoding.ids.size()}, {"truncated", encoding.truncated}};
      const int labels = output.num_labels;
      if (run_options.outputs == kSequenceLogits) {
        result["scores"] = SequenceResult(
            config, std::span<const float>(output.sequence_logits).subspan(s * labels, labels),
            score_function);
      } else if (run_options.outputs == kTokenLogits) {
        nlohmann::json tokens = nlohmann::json::array();
        for (int t = batch.cu_seqlens[s]; t < batch.cu_seqlens[s + 1]; ++t) {
          const auto row = std::span<const float>(output.token_logits).subspan(t * labels, labels);
          const int best = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
          tokens.push_back({{"token", std::string(tokenizer->TokenText(batch.token_ids[t]))},
                            {"label", config.id2label[best]}});
        }
        result["tokens_labels"] = std::move(tokens);
      } else {
        const auto row = std::span<const float>(output.embeddings)
                             .subspan(s * output.hidden_size, output.hidden_size);
        result["embedding"] = std::vector<float>(row.begin(), row.end());
      }
      if (jsonl) {
        // Replace rather than throw on a piece that is not valid UTF-8.
        std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        continue;
      }
      std::cout << "input " << first + s << " (" << encoding.ids.size() << " tokens"
                << (encoding.truncated ? ", truncated" : "") << "):";
      if (result.contains("scores")) {
        for (const nlohmann::json& label : result["scores"]) {
          std::cout << "  " << label["label"].get<std::string>() << " " << std::fixed
                    << std::setprecision(4) << label["score"].get<float>();
        }
      } else if (result.contains("tokens_labels")) {
        for (const nlohmann::json& token : result["tokens_labels"]) {
          std::cout << "  " << token["token"].get<std::string>() << "/"
                    << token["label"].get<std::string>();
        }
      } else {
        std::cout << "  embedding[" << output.hidden_size << "] = [";
        for (int c = 0; c < std::min(output.hidden_size, 6); ++c) {
          std::cout << (c ? ", " : "") << std::setprecision(4)
                    << result["embedding"][c].get<float>();
        }
        std::cout << ", ...]";
      }
      std::cout << "\n";
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace dflash

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a DeBERTa-v2/v3 checkpoint on texts with the CPU or CUDA engine and prints its "
      "scores.\n"
      "Usage: dflash-classify --model=DIR --text=\"...\" [--text_pair=\"...\"]\n"
      "       dflash-classify --model=DIR --input=inputs.jsonl --format=jsonl\n"
      "       dflash-classify --model=DIR --text=\"...\" --backend=cuda [--dtype=float32]\n"
      "Sequence classifiers print label scores, token classifiers per-token labels, encoder-only "
      "models sentence embeddings.");
  dflash::ListFlagsOf({"server/cli/classify_main.cc"});
  absl::ParseCommandLine(argc, argv);
  if (const absl::Status status = dflash::Run(); !status.ok()) {
    std::cerr << "dflash-classify: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
