// The public API (proto/dflash/v1): every RPC's request builds and survives a serialize/parse round
// trip, `optional` fields keep their presence, the service has every RPC with the right streaming
// flags, and the API's own conventions hold (comments everywhere, UNSPECIFIED = 0 enums, shared
// field numbers), checked on the descriptor set protoc writes with source info.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dflash/v1/dflash.grpc.pb.h"
#include "dflash/v1/dflash.pb.h"

namespace {

namespace pb = google::protobuf;
namespace v1 = dflash::v1;

constexpr char kService[] = "dflash.v1.InferenceService";

// Serializes `in`, parses the bytes into a fresh message of the same type and returns it.
template <typename M>
M RoundTrip(const M& in) {
  std::string bytes;
  EXPECT_TRUE(in.SerializeToString(&bytes));
  M out;
  EXPECT_TRUE(out.ParseFromString(bytes));
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(in, out)) << "in:\n"
                                                             << in.DebugString() << "out:\n"
                                                             << out.DebugString();
  return out;
}

TEST(ApiProto, ClassifyRequestRoundTrip) {
  v1::ClassifyRequest req;
  req.set_model("nli-deberta-v3-base");
  req.set_request_id("req-1");
  req.set_priority(v1::PRIORITY_HIGH);
  req.set_truncate(true);
  req.set_truncation_direction(v1::TRUNCATION_DIRECTION_LEFT);
  req.set_truncation_strategy(v1::TRUNCATION_STRATEGY_ONLY_SECOND);
  req.add_inputs()->set_text("A man is playing a guitar.");
  v1::TextInput* pair = req.add_inputs();
  pair->set_text("A man is playing a guitar on stage.");
  pair->set_text_pair("A person is performing music.");
  req.set_score_function(v1::SCORE_FUNCTION_RAW);
  req.set_top_k(2);
  const v1::ClassifyRequest out = RoundTrip(req);
  ASSERT_EQ(out.inputs_size(), 2);
  EXPECT_FALSE(out.inputs(0).has_text_pair());
  EXPECT_TRUE(out.inputs(1).has_text_pair());
  EXPECT_EQ(out.inputs(1).text_pair(), "A person is performing music.");
}

TEST(ApiProto, EmptyTextPairIsStillAPair) {
  v1::TextInput in;
  in.set_text("premise");
  in.set_text_pair("");
  EXPECT_TRUE(RoundTrip(in).has_text_pair());
}

TEST(ApiProto, ZeroShotRequestRoundTrip) {
  v1::ZeroShotRequest req;
  req.set_request_id("zs");
  req.add_texts("The new phone has a great camera.");
  req.add_texts("The match went to extra time.");
  req.add_candidate_labels("technology");
  req.add_candidate_labels("sports");
  req.set_hypothesis_template("This text is about {}.");
  req.set_multi_label(true);
  req.set_top_k(1);
  const v1::ZeroShotRequest out = RoundTrip(req);
  EXPECT_EQ(out.candidate_labels_size(), 2);
  EXPECT_TRUE(out.multi_label());
}

TEST(ApiProto, RerankRequestAndResponseRoundTrip) {
  v1::RerankRequest req;
  req.set_query("how do guitars make sound");
  req.add_documents("Strings vibrate over a resonating body.");
  req.add_documents("The match went to extra time.");
  req.set_top_n(1);
  req.set_return_documents(true);
  req.set_priority(v1::PRIORITY_LOW);
  RoundTrip(req);

  v1::RerankResponse resp;
  resp.mutable_metadata()->set_request_id("r");
  resp.mutable_metadata()->set_tokens(31);
  resp.mutable_metadata()->set_total_us(1234);
  v1::RerankResult* r = resp.add_results();
  r->set_index(0);
  r->set_score(0.97F);
  r->set_document("Strings vibrate over a resonating body.");
  resp.add_results()->set_index(1);
  const v1::RerankResponse out = RoundTrip(resp);
  EXPECT_TRUE(out.results(0).has_document());
  EXPECT_FALSE(out.results(1).has_document());
}

TEST(ApiProto, EmbedRequestAndResponseRoundTrip) {
  v1::EmbedRequest req;
  req.add_inputs("query: guitars");
  req.set_dimensions(128);
  req.set_encoding(v1::EMBEDDING_ENCODING_FLOAT16);
  EXPECT_FALSE(req.has_normalize());  // unset: the server normalizes
  req.set_normalize(false);
  EXPECT_TRUE(RoundTrip(req).has_normalize());

  v1::EmbedResponse resp;
  v1::Embedding* e = resp.add_embeddings();
  e->add_float32_values(0.25F);
  e->add_float32_values(-1.5F);
  e->set_dimensions(2);
  resp.add_embeddings()->set_float16_bytes(std::string("\x00\x3c\x00\xbc", 4));  // 1.0, -1.0
  const v1::EmbedResponse out = RoundTrip(resp);
  EXPECT_EQ(out.embeddings(1).float16_bytes().size(), 4U);
}

TEST(ApiProto, TokenizeAndInfoRoundTrip) {
  v1::TokenizeRequest req;
  req.add_inputs()->set_text("héllo");
  EXPECT_FALSE(req.has_add_special_tokens());
  req.set_add_special_tokens(false);
  EXPECT_TRUE(RoundTrip(req).has_add_special_tokens());

  v1::TokenizeResponse tok;
  v1::Token* t = tok.add_encodings()->add_tokens();
  t->set_id(1);
  t->set_piece("▁héllo");
  t->set_start(0);
  t->set_end(6);  // UTF-8 bytes: "é" is two
  t->set_segment(v1::SEGMENT_TEXT);
  RoundTrip(tok);

  v1::InfoRequest info_req;
  info_req.set_model("demo");
  RoundTrip(info_req);

  v1::InfoResponse info;
  info.set_version("0.1.0");
  v1::ModelInfo* m = info.add_models();
  m->set_id("demo");
  m->add_tasks(v1::TASK_CLASSIFY);
  m->add_tasks(v1::TASK_ZERO_SHOT);
  v1::Label* l = m->add_labels();
  l->set_id(0);
  l->set_name("entailment");
  m->set_entailment_id(0);
  m->set_dtype(v1::DATA_TYPE_FLOAT32);
  m->set_backend(v1::BACKEND_CPU);
  m->mutable_batching()->set_max_queue_delay_us(2000);
  m->mutable_limits()->set_max_inputs(64);
  const v1::InfoResponse out = RoundTrip(info);
  EXPECT_TRUE(out.models(0).has_entailment_id());
  EXPECT_FALSE(out.models(0).has_contradiction_id());
}

TEST(ApiProto, StreamResponsesCarryAResultOrAnError) {
  v1::ClassifyStreamResponse ok;
  ok.mutable_response()->mutable_metadata()->set_request_id("a");
  EXPECT_EQ(RoundTrip(ok).outcome_case(), v1::ClassifyStreamResponse::kResponse);
  v1::EmbedStreamResponse bad;
  bad.mutable_error()->set_code(3);  // INVALID_ARGUMENT
  bad.mutable_error()->set_message("inputs[0]: empty");
  bad.mutable_error()->set_request_id("b");
  EXPECT_EQ(RoundTrip(bad).outcome_case(), v1::EmbedStreamResponse::kError);
  v1::RerankStreamResponse none;
  EXPECT_EQ(none.outcome_case(), v1::RerankStreamResponse::OUTCOME_NOT_SET);
}

// proto3 `optional`: unset and "set to false" differ, on the object and on the wire.
template <typename Req>
void ExpectTruncatePresence() {
  Req req;
  EXPECT_FALSE(req.has_truncate());
  EXPECT_FALSE(req.truncate());
  EXPECT_EQ(req.ByteSizeLong(), 0U);
  EXPECT_FALSE(RoundTrip(req).has_truncate());

  req.set_truncate(false);
  EXPECT_TRUE(req.has_truncate());
  EXPECT_GT(req.ByteSizeLong(), 0U);  // an explicit false is serialized
  const Req out = RoundTrip(req);
  EXPECT_TRUE(out.has_truncate());
  EXPECT_FALSE(out.truncate());

  req.clear_truncate();
  EXPECT_FALSE(req.has_truncate());
}

TEST(ApiProto, TruncateIsOptionalInEveryRequest) {
  ExpectTruncatePresence<v1::ClassifyRequest>();
  ExpectTruncatePresence<v1::ZeroShotRequest>();
  ExpectTruncatePresence<v1::RerankRequest>();
  ExpectTruncatePresence<v1::EmbedRequest>();
  ExpectTruncatePresence<v1::TokenizeRequest>();
  ExpectTruncatePresence<v1::TokenClassifyRequest>();
}

struct Rpc {
  std::string name;
  std::string input;
  std::string output;
  bool client_streaming;
  bool server_streaming;
};

TEST(ApiProto, ServiceListsEveryRpcWithItsStreamingFlags) {
  EXPECT_STREQ(v1::InferenceService::service_full_name(), kService);
  const pb::ServiceDescriptor* service =
      pb::DescriptorPool::generated_pool()->FindServiceByName(kService);
  ASSERT_NE(service, nullptr);
  const std::vector<Rpc> want = {
      {"Classify", "ClassifyRequest", "ClassifyResponse", false, false},
      {"ClassifyStream", "ClassifyRequest", "ClassifyStreamResponse", true, true},
      {"ZeroShot", "ZeroShotRequest", "ZeroShotResponse", false, false},
      {"Rerank", "RerankRequest", "RerankResponse", false, false},
      {"RerankStream", "RerankRequest", "RerankStreamResponse", true, true},
      {"Embed", "EmbedRequest", "EmbedResponse", false, false},
      {"EmbedStream", "EmbedRequest", "EmbedStreamResponse", true, true},
      {"Tokenize", "TokenizeRequest", "TokenizeResponse", false, false},
      {"TokenClassify", "TokenClassifyRequest", "TokenClassifyResponse", false, false},
      {"TokenClassifyStream", "TokenClassifyRequest", "TokenClassifyStreamResponse", true, true},
      {"Info", "InfoRequest", "InfoResponse", false, false},
  };
  ASSERT_EQ(service->method_count(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const pb::MethodDescriptor* m = service->method(static_cast<int>(i));
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(m->name(), want[i].name);
    EXPECT_EQ(m->input_type()->full_name(), "dflash.v1." + want[i].input);
    EXPECT_EQ(m->output_type()->full_name(), "dflash.v1." + want[i].output);
    EXPECT_EQ(m->client_streaming(), want[i].client_streaming);
    EXPECT_EQ(m->server_streaming(), want[i].server_streaming);
  }
}

// Shared request fields keep one name, number and presence in every request message.
TEST(ApiProto, SharedRequestFieldsKeepTheirNumbers) {
  struct Shared {
    std::string name;
    int number;
  };
  const std::vector<Shared> shared = {
      {"model", 1},    {"request_id", 2},           {"priority", 3},
      {"truncate", 4}, {"truncation_direction", 5}, {"truncation_strategy", 6}};
  const pb::FileDescriptor* file = v1::ClassifyRequest::descriptor()->file();
  for (int i = 0; i < file->message_type_count(); ++i) {
    const pb::Descriptor* msg = file->message_type(i);
    if (msg->name().size() < 7 || msg->name().substr(msg->name().size() - 7) != "Request") continue;
    for (const Shared& s : shared) {
      const pb::FieldDescriptor* by_name = msg->FindFieldByName(s.name);
      const pb::FieldDescriptor* by_number = msg->FindFieldByNumber(s.number);
      SCOPED_TRACE(msg->name() + "." + s.name);
      EXPECT_EQ(by_name, by_number);  // both absent, or the same field
      if (s.name == "truncate" && by_name != nullptr) {
        EXPECT_TRUE(by_name->has_optional_keyword());
        EXPECT_TRUE(by_name->has_presence());
      }
    }
  }
  EXPECT_NE(v1::InfoRequest::descriptor()->FindFieldByName("model"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Lint on the descriptor set protoc wrote with --include_source_info.
// ---------------------------------------------------------------------------------------------

class ApiLint : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(DFLASH_PROTO_DESCRIPTOR_SET, std::ios::binary);
    ASSERT_TRUE(in) << DFLASH_PROTO_DESCRIPTOR_SET;
    pb::FileDescriptorSet set;
    ASSERT_TRUE(set.ParseFromIstream(&in));
    pool_ = std::make_unique<pb::DescriptorPool>();
    for (const pb::FileDescriptorProto& f : set.file()) {  // dependencies come first
      const pb::FileDescriptor* built = pool_->BuildFile(f);
      ASSERT_NE(built, nullptr) << f.name();
      if (f.package() == "dflash.v1") files_.push_back(built);
    }
    ASSERT_FALSE(files_.empty());
  }

  template <typename D>
  void ExpectComment(const D* d) {
    pb::SourceLocation loc;
    ASSERT_TRUE(d->GetSourceLocation(&loc)) << d->full_name();
    EXPECT_FALSE(loc.leading_comments.empty() && loc.trailing_comments.empty())
        << d->full_name() << " has no comment";
  }

  void CheckMessage(const pb::Descriptor* msg) {
    ExpectComment(msg);
    for (int i = 0; i < msg->field_count(); ++i) ExpectComment(msg->field(i));
    for (int i = 0; i < msg->real_oneof_decl_count(); ++i) ExpectComment(msg->oneof_decl(i));
    for (int i = 0; i < msg->nested_type_count(); ++i) CheckMessage(msg->nested_type(i));
    for (int i = 0; i < msg->enum_type_count(); ++i) CheckEnum(msg->enum_type(i));
  }

  void CheckEnum(const pb::EnumDescriptor* e) {
    ExpectComment(e);
    // EnumName -> ENUM_NAME_ prefix; the zero value is <PREFIX>UNSPECIFIED.
    std::string prefix;
    for (size_t i = 0; i < e->name().size(); ++i) {
      const char c = e->name()[i];
      if (i > 0 && std::isupper(static_cast<unsigned char>(c))) prefix += '_';
      prefix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    prefix += '_';
    ASSERT_GT(e->value_count(), 0);
    EXPECT_EQ(e->value(0)->number(), 0) << e->full_name();
    EXPECT_EQ(e->value(0)->name(), prefix + "UNSPECIFIED") << e->full_name();
    for (int i = 0; i < e->value_count(); ++i) {
      ExpectComment(e->value(i));
      EXPECT_EQ(e->value(i)->name().rfind(prefix, 0), 0U) << e->value(i)->full_name();
    }
  }

  std::unique_ptr<pb::DescriptorPool> pool_;
  std::vector<const pb::FileDescriptor*> files_;
};

TEST_F(ApiLint, EverythingIsCommentedAndEnumsStartUnspecified) {
  for (const pb::FileDescriptor* f : files_) {
    SCOPED_TRACE(f->name());
    EXPECT_EQ(f->syntax(), pb::FileDescriptor::SYNTAX_PROTO3);
    for (int i = 0; i < f->message_type_count(); ++i) CheckMessage(f->message_type(i));
    for (int i = 0; i < f->enum_type_count(); ++i) CheckEnum(f->enum_type(i));
    for (int i = 0; i < f->service_count(); ++i) {
      ExpectComment(f->service(i));
      for (int j = 0; j < f->service(i)->method_count(); ++j)
        ExpectComment(f->service(i)->method(j));
    }
  }
}

TEST_F(ApiLint, DescriptorSetMatchesTheCompiledIn) {
  const pb::ServiceDescriptor* service = pool_->FindServiceByName(kService);
  ASSERT_NE(service, nullptr);
  pb::FileDescriptorProto from_set;
  pb::FileDescriptorProto compiled;
  service->file()->CopyTo(&from_set);
  v1::ClassifyRequest::descriptor()->file()->CopyTo(&compiled);
  // protoc writes json_name into descriptor sets; the compiled-in descriptor omits it by default.
  service->file()->CopyJsonNameTo(&from_set);
  v1::ClassifyRequest::descriptor()->file()->CopyJsonNameTo(&compiled);
  std::string diff;
  pb::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(from_set, compiled))
      << "the build's generated code and descriptor set come from different .proto files:\n"
      << diff;
}

}  // namespace
