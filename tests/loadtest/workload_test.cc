#include "loadtest/workload.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "loadtest/corpus.h"
#include "loadtest/request_generator.h"

namespace dflash::loadtest {
namespace {

namespace v1 = ::dflash::v1;

std::vector<std::string> Words(const std::string& text) {
  return absl::StrSplit(text, ' ', absl::SkipEmpty());
}

// A corpus "w0 w1 ... w999" in which every window shows where it was cut.
std::shared_ptr<const Corpus> NumberedCorpus() {
  std::string text;
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&text, "w", i, i % 17 == 16 ? "\n" : " ");
  return std::make_shared<const Corpus>(*Corpus::FromText(text, "numbered"));
}

// True when the words of `text` are consecutive corpus words (wrapping after w999).
bool IsWindow(const std::string& text) {
  const std::vector<std::string> words = Words(text);
  for (size_t i = 1; i < words.size(); ++i) {
    int previous = 0;
    int current = 0;
    if (!absl::SimpleAtoi(words[i - 1].substr(1), &previous) ||
        !absl::SimpleAtoi(words[i].substr(1), &current) || current != (previous + 1) % 1000) {
      return false;
    }
  }
  return true;
}

Workload Parse(const std::string& json) {
  auto workload = ParseWorkload(json, "test.json");
  EXPECT_TRUE(workload.ok()) << workload.status();
  return workload.ok() ? *workload : Workload();
}

void ExpectError(const std::string& json, const std::string& fragment) {
  auto workload = ParseWorkload(json, "test.json");
  ASSERT_FALSE(workload.ok()) << json;
  EXPECT_EQ(workload.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(workload.status().message().find(fragment), std::string::npos)
      << "'" << workload.status().message() << "' lacks '" << fragment << "'";
  EXPECT_NE(workload.status().message().find("test.json"), std::string::npos);
}

TEST(WorkloadTest, ShippedWorkloadsParse) {
  for (const char* name : {"classify_64", "classify_64x32", "mnli_mix", "rerank_mix"}) {
    const std::string path = absl::StrCat(DFLASH_SOURCE_DIR, "/loadtest/workloads/", name, ".json");
    auto workload = LoadWorkloadFile(path);
    ASSERT_TRUE(workload.ok()) << workload.status();
    EXPECT_FALSE(workload->description.empty()) << name;
  }
  auto rerank =
      LoadWorkloadFile(absl::StrCat(DFLASH_SOURCE_DIR, "/loadtest/workloads/rerank_mix.json"));
  ASSERT_TRUE(rerank.ok());
  EXPECT_EQ(rerank->rpc, RpcKind::kRerank);
  EXPECT_EQ(rerank->mix.size(), 2u);
}

TEST(WorkloadTest, ParsesEveryField) {
  const Workload workload = Parse(R"({
    "description": "d", "rpc": "zeroshot", "model": "nli", "priority": "high", "truncate": false,
    "tokens_per_word": 1.5, "inputs_per_call": {"uniform": [2, 4]},
    "mix": [{"weight": 2.5, "text_words": {"lognormal": {"median": 19, "sigma": 0.5, "min": 3, "max": 200}}}],
    "candidate_labels": ["sports", "politics"], "hypothesis_template": "About {}.", "multi_label": true
  })");
  EXPECT_EQ(workload.rpc, RpcKind::kZeroShot);
  EXPECT_EQ(workload.model, "nli");
  EXPECT_EQ(workload.priority, v1::PRIORITY_HIGH);
  ASSERT_TRUE(workload.truncate.has_value());
  EXPECT_FALSE(*workload.truncate);
  EXPECT_DOUBLE_EQ(workload.tokens_per_word, 1.5);
  EXPECT_EQ(workload.inputs_per_call.kind, CountDistribution::Kind::kUniform);
  EXPECT_EQ(workload.inputs_per_call.min, 2);
  EXPECT_EQ(workload.inputs_per_call.max, 4);
  ASSERT_EQ(workload.mix.size(), 1u);
  EXPECT_DOUBLE_EQ(workload.mix[0].weight, 2.5);
  EXPECT_EQ(workload.mix[0].first.count.kind, CountDistribution::Kind::kLogNormal);
  EXPECT_FALSE(workload.mix[0].second.has_value());
  EXPECT_EQ(workload.candidate_labels, (std::vector<std::string>{"sports", "politics"}));
  EXPECT_EQ(workload.hypothesis_template, "About {}.");
  EXPECT_TRUE(workload.multi_label);
}

TEST(WorkloadTest, RejectsBadWorkloads) {
  ExpectError("{", "invalid JSON");
  ExpectError("[]", "must be a JSON object");
  ExpectError(R"({"mix": [{"text_words": 5}]})", "rpc is required");
  ExpectError(R"({"rpc": "predict", "mix": [{"text_words": 5}]})", "unknown rpc 'predict'");
  ExpectError(R"({"rpc": 3, "mix": [{"text_words": 5}]})", "rpc must be a string");
  ExpectError(R"({"rpc": "classify"})", "mix is required");
  ExpectError(R"({"rpc": "classify", "mix": []})", "mix must be a non-empty list");
  ExpectError(R"({"rpc": "classify", "mix": [{"weight": -1, "text_words": 5}]})",
              "mix[0].weight must be positive");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": 5}, {"weight": 0, "text_words": 5}]})",
              "mix[1].weight must be positive");
  ExpectError(R"({"rpc": "classify", "mix": [{"weight": "heavy", "text_words": 5}]})",
              "mix[0].weight must be a number");
  ExpectError(R"({"rpc": "classify", "mix": [{"weight": 1}]})", "needs text_words or text_tokens");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": 5, "text_tokens": 5}]})",
              "sets both text_words and text_tokens");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_word": 5}]})",
              "mix[0].text_word is not a known field");
  ExpectError(R"({"rpc": "classify", "colour": "red", "mix": [{"text_words": 5}]})",
              "colour is not a known field");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": -5}]})", "must be in [0, 100000]");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": 2.5}]})", "must be an integer");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": {"uniform": [9, 3]}}]})",
              "mix[0].text_words.uniform must have LO <= HI");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": {"uniform": [9]}}]})",
              "must be [LO, HI]");
  ExpectError(R"({"rpc": "classify", "mix": [{"text_words": {"poisson": 3}}]})",
              "poisson is not a known field");
  ExpectError(
      R"({"rpc": "classify", "mix": [{"text_words": {"lognormal": {"median": 5, "min": 1, "max": 9}}}]})",
      "lognormal.sigma is required");
  ExpectError(
      R"({"rpc": "classify", "mix": [{"text_words": {"lognormal": {"median": 0, "sigma": 1, "min": 1, "max": 9}}}]})",
      "median must be positive");
  ExpectError(R"({"rpc": "classify", "inputs_per_call": 0, "mix": [{"text_words": 5}]})",
              "inputs_per_call must be in [1, 100000]");
  ExpectError(R"({"rpc": "classify", "priority": "urgent", "mix": [{"text_words": 5}]})",
              "'urgent' is not a priority");
  ExpectError(R"({"rpc": "classify", "truncate": "yes", "mix": [{"text_words": 5}]})",
              "truncate must be true or false");
  ExpectError(R"({"rpc": "tokenize", "priority": "high", "mix": [{"text_words": 5}]})",
              "priority is not a tokenize option");
  ExpectError(R"({"rpc": "embed", "mix": [{"text_words": 5, "pair_words": 5}]})",
              "embed takes single texts");
  ExpectError(R"({"rpc": "rerank", "mix": [{"query_words": 5}]})",
              "needs document_words or document_tokens");
  ExpectError(R"({"rpc": "rerank", "mix": [{"text_words": 5, "document_words": 5}]})",
              "text_words is not a known field");
  ExpectError(R"({"rpc": "zeroshot", "mix": [{"text_words": 5}]})",
              "candidate_labels is required for zeroshot");
  ExpectError(R"({"rpc": "zeroshot", "candidate_labels": [1], "mix": [{"text_words": 5}]})",
              "candidate_labels[0] must be a string");
  ExpectError(R"({"rpc": "classify", "candidate_labels": ["a"], "mix": [{"text_words": 5}]})",
              "candidate_labels is only for rpc zeroshot");
  ExpectError(R"({"rpc": "classify", "tokens_per_word": 0, "mix": [{"text_words": 5}]})",
              "tokens_per_word must be positive");
}

TEST(RequestGeneratorTest, KserveProtocolSendsTheSameTextsAsRawBytesTensors) {
  const Workload workload = Parse(R"({"rpc": "classify", "model": "demo", "inputs_per_call": 3,
      "mix": [{"text_words": 4, "pair_words": 2}]})");
  const RequestGenerator dflash(workload, NumberedCorpus(), 7);
  const RequestGenerator kserve(workload, NumberedCorpus(), 7, WireProtocol::kKserve);
  for (uint64_t i = 0; i < 20; ++i) {
    const auto classify = std::get<v1::ClassifyRequest>(dflash.Generate(i));
    const auto infer = std::get<inference::ModelInferRequest>(kserve.Generate(i));
    EXPECT_EQ(infer.model_name(), "demo");
    EXPECT_EQ(infer.id(), classify.request_id());
    ASSERT_EQ(infer.inputs_size(), 2);
    ASSERT_EQ(infer.raw_input_contents_size(), 2);
    EXPECT_EQ(infer.inputs(0).name(), "text");
    EXPECT_EQ(infer.inputs(1).name(), "text_pair");
    std::string texts;
    std::string pairs;
    for (const v1::TextInput& input : classify.inputs()) {
      for (const auto& [element, raw] :
           {std::pair{&input.text(), &texts}, std::pair{&input.text_pair(), &pairs}}) {
        const auto length = static_cast<uint32_t>(element->size());
        raw->append({static_cast<char>(length & 0xff), static_cast<char>((length >> 8) & 0xff),
                     static_cast<char>((length >> 16) & 0xff), static_cast<char>(length >> 24)});
        raw->append(*element);
      }
    }
    EXPECT_EQ(infer.raw_input_contents(0), texts);
    EXPECT_EQ(infer.raw_input_contents(1), pairs);
    EXPECT_EQ(infer.inputs(0).shape(0), 3);
    EXPECT_EQ(SequencesOf(infer), 3);
  }
}

TEST(RequestGeneratorTest, TextsFollowTheWeightedMix) {
  const Workload workload = Parse(R"({"rpc": "classify", "inputs_per_call": 4, "mix": [
      {"weight": 3, "text_words": 5}, {"weight": 1, "text_words": 50, "pair_words": 7}]})");
  const RequestGenerator generator(workload, NumberedCorpus(), 1);
  std::map<size_t, int> by_length;
  int pairs = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const auto request = std::get<v1::ClassifyRequest>(generator.Generate(i));
    ASSERT_EQ(request.inputs_size(), 4);
    EXPECT_EQ(request.request_id(), absl::StrCat("loadtest-", i));
    for (const v1::TextInput& input : request.inputs()) {
      const size_t words = Words(input.text()).size();
      ++by_length[words];
      EXPECT_TRUE(IsWindow(input.text())) << input.text();
      // The pair belongs to the 50-word entry only.
      EXPECT_EQ(input.has_text_pair(), words == 50);
      if (input.has_text_pair()) {
        ++pairs;
        EXPECT_EQ(Words(input.text_pair()).size(), 7u);
      }
    }
  }
  ASSERT_EQ(by_length.size(), 2u);
  const double short_share = by_length[5] / 8000.0;
  EXPECT_NEAR(short_share, 0.75, 0.03);
  EXPECT_EQ(pairs, by_length[50]);
}

TEST(RequestGeneratorTest, DistributionsAndTokenLengths) {
  const Workload workload = Parse(R"({"rpc": "embed", "tokens_per_word": 1.3, "inputs_per_call": 3,
      "priority": "low", "truncate": true, "model": "m",
      "mix": [{"weight": 1, "text_tokens": 62}, {"weight": 1, "text_words": {"uniform": [3, 12]}},
              {"weight": 1, "text_words": {"lognormal": {"median": 19, "sigma": 0.55, "min": 3, "max": 200}}}]})");
  const RequestGenerator generator(workload, NumberedCorpus(), 5);
  std::set<size_t> uniform_lengths;
  std::vector<size_t> lognormal_lengths;
  for (uint64_t i = 0; i < 3000; ++i) {
    const auto request = std::get<v1::EmbedRequest>(generator.Generate(i));
    EXPECT_EQ(request.model(), "m");
    EXPECT_EQ(request.priority(), v1::PRIORITY_LOW);
    ASSERT_TRUE(request.has_truncate());
    EXPECT_TRUE(request.truncate());
    for (const std::string& text : request.inputs()) {
      const size_t words = Words(text).size();
      ASSERT_GE(words, 3u);
      ASSERT_LE(words, 200u);
      if (words == 48) continue;  // 62 tokens / 1.3 tokens per word (also a lognormal value).
      if (words <= 12) uniform_lengths.insert(words);
      if (words > 12) lognormal_lengths.push_back(words);
    }
  }
  EXPECT_EQ(uniform_lengths.size(), 10u);  // Every length in [3, 12] occurs.
  std::sort(lognormal_lengths.begin(), lognormal_lengths.end());
  // Above 12 words (most of the mass: P(X > 12) is about 0.8), the median sits a little above 19.
  const size_t median = lognormal_lengths[lognormal_lengths.size() / 2];
  EXPECT_GE(median, 19u);
  EXPECT_LE(median, 26u);
  EXPECT_GT(lognormal_lengths.back(), 60u);  // The long tail is there.
}

TEST(RequestGeneratorTest, TokenLengthsBecomeWords) {
  const Workload workload =
      Parse(R"({"rpc": "tokenize", "mix": [{"text_tokens": 62, "pair_tokens": 13}]})");
  const RequestGenerator generator(workload, NumberedCorpus(), 5);
  const auto request = std::get<v1::TokenizeRequest>(generator.Generate(0));
  ASSERT_EQ(request.inputs_size(), 1);
  EXPECT_EQ(Words(request.inputs(0).text()).size(), 48u);       // round(62 / 1.3)
  EXPECT_EQ(Words(request.inputs(0).text_pair()).size(), 10u);  // round(13 / 1.3)
}

TEST(RequestGeneratorTest, RerankQueryAndDocumentsShareTheirEntry) {
  const Workload workload = Parse(R"({"rpc": "rerank", "inputs_per_call": {"uniform": [2, 6]},
      "mix": [{"query_words": 2, "document_words": 10}, {"query_words": 3, "document_tokens": 26}]})");
  const RequestGenerator generator(workload, NumberedCorpus(), 11);
  std::set<int> document_counts;
  int short_queries = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    const auto request = std::get<v1::RerankRequest>(generator.Generate(i));
    document_counts.insert(request.documents_size());
    const size_t query_words = Words(request.query()).size();
    ASSERT_TRUE(query_words == 2 || query_words == 3);
    short_queries += query_words == 2;
    for (const std::string& document : request.documents()) {
      EXPECT_EQ(Words(document).size(), query_words == 2 ? 10u : 20u);
    }
  }
  EXPECT_EQ(document_counts, (std::set<int>{2, 3, 4, 5, 6}));
  EXPECT_NEAR(short_queries / 500.0, 0.5, 0.1);
}

TEST(RequestGeneratorTest, ZeroShotCarriesLabels) {
  const Workload workload = Parse(R"({"rpc": "zeroshot", "inputs_per_call": 2,
      "candidate_labels": ["a", "b", "c"], "hypothesis_template": "It is {}.", "multi_label": true,
      "mix": [{"text_words": 4}]})");
  const RequestGenerator generator(workload, NumberedCorpus(), 1);
  const auto request = std::get<v1::ZeroShotRequest>(generator.Generate(3));
  EXPECT_EQ(request.texts_size(), 2);
  EXPECT_EQ(request.candidate_labels_size(), 3);
  EXPECT_EQ(request.hypothesis_template(), "It is {}.");
  EXPECT_TRUE(request.multi_label());
  EXPECT_EQ(SequencesOf(RpcRequest(request)), 6);
}

TEST(RequestGeneratorTest, ReproducibleBySeedAndIndex) {
  const Workload workload = Parse(R"({"rpc": "classify", "inputs_per_call": {"uniform": [1, 3]},
      "mix": [{"text_words": {"uniform": [1, 30]}, "pair_words": {"uniform": [1, 9]}}]})");
  const auto corpus = NumberedCorpus();
  const RequestGenerator a(workload, corpus, 7);
  const RequestGenerator b(workload, corpus, 7);
  const RequestGenerator c(workload, corpus, 8);
  int differ = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    const std::string from_a = std::get<v1::ClassifyRequest>(a.Generate(i)).SerializeAsString();
    EXPECT_EQ(from_a, std::get<v1::ClassifyRequest>(b.Generate(i)).SerializeAsString());
    differ += from_a != std::get<v1::ClassifyRequest>(c.Generate(i)).SerializeAsString();
  }
  EXPECT_GT(differ, 40);
  // The same index gives the same request whatever was generated before.
  EXPECT_EQ(std::get<v1::ClassifyRequest>(a.Generate(3)).SerializeAsString(),
            std::get<v1::ClassifyRequest>(b.Generate(3)).SerializeAsString());
}

TEST(CorpusTest, WindowsWrapAndEmptyCorpusIsRejected) {
  auto corpus = Corpus::FromText("a b\tc\n\nd  ", "t");
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ(corpus->word_count(), 4u);
  EXPECT_EQ(corpus->Window(2, 4), "c d a b");
  EXPECT_EQ(corpus->Window(0, 0), "");
  EXPECT_EQ(Corpus::FromText(" \n\t", "empty").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Corpus::Load("/nonexistent/corpus.txt").status().code(), absl::StatusCode::kNotFound);
  auto repository = Corpus::Load(DefaultCorpusPath());
  ASSERT_TRUE(repository.ok()) << repository.status();
  EXPECT_GT(repository->word_count(), 50000u);
}

}  // namespace
}  // namespace dflash::loadtest
