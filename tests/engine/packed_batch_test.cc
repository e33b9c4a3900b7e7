// engine/packed_batch.{h,cc}: building packed batches and validating them against a model.
#include "engine/packed_batch.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ModelConfig TinyConfig(HeadKind head = HeadKind::kSequenceClassification) {
  ModelConfig config;
  config.head = head;
  config.vocab_size = 50;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.attention_head_size = 4;
  config.type_vocab_size = 0;
  config.position_biased_input = false;
  config.max_position_embeddings = 8;
  config.id2label = {"NEG", "POS"};
  return config;
}

PackedBatch ThreeSequences() {
  PackedBatch batch;
  batch.Append({1, 5, 2});
  batch.Append({1, 7, 8, 9, 2});
  batch.Append({1});
  return batch;
}

TEST(PackedBatchTest, AppendBuildsCuSeqlensAndMaxSeqlen) {
  PackedBatch batch;
  EXPECT_EQ(batch.num_sequences(), 0);
  EXPECT_EQ(batch.total_tokens(), 0);
  batch = ThreeSequences();
  EXPECT_THAT(batch.token_ids, ElementsAre(1, 5, 2, 1, 7, 8, 9, 2, 1));
  EXPECT_THAT(batch.cu_seqlens, ElementsAre(0, 3, 8, 9));
  EXPECT_EQ(batch.max_seqlen, 5);
  EXPECT_EQ(batch.num_sequences(), 3);
  EXPECT_EQ(batch.total_tokens(), 9);
  EXPECT_EQ(batch.sequence_length(0), 3);
  EXPECT_EQ(batch.sequence_length(1), 5);
  EXPECT_EQ(batch.sequence_length(2), 1);
  EXPECT_THAT(batch.token_type_ids, IsEmpty());
}

TEST(PackedBatchTest, AppendMixesSequencesWithAndWithoutTypes) {
  PackedBatch batch;
  batch.Append({1, 2});
  EXPECT_THAT(batch.token_type_ids, IsEmpty());
  batch.Append({3, 4, 5}, {0, 1, 1});
  EXPECT_THAT(batch.token_type_ids, ElementsAre(0, 0, 0, 1, 1));
  batch.Append({6});
  EXPECT_THAT(batch.token_type_ids, ElementsAre(0, 0, 0, 1, 1, 0));
  batch.Append({7, 8}, {1, 0});
  EXPECT_THAT(batch.token_ids, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(batch.token_type_ids, ElementsAre(0, 0, 0, 1, 1, 0, 1, 0));
  EXPECT_THAT(batch.cu_seqlens, ElementsAre(0, 2, 5, 6, 8));
  EXPECT_EQ(batch.max_seqlen, 3);
  EXPECT_TRUE(ValidatePackedBatch(batch, RunOptions{}, TinyConfig()).ok());
}

TEST(PackedBatchTest, AppendTypesFirst) {
  PackedBatch batch;
  batch.Append({1, 2}, {1, 1});
  batch.Append({3});
  EXPECT_THAT(batch.token_type_ids, ElementsAre(1, 1, 0));
  EXPECT_THAT(batch.cu_seqlens, ElementsAre(0, 2, 3));
}

TEST(ValidatePackedBatchTest, AcceptsAValidBatch) {
  const absl::Status status = ValidatePackedBatch(ThreeSequences(), RunOptions{}, TinyConfig());
  EXPECT_TRUE(status.ok()) << status;
  RunOptions all;
  all.outputs = kSequenceLogits | kEmbeddings | kHiddenStates;
  EXPECT_TRUE(ValidatePackedBatch(ThreeSequences(), all, TinyConfig()).ok());
  all.outputs = kTokenLogits | kEmbeddings | kHiddenStates;
  EXPECT_TRUE(
      ValidatePackedBatch(ThreeSequences(), all, TinyConfig(HeadKind::kTokenClassification)).ok());
  all.outputs = kEmbeddings | kHiddenStates;
  EXPECT_TRUE(ValidatePackedBatch(ThreeSequences(), all, TinyConfig(HeadKind::kEncoderOnly)).ok());
}

struct InvalidCase {
  std::string label;
  std::function<void(PackedBatch&, RunOptions&, ModelConfig&)> mutate;
  absl::StatusCode code;
  std::string message;
};

void PrintTo(const InvalidCase& c, std::ostream* os) { *os << c.label; }

std::vector<InvalidCase> InvalidCases() {
  using B = PackedBatch;
  using O = RunOptions;
  using C = ModelConfig;
  const auto invalid = absl::StatusCode::kInvalidArgument;
  const auto precondition = absl::StatusCode::kFailedPrecondition;
  return {
      {"no_sequences", [](B& b, O&, C&) { b = PackedBatch{}; }, invalid,
       "cu_seqlens needs at least two entries"},
      {"cu_seqlens_single_entry", [](B& b, O&, C&) { b.cu_seqlens = {0}; }, invalid,
       "at least two entries"},
      {"cu_seqlens_not_starting_at_zero",
       [](B& b, O&, C&) {
         b.cu_seqlens = {1, 3, 8, 9};
       },
       invalid, "cu_seqlens[0] must be 0"},
      {"cu_seqlens_decreasing",
       [](B& b, O&, C&) {
         b.cu_seqlens = {0, 5, 3, 9};
       },
       invalid, "sequence 1 is empty or cu_seqlens decreases"},
      {"empty_sequence",
       [](B& b, O&, C&) {
         b.cu_seqlens = {0, 3, 3, 9};
       },
       invalid, "sequence 1 is empty"},
      {"empty_first_sequence",
       [](B& b, O&, C&) {
         b.cu_seqlens = {0, 0, 8, 9};
       },
       invalid, "sequence 0 is empty"},
      {"cu_seqlens_short_of_total",
       [](B& b, O&, C&) {
         b.cu_seqlens = {0, 3, 8};
       },
       invalid, "cu_seqlens ends at 8 but there are 9 tokens"},
      {"cu_seqlens_past_total",
       [](B& b, O&, C&) {
         b.cu_seqlens = {0, 3, 8, 10};
       },
       invalid, "cu_seqlens ends at 10 but there are 9 tokens"},
      {"max_seqlen_too_small", [](B& b, O&, C&) { b.max_seqlen = 4; }, invalid,
       "max_seqlen is 4 but the longest sequence has 5 tokens"},
      {"max_seqlen_too_large", [](B& b, O&, C&) { b.max_seqlen = 6; }, invalid, "max_seqlen is 6"},
      {"id_equal_to_vocab", [](B& b, O&, C&) { b.token_ids[4] = 50; }, invalid,
       "sequence 1 has id 50 at token 1, outside the vocabulary [0, 50)"},
      {"negative_id", [](B& b, O&, C&) { b.token_ids[0] = -1; }, invalid,
       "sequence 0 has id -1 at token 0, outside the vocabulary"},
      {"type_ids_wrong_length",
       [](B& b, O&, C&) {
         b.token_type_ids = {0, 0};
       },
       invalid, "token_type_ids and token_ids differ in length"},
      {"type_outside_type_vocab",
       [](B& b, O&, C& c) {
         c.type_vocab_size = 2;
         b.token_type_ids.assign(9, 0);
         b.token_type_ids[7] = 2;
       },
       invalid, "sequence 1 has type 2 at token 4, outside [0, 2)"},
      {"negative_type",
       [](B& b, O&, C& c) {
         c.type_vocab_size = 2;
         b.token_type_ids.assign(9, 0);
         b.token_type_ids[1] = -1;
       },
       invalid, "sequence 0 has type -1 at token 1"},
      {"absolute_positions_too_long",
       [](B&, O&, C& c) {
         c.position_biased_input = true;
         c.max_position_embeddings = 4;
       },
       invalid, "sequence 1 has 5 tokens, more than max_position_embeddings 4"},
      {"no_outputs", [](B&, O& o, C&) { o.outputs = 0; }, invalid,
       "outputs must name at least one known output"},
      {"unknown_output_bit", [](B&, O& o, C&) { o.outputs = kEmbeddings | (1u << 7); }, invalid,
       "known output"},
      {"sequence_logits_from_token_classifier",
       [](B&, O& o, C& c) {
         c.head = HeadKind::kTokenClassification;
         o.outputs = kSequenceLogits;
       },
       precondition,
       "sequence logits need a sequence-classification head; this model is "
       "token-classification"},
      {"sequence_logits_from_encoder",
       [](B&, O& o, C& c) {
         c.head = HeadKind::kEncoderOnly;
         o.outputs = kSequenceLogits | kEmbeddings;
       },
       precondition, "this model is encoder"},
      {"token_logits_from_sequence_classifier", [](B&, O& o, C&) { o.outputs = kTokenLogits; },
       precondition,
       "token logits need a token-classification head; this model is sequence-classification"},
      {"token_logits_from_encoder",
       [](B&, O& o, C& c) {
         c.head = HeadKind::kEncoderOnly;
         o.outputs = kTokenLogits;
       },
       precondition, "token logits need a token-classification head"},
  };
}

class ValidatePackedBatchErrorTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(ValidatePackedBatchErrorTest, Rejects) {
  const InvalidCase& c = GetParam();
  PackedBatch batch = ThreeSequences();
  RunOptions options;
  ModelConfig config = TinyConfig();
  c.mutate(batch, options, config);
  const absl::Status status = ValidatePackedBatch(batch, options, config);
  EXPECT_EQ(status.code(), c.code) << status;
  EXPECT_THAT(status.message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Table, ValidatePackedBatchErrorTest, ::testing::ValuesIn(InvalidCases()),
                         [](const ::testing::TestParamInfo<InvalidCase>& param_info) {
                           return param_info.param.label;
                         });

TEST(ValidateSequenceTest, ChecksOneSequenceOnItsOwn) {
  const ModelConfig config = TinyConfig();
  const std::vector<int32_t> ids = {1, 7, 2};
  EXPECT_TRUE(ValidateSequence(ids, {}, config).ok());
  EXPECT_TRUE(ValidateSequence(ids, std::vector<int32_t>{0, 0, 0}, config).ok());
  EXPECT_THAT(ValidateSequence({}, {}, config).message(), HasSubstr("is empty"));
  EXPECT_THAT(ValidateSequence(ids, std::vector<int32_t>{0, 0}, config).message(),
              HasSubstr("has 3 token ids but 2 token type ids"));
  EXPECT_THAT(ValidateSequence(std::vector<int32_t>{1, 50}, {}, config).message(),
              HasSubstr("has id 50 at token 1, outside the vocabulary [0, 50)"));
  // Outputs are not a sequence's business: a token-classification model takes the same sequence.
  EXPECT_TRUE(ValidateSequence(ids, {}, TinyConfig(HeadKind::kTokenClassification)).ok());
}

TEST(ValidateOutputsTest, ChecksTheOutputsAgainstTheHead) {
  EXPECT_TRUE(ValidateOutputs(kSequenceLogits | kEmbeddings, TinyConfig()).ok());
  EXPECT_EQ(ValidateOutputs(0, TinyConfig()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateOutputs(kTokenLogits, TinyConfig()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ValidateOutputs(kTokenLogits, TinyConfig(HeadKind::kTokenClassification)).ok());
}

TEST(ValidatePackedBatchTest, TypesAreIgnoredWithoutTypeEmbeddings) {
  PackedBatch batch = ThreeSequences();
  batch.token_type_ids = {0, 7, -3, 0, 0, 1, 99, 0, 0};
  EXPECT_TRUE(ValidatePackedBatch(batch, RunOptions{}, TinyConfig()).ok());
  ModelConfig config = TinyConfig();
  config.type_vocab_size = 100;
  EXPECT_EQ(ValidatePackedBatch(batch, RunOptions{}, config).code(),
            absl::StatusCode::kInvalidArgument);  // -3
  batch.token_type_ids[2] = 0;
  EXPECT_TRUE(ValidatePackedBatch(batch, RunOptions{}, config).ok());
}

TEST(ValidatePackedBatchTest, AbsolutePositionLimitIsInclusive) {
  ModelConfig config = TinyConfig();
  config.position_biased_input = true;
  config.max_position_embeddings = 5;
  EXPECT_TRUE(ValidatePackedBatch(ThreeSequences(), RunOptions{}, config).ok());
  // Relative-only models take any length.
  config.position_biased_input = false;
  config.max_position_embeddings = 2;
  EXPECT_TRUE(ValidatePackedBatch(ThreeSequences(), RunOptions{}, config).ok());
}

TEST(ValidatePackedBatchTest, IdsAtTheVocabularyEdges) {
  PackedBatch batch;
  batch.Append({0, 49});
  EXPECT_TRUE(ValidatePackedBatch(batch, RunOptions{}, TinyConfig()).ok());
}

}  // namespace
}  // namespace dflash
