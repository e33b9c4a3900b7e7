// engine/model/model_config.{h,cc}: config.json parsing with transformers' defaults
// (docs/deberta.md#configuration).
#include "engine/model/model_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kSource[] = "/models/example/config.json";

// microsoft/deberta-v3-base's config.json (docs/deberta.md#public-checkpoints, #tensor-names).
constexpr char kDebertaV3BaseConfig[] = R"({
  "model_type": "deberta-v2",
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 512,
  "relative_attention": true,
  "position_buckets": 256,
  "norm_rel_ebd": "layer_norm",
  "share_att_key": true,
  "pos_att_type": "p2c|c2p",
  "layer_norm_eps": 1e-7,
  "max_relative_positions": -1,
  "position_biased_input": false,
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "type_vocab_size": 0,
  "vocab_size": 128100
})";

// A v2-xlarge-style config with the ConvLayer, as the hub writes it.
constexpr char kDebertaV2XLargeConfig[] = R"({
  "model_type": "deberta-v2",
  "attention_head_size": 64,
  "attention_probs_dropout_prob": 0.1,
  "conv_act": "gelu",
  "conv_kernel_size": 3,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 1536,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 512,
  "max_relative_positions": -1,
  "norm_rel_ebd": "layer_norm",
  "num_attention_heads": 24,
  "num_hidden_layers": 24,
  "pad_token_id": 0,
  "pooler_dropout": 0,
  "pooler_hidden_act": "gelu",
  "pooler_hidden_size": 1536,
  "pos_att_type": ["p2c", "c2p"],
  "position_biased_input": false,
  "position_buckets": 256,
  "relative_attention": true,
  "share_att_key": true,
  "type_vocab_size": 0,
  "vocab_size": 128100
})";

ModelConfig MustParse(const std::string& text) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(text, kSource);
  EXPECT_TRUE(config.ok()) << config.status() << "\n" << text;
  return config.ok() ? *std::move(config) : ModelConfig{};
}

ModelConfig MustParse(const nlohmann::json& json) { return MustParse(json.dump()); }

// The status of parsing `json`; the test fails if it parses.
absl::Status ParseError(const nlohmann::json& json) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), kSource);
  EXPECT_FALSE(config.ok()) << json.dump();
  return config.ok() ? absl::OkStatus() : config.status();
}

nlohmann::json Base() { return nlohmann::json{{"model_type", "deberta-v2"}}; }

nlohmann::json With(nlohmann::json json, const nlohmann::json& overrides) {
  json.update(overrides);
  return json;
}

TEST(ModelConfigTest, DefaultsOfTransformersWhenKeysAreMissing) {
  const ModelConfig config = MustParse(Base());
  EXPECT_EQ(config.model_type, "deberta-v2");
  EXPECT_THAT(config.architectures, IsEmpty());
  EXPECT_EQ(config.head, HeadKind::kEncoderOnly);
  EXPECT_EQ(config.vocab_size, 128100);
  EXPECT_EQ(config.hidden_size, 1536);
  EXPECT_EQ(config.num_hidden_layers, 24);
  EXPECT_EQ(config.num_attention_heads, 24);
  EXPECT_EQ(config.attention_head_size, 64);
  EXPECT_EQ(config.all_head_size(), 1536);
  EXPECT_EQ(config.intermediate_size, 6144);
  EXPECT_EQ(config.hidden_act, Activation::kGeluErf);
  EXPECT_EQ(config.max_position_embeddings, 512);
  EXPECT_EQ(config.type_vocab_size, 0);
  EXPECT_EQ(config.layer_norm_eps, 1e-7f);
  EXPECT_FALSE(config.relative_attention);
  EXPECT_EQ(config.max_relative_positions, -1);
  EXPECT_EQ(config.EffectiveMaxRelativePositions(), 512);
  EXPECT_EQ(config.position_buckets, -1);
  EXPECT_EQ(config.AttentionSpan(), 512);
  EXPECT_EQ(config.RelativeEmbeddingRows(), 1024);
  EXPECT_FALSE(config.uses_log_buckets());
  EXPECT_FALSE(config.c2p);
  EXPECT_FALSE(config.p2c);
  EXPECT_EQ(config.ScaleFactor(), 1);
  EXPECT_FALSE(config.share_att_key);
  EXPECT_FALSE(config.norm_rel_embeddings);
  EXPECT_TRUE(config.position_biased_input);
  EXPECT_EQ(config.embedding_size, 1536);
  EXPECT_EQ(config.conv_kernel_size, 0);
  EXPECT_FALSE(config.has_conv());
  EXPECT_EQ(config.conv_groups, 1);
  EXPECT_EQ(config.conv_act, Activation::kTanh);
  EXPECT_EQ(config.pad_token_id, 0);
  EXPECT_EQ(config.pooler_hidden_size, 1536);
  EXPECT_EQ(config.pooler_hidden_act, Activation::kGeluErf);
  EXPECT_THAT(config.id2label, ElementsAre("LABEL_0", "LABEL_1"));
  EXPECT_EQ(config.num_labels(), 2);
  EXPECT_EQ(config.problem_type, ProblemType::kUnspecified);
}

TEST(ModelConfigTest, DerivedDefaultsFollowHiddenSize) {
  const ModelConfig config =
      MustParse(With(Base(), {{"hidden_size", 768}, {"num_attention_heads", 12}}));
  EXPECT_EQ(config.attention_head_size, 64);
  EXPECT_EQ(config.embedding_size, 768);
  EXPECT_EQ(config.pooler_hidden_size, 768);
  const ModelConfig small =
      MustParse(With(Base(), {{"hidden_size", 8}, {"num_attention_heads", 2}}));
  EXPECT_EQ(small.attention_head_size, 4);
  EXPECT_EQ(small.embedding_size, 8);
}

TEST(ModelConfigTest, AttentionSpanAndBuckets) {
  ModelConfig config =
      MustParse(With(Base(), {{"relative_attention", true}, {"max_relative_positions", 100}}));
  EXPECT_EQ(config.EffectiveMaxRelativePositions(), 100);
  EXPECT_EQ(config.AttentionSpan(), 100);
  EXPECT_FALSE(config.uses_log_buckets());

  config = MustParse(With(Base(), {{"relative_attention", true},
                                   {"max_relative_positions", 0},
                                   {"max_position_embeddings", 300}}));
  EXPECT_EQ(config.EffectiveMaxRelativePositions(), 300);
  EXPECT_EQ(config.AttentionSpan(), 300);

  config = MustParse(With(Base(), {{"relative_attention", true}, {"position_buckets", 256}}));
  EXPECT_EQ(config.EffectiveMaxRelativePositions(), 512);
  EXPECT_EQ(config.AttentionSpan(), 256);
  EXPECT_EQ(config.RelativeEmbeddingRows(), 512);
  EXPECT_TRUE(config.uses_log_buckets());

  // position_buckets <= 0 means no buckets.
  config = MustParse(With(
      Base(),
      {{"relative_attention", true}, {"position_buckets", 0}, {"max_relative_positions", 24}}));
  EXPECT_EQ(config.AttentionSpan(), 24);
  EXPECT_FALSE(config.uses_log_buckets());
}

TEST(ModelConfigTest, PosAttTypeForms) {
  struct Case {
    nlohmann::json value;
    bool c2p;
    bool p2c;
  };
  const std::vector<Case> cases = {
      {nlohmann::json::array({"p2c", "c2p"}), true, true},
      {"p2c|c2p", true, true},
      {"c2p|p2c", true, true},
      {"C2P|P2C", true, true},
      {" c2p | p2c ", true, true},
      {nlohmann::json::array({" C2P "}), true, false},
      {"p2c", false, true},
      {nlohmann::json::array({"c2p"}), true, false},
      {nullptr, false, false},
      {"", false, false},
      {nlohmann::json::array(), false, false},
      {"p2p|c2p", true, false},  // v1's p2p is ignored, as in transformers.
  };
  for (const Case& c : cases) {
    const ModelConfig config = MustParse(With(Base(), {{"pos_att_type", c.value}}));
    EXPECT_EQ(config.c2p, c.c2p) << c.value.dump();
    EXPECT_EQ(config.p2c, c.p2c) << c.value.dump();
    EXPECT_EQ(config.ScaleFactor(), 1 + c.c2p + c.p2c) << c.value.dump();
  }
  const absl::Status status = ParseError(With(Base(), {{"pos_att_type", 3}}));
  EXPECT_THAT(status.message(), HasSubstr(kSource));
  EXPECT_THAT(status.message(), HasSubstr("field 'pos_att_type'"));
}

TEST(ModelConfigTest, NormRelEbd) {
  EXPECT_TRUE(MustParse(With(Base(), {{"norm_rel_ebd", "layer_norm"}})).norm_rel_embeddings);
  EXPECT_TRUE(MustParse(With(Base(), {{"norm_rel_ebd", "Layer_Norm"}})).norm_rel_embeddings);
  EXPECT_TRUE(MustParse(With(Base(), {{"norm_rel_ebd", "x|layer_norm"}})).norm_rel_embeddings);
  EXPECT_FALSE(MustParse(With(Base(), {{"norm_rel_ebd", "none"}})).norm_rel_embeddings);
  EXPECT_FALSE(MustParse(With(Base(), {{"norm_rel_ebd", nullptr}})).norm_rel_embeddings);
}

TEST(ModelConfigTest, Id2Label) {
  ModelConfig config = MustParse(With(Base(), {{"id2label", {{"1", "pos"}, {"0", "neg"}}}}));
  EXPECT_THAT(config.id2label, ElementsAre("neg", "pos"));

  config = MustParse(
      With(Base(), {{"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}, {"num_labels", 3}}));
  EXPECT_EQ(config.num_labels(), 3);

  config = MustParse(With(Base(), {{"num_labels", 3}}));
  EXPECT_THAT(config.id2label, ElementsAre("LABEL_0", "LABEL_1", "LABEL_2"));
  config = MustParse(With(Base(), {{"num_labels", 1}}));
  EXPECT_THAT(config.id2label, ElementsAre("LABEL_0"));
  // id2label wins over num_labels, as in transformers.
  config = MustParse(With(Base(), {{"id2label", {{"0", "score"}}}, {"num_labels", 5}}));
  EXPECT_THAT(config.id2label, ElementsAre("score"));

  struct Case {
    nlohmann::json id2label;
    std::string expected;
  };
  const std::vector<Case> errors = {
      {{{"0", "a"}, {"2", "c"}}, "has key \"2\""},
      {{{"1", "b"}}, "has key \"1\""},
      {{{"x", "a"}}, "has key \"x\""},
      {{{"-1", "a"}, {"0", "b"}}, "has key \"-1\""},
      {{{"0", 5}}, "entry \"0\" must be a string, got 5"},
      {nlohmann::json::object(), "is empty"},
      {nlohmann::json::array({"a", "b"}), "must be an object"},
  };
  for (const Case& c : errors) {
    const absl::Status status = ParseError(With(Base(), {{"id2label", c.id2label}}));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(kSource));
    EXPECT_THAT(status.message(), HasSubstr("field 'id2label'"));
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
  const absl::Status status = ParseError(With(Base(), {{"num_labels", 0}}));
  EXPECT_THAT(status.message(), HasSubstr("field 'num_labels'"));
}

TEST(ModelConfigTest, ArchitecturesGiveTheHead) {
  struct Case {
    std::string architecture;
    HeadKind head;
  };
  for (const Case& c : std::vector<Case>{
           {"DebertaV2ForSequenceClassification", HeadKind::kSequenceClassification},
           {"DebertaV2ForTokenClassification", HeadKind::kTokenClassification},
           {"DebertaV2Model", HeadKind::kEncoderOnly},
           {"DebertaV2ForMaskedLM", HeadKind::kEncoderOnly},
           {"DebertaV2ForPreTraining", HeadKind::kEncoderOnly},
       }) {
    const ModelConfig config =
        MustParse(With(Base(), {{"architectures", nlohmann::json::array({c.architecture})}}));
    EXPECT_EQ(config.head, c.head) << c.architecture;
    EXPECT_THAT(config.architectures, ElementsAre(c.architecture));
  }
  // architectures without model_type is enough.
  const ModelConfig config = MustParse(nlohmann::json{
      {"architectures", nlohmann::json::array({"DebertaV2ForTokenClassification"})}});
  EXPECT_EQ(config.head, HeadKind::kTokenClassification);
  EXPECT_EQ(HeadKindName(HeadKind::kEncoderOnly), "encoder");
  EXPECT_EQ(HeadKindName(HeadKind::kSequenceClassification), "sequence-classification");
  EXPECT_EQ(HeadKindName(HeadKind::kTokenClassification), "token-classification");
}

struct ErrorCase {
  std::string label;
  nlohmann::json config;
  std::string field;
  std::string problem;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.label; }

std::vector<ErrorCase> ErrorCases() {
  const nlohmann::json rel = With(Base(), {{"relative_attention", true}});
  return {
      {"model_type_bert", {{"model_type", "bert"}}, "model_type", "is \"bert\""},
      {"model_type_deberta_v1", {{"model_type", "deberta"}}, "model_type", "DeBERTa v1"},
      {"model_type_not_string", {{"model_type", 2}}, "model_type", "must be a string"},
      {"no_model_type_no_architectures", nlohmann::json::object(), "model_type", "is missing"},
      {"bert_architecture", With(Base(), {{"architectures", {"BertForSequenceClassification"}}}),
       "architectures",
       "\"BertForSequenceClassification\", which is not a DeBERTa-v2/v3 architecture"},
      {"deberta_v1_architecture",
       {{"architectures", {"DebertaForSequenceClassification"}}},
       "architectures",
       "not a DeBERTa-v2/v3 architecture"},
      {"question_answering_head",
       With(Base(), {{"architectures", {"DebertaV2ForQuestionAnswering"}}}), "architectures",
       "\"DebertaV2ForQuestionAnswering\", whose head is not supported"},
      {"multiple_choice_head", With(Base(), {{"architectures", {"DebertaV2ForMultipleChoice"}}}),
       "architectures", "whose head is not supported"},
      {"heads_do_not_divide_hidden",
       With(Base(), {{"hidden_size", 100}, {"num_attention_heads", 12}}), "num_attention_heads",
       "is 12, which does not divide hidden_size 100"},
      {"hidden_size_string", With(Base(), {{"hidden_size", "768"}}), "hidden_size",
       "must be an integer, got \"768\""},
      {"hidden_size_float", With(Base(), {{"hidden_size", 768.5}}), "hidden_size",
       "must be an integer, got 768.5"},
      {"hidden_size_zero", With(Base(), {{"hidden_size", 0}}), "hidden_size", "is 0; expected"},
      {"layers_negative", With(Base(), {{"num_hidden_layers", -1}}), "num_hidden_layers",
       "is -1; expected"},
      {"vocab_huge", With(Base(), {{"vocab_size", 1ll << 40}}), "vocab_size", "expected"},
      {"relative_attention_string", With(Base(), {{"relative_attention", "true"}}),
       "relative_attention", "must be true or false"},
      {"unknown_activation", With(Base(), {{"hidden_act", "gelu_foo"}}), "hidden_act",
       "unknown activation \"gelu_foo\""},
      {"unknown_pooler_activation", With(Base(), {{"pooler_hidden_act", "mish"}}),
       "pooler_hidden_act", "unknown activation \"mish\""},
      {"unknown_conv_activation", With(Base(), {{"conv_act", "swiglu"}}), "conv_act",
       "unknown activation"},
      {"even_conv_kernel", With(Base(), {{"conv_kernel_size", 4}}), "conv_kernel_size",
       "is 4; an even kernel"},
      {"conv_groups_do_not_divide", With(Base(), {{"conv_kernel_size", 3}, {"conv_groups", 7}}),
       "conv_groups", "does not divide hidden_size 1536"},
      {"pooler_hidden_size_differs",
       With(Base(),
            {{"hidden_size", 768}, {"num_attention_heads", 12}, {"pooler_hidden_size", 512}}),
       "pooler_hidden_size", "is 512 but the classifier reads hidden_size 768"},
      {"bad_problem_type", With(Base(), {{"problem_type", "ranking"}}), "problem_type",
       "is \"ranking\""},
      {"problem_type_not_string", With(Base(), {{"problem_type", 1}}), "problem_type",
       "must be a string"},
      {"eps_zero", With(Base(), {{"layer_norm_eps", 0}}), "layer_norm_eps", "must be in (0, 1)"},
      {"eps_negative", With(Base(), {{"layer_norm_eps", -1e-5}}), "layer_norm_eps",
       "must be in (0, 1)"},
      {"eps_string", With(Base(), {{"layer_norm_eps", "1e-7"}}), "layer_norm_eps",
       "must be a number"},
      {"position_buckets_one", With(rel, {{"position_buckets", 1}}), "position_buckets",
       "must be at least 2"},
      {"log_buckets_divide_by_zero",
       With(rel, {{"position_buckets", 256}, {"max_relative_positions", 129}}),
       "max_relative_positions", "gives max_position 129, which must exceed"},
      {"log_buckets_negative_log",
       With(rel, {{"position_buckets", 256}, {"max_relative_positions", 100}}),
       "max_relative_positions", "gives max_position 100"},
      {"log_buckets_fallback_too_small",
       With(rel, {{"position_buckets", 256}, {"max_position_embeddings", 128}}),
       "max_relative_positions", "gives max_position 128"},
      {"span_below_one",
       With(rel, {{"max_relative_positions", -1}, {"max_position_embeddings", 0}}),
       "max_position_embeddings", "is 0; expected"},
      {"span_too_large", With(rel, {{"max_relative_positions", 1 << 20}}), "position_buckets",
       "attention span that is too large"},
      {"architectures_not_list", With(Base(), {{"architectures", 5}}), "architectures",
       "must be a list of strings"},
  };
}

class ModelConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ModelConfigErrorTest, NamesConfigFileAndField) {
  const ErrorCase& c = GetParam();
  const absl::Status status = ParseError(c.config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(kSource));
  EXPECT_THAT(status.message(), HasSubstr("field '" + c.field + "'"));
  EXPECT_THAT(status.message(), HasSubstr(c.problem));
}

INSTANTIATE_TEST_SUITE_P(Table, ModelConfigErrorTest, ::testing::ValuesIn(ErrorCases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& param_info) {
                           return param_info.param.label;
                         });

// Regression (JsonFields::Int, used by every integer field): unsigned values >= 2^63 used to wrap
// to negative numbers, so "position_buckets": 18446744073709551360 parsed as -256 (log buckets
// silently off) and "max_relative_positions": 18446744073709551615 as -1.
TEST(ModelConfigTest, HugeUnsignedValuesAreErrors) {
  const nlohmann::json rel = With(Base(), {{"relative_attention", true}});
  for (const auto& [field, value] : std::vector<std::pair<std::string, uint64_t>>{
           {"position_buckets", 18446744073709551360ull},
           {"max_relative_positions", 18446744073709551615ull},
           {"pad_token_id", 18446744073709551615ull},
           {"hidden_size", 9223372036854775808ull}}) {
    absl::StatusOr<ModelConfig> config =
        ParseModelConfig(With(rel, {{field, value}}).dump(), kSource);
    ASSERT_FALSE(config.ok()) << field << " accepted";
    EXPECT_THAT(config.status().message(), HasSubstr("field '" + field + "' must be an integer"));
  }
}

// Regression (found by model_config_fuzz): layer_norm_eps used to be range-checked as a double
// but stored as a float, so 1e-47 passed and became exactly 0, and every LayerNorm of a constant
// row then divided by zero.
TEST(ModelConfigTest, TinyLayerNormEpsIsRejectedNotStoredAsZero) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(With(Base(), {{"layer_norm_eps", 1e-47}}).dump(), kSource);
  ASSERT_FALSE(config.ok()) << "accepted as " << config->layer_norm_eps;
  EXPECT_THAT(config.status().message(), HasSubstr("field 'layer_norm_eps'"));
}

// Regression (review): heads * head size overflowed int (65536 * 65536 wraps to 0), and the
// loader then accepted [0, H] Q/K/V weights.
TEST(ModelConfigTest, HeadsTimesHeadSizeMustStayBounded) {
  const absl::Status status = ParseError(With(
      Base(),
      {{"hidden_size", 65536}, {"num_attention_heads", 65536}, {"attention_head_size", 65536}}));
  EXPECT_THAT(status.message(), HasSubstr("field 'attention_head_size'"));
}

TEST(ModelConfigTest, ValidLogBucketBoundary) {
  // max_position - 1 must exceed mid: 130 - 1 > 128.
  const ModelConfig config = MustParse(With(
      Base(),
      {{"relative_attention", true}, {"position_buckets", 256}, {"max_relative_positions", 130}}));
  EXPECT_TRUE(config.uses_log_buckets());
  // Bucket settings only matter with relative attention (transformers never uses them).
  EXPECT_EQ(MustParse(With(Base(), {{"position_buckets", 1}})).position_buckets, 1);
}

TEST(ModelConfigTest, SyntaxErrorsNameTheFile) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig("{\"hidden_size\": }", kSource);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr(std::string(kSource) + ":1:17"));
  config = ParseModelConfig("[1]", kSource);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr(kSource));
  EXPECT_THAT(config.status().message(), HasSubstr("expected a JSON object"));
  config = ParseModelConfig(R"({"model_type": "deberta-v2", "model_type": "bert"})", kSource);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("duplicate key \"model_type\""));
}

TEST(ModelConfigTest, Activations) {
  struct Case {
    std::string name;
    Activation activation;
  };
  for (const Case& c : std::vector<Case>{{"gelu", Activation::kGeluErf},
                                         {"GELU", Activation::kGeluErf},
                                         {"gelu_new", Activation::kGeluTanh},
                                         {"gelu_pytorch_tanh", Activation::kGeluTanh},
                                         {"gelu_fast", Activation::kGeluTanh},
                                         {"relu", Activation::kRelu},
                                         {"tanh", Activation::kTanh},
                                         {"silu", Activation::kSilu},
                                         {"swish", Activation::kSilu},
                                         {"sigmoid", Activation::kSigmoid}}) {
    absl::StatusOr<Activation> activation = ParseActivation(c.name);
    ASSERT_TRUE(activation.ok()) << c.name;
    EXPECT_EQ(*activation, c.activation) << c.name;
    const ModelConfig config = MustParse(With(
        Base(), {{"hidden_act", c.name}, {"conv_act", c.name}, {"pooler_hidden_act", c.name}}));
    EXPECT_EQ(config.hidden_act, c.activation);
    EXPECT_EQ(config.conv_act, c.activation);
    EXPECT_EQ(config.pooler_hidden_act, c.activation);
  }
  EXPECT_EQ(ParseActivation("quick_gelu").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelConfigTest, ProblemTypes) {
  EXPECT_EQ(MustParse(With(Base(), {{"problem_type", "regression"}})).problem_type,
            ProblemType::kRegression);
  EXPECT_EQ(MustParse(With(Base(), {{"problem_type", "single_label_classification"}})).problem_type,
            ProblemType::kSingleLabel);
  EXPECT_EQ(MustParse(With(Base(), {{"problem_type", "multi_label_classification"}})).problem_type,
            ProblemType::kMultiLabel);
  EXPECT_EQ(MustParse(With(Base(), {{"problem_type", nullptr}})).problem_type,
            ProblemType::kUnspecified);
}

TEST(ModelConfigTest, UnknownKeysAreIgnored) {
  const ModelConfig config = MustParse(With(
      Base(), {{"torch_dtype", "float32"}, {"transformers_version", "4.41.0"}, {"legacy", true}}));
  EXPECT_EQ(config.hidden_size, 1536);
}

TEST(ModelConfigTest, DebertaV3BaseConfig) {
  const ModelConfig config = MustParse(std::string(kDebertaV3BaseConfig));
  EXPECT_EQ(config.model_type, "deberta-v2");
  EXPECT_EQ(config.head, HeadKind::kEncoderOnly);
  EXPECT_EQ(config.vocab_size, 128100);
  EXPECT_EQ(config.hidden_size, 768);
  EXPECT_EQ(config.num_hidden_layers, 12);
  EXPECT_EQ(config.num_attention_heads, 12);
  EXPECT_EQ(config.attention_head_size, 64);
  EXPECT_EQ(config.all_head_size(), 768);
  EXPECT_EQ(config.intermediate_size, 3072);
  EXPECT_EQ(config.hidden_act, Activation::kGeluErf);
  EXPECT_EQ(config.max_position_embeddings, 512);
  EXPECT_EQ(config.type_vocab_size, 0);
  EXPECT_EQ(config.layer_norm_eps, 1e-7f);
  EXPECT_TRUE(config.relative_attention);
  EXPECT_EQ(config.max_relative_positions, -1);
  EXPECT_EQ(config.EffectiveMaxRelativePositions(), 512);
  EXPECT_EQ(config.position_buckets, 256);
  EXPECT_TRUE(config.uses_log_buckets());
  EXPECT_EQ(config.AttentionSpan(), 256);
  EXPECT_EQ(config.RelativeEmbeddingRows(), 512);
  EXPECT_TRUE(config.c2p);
  EXPECT_TRUE(config.p2c);
  EXPECT_EQ(config.ScaleFactor(), 3);
  EXPECT_TRUE(config.share_att_key);
  EXPECT_TRUE(config.norm_rel_embeddings);
  EXPECT_FALSE(config.position_biased_input);
  EXPECT_EQ(config.embedding_size, 768);
  EXPECT_FALSE(config.has_conv());
  EXPECT_EQ(config.pooler_hidden_size, 768);
  EXPECT_THAT(config.id2label, ElementsAre("LABEL_0", "LABEL_1"));
}

TEST(ModelConfigTest, DebertaV3BaseFineTunedClassifier) {
  nlohmann::json json = nlohmann::json::parse(kDebertaV3BaseConfig);
  json.update({{"architectures", {"DebertaV2ForSequenceClassification"}},
               {"id2label", {{"0", "contradiction"}, {"1", "entailment"}, {"2", "neutral"}}},
               {"label2id", {{"contradiction", 0}, {"entailment", 1}, {"neutral", 2}}},
               {"torch_dtype", "float32"},
               {"transformers_version", "4.30.0"}});
  const ModelConfig config = MustParse(json);
  EXPECT_EQ(config.head, HeadKind::kSequenceClassification);
  EXPECT_THAT(config.id2label, ElementsAre("contradiction", "entailment", "neutral"));
}

TEST(ModelConfigTest, DebertaV2XLargeConfigWithConv) {
  const ModelConfig config = MustParse(std::string(kDebertaV2XLargeConfig));
  EXPECT_EQ(config.hidden_size, 1536);
  EXPECT_EQ(config.num_hidden_layers, 24);
  EXPECT_EQ(config.attention_head_size, 64);
  EXPECT_TRUE(config.has_conv());
  EXPECT_EQ(config.conv_kernel_size, 3);
  EXPECT_EQ(config.conv_groups, 1);
  EXPECT_EQ(config.conv_act, Activation::kGeluErf);
  EXPECT_TRUE(config.c2p && config.p2c);
  EXPECT_EQ(config.AttentionSpan(), 256);
}

TEST(ModelConfigTest, LegacyUnsharedConfig) {
  // An early v2-style config: no buckets, separate position projections, absolute positions,
  // token types and an embedding projection.
  const ModelConfig config = MustParse(nlohmann::json{{"model_type", "deberta-v2"},
                                                      {"hidden_size", 64},
                                                      {"num_attention_heads", 4},
                                                      {"embedding_size", 48},
                                                      {"relative_attention", true},
                                                      {"max_relative_positions", 32},
                                                      {"pos_att_type", "c2p|p2c"},
                                                      {"type_vocab_size", 2},
                                                      {"position_biased_input", true}});
  EXPECT_EQ(config.embedding_size, 48);
  EXPECT_EQ(config.AttentionSpan(), 32);
  EXPECT_FALSE(config.uses_log_buckets());
  EXPECT_FALSE(config.share_att_key);
  EXPECT_TRUE(config.position_biased_input);
  EXPECT_EQ(config.type_vocab_size, 2);
}

TEST(LoadModelConfigTest, ReadsAFileAndNamesItInErrors) {
  test::ScopedTempDir dir;
  const std::filesystem::path path = dir.path() / "config.json";
  ASSERT_TRUE(test::WriteTextFile(path, kDebertaV3BaseConfig).ok());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->hidden_size, 768);

  ASSERT_TRUE(test::WriteTextFile(path, R"({"model_type": "bert"})").ok());
  config = LoadModelConfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr(path.string() + ": field 'model_type'"));

  config = LoadModelConfig(dir.path() / "missing.json");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("missing.json"));
}

}  // namespace
}  // namespace dflash
