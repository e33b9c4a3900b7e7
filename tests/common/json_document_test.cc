// common/json_document.{h,cc}: strict parsing and typed field access.
#include "common/json_document.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string Nested(int depth) {
  return absl::StrCat(std::string(static_cast<size_t>(depth), '['),
                      std::string(static_cast<size_t>(depth), ']'));
}

TEST(ParseJsonDocumentTest, ParsesAValidDocument) {
  absl::StatusOr<nlohmann::json> json =
      ParseJsonDocument(R"({"a": [1, 2.5, "x", null, true], "b": {"c": {}}})", "ok.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["a"][0], 1);
  EXPECT_EQ((*json)["a"][2], "x");
  EXPECT_TRUE((*json)["b"]["c"].is_object());
}

TEST(ParseJsonDocumentTest, SyntaxErrorNamesSourceLineAndColumn) {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": ]\n}";
  absl::StatusOr<nlohmann::json> json = ParseJsonDocument(text, "/models/m/config.json");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("/models/m/config.json:3:8: invalid JSON"));
  // Only the human part of nlohmann's message is kept.
  EXPECT_THAT(json.status().message(), Not(HasSubstr("[json.exception")));
}

TEST(ParseJsonDocumentTest, ErrorPositionOnTheFirstLine) {
  absl::StatusOr<nlohmann::json> json = ParseJsonDocument("{\"a\" 1}", "x.json");
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(json.status().message(), HasSubstr("x.json:1:6: invalid JSON"));
}

TEST(ParseJsonDocumentTest, EmptyAndTruncatedInputsAreErrors) {
  for (const char* text : {"", "   ", "{", "{\"a\":", "[1,", "\"abc", "{} x", "{\"a\":1,}",
                           "// comment\n{}", "{'a': 1}", "NaN", "\"\xff\""}) {
    absl::StatusOr<nlohmann::json> json = ParseJsonDocument(text, "t.json");
    ASSERT_FALSE(json.ok()) << text;
    EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(json.status().message(), HasSubstr("t.json:")) << text;
    EXPECT_THAT(json.status().message(), HasSubstr("invalid JSON")) << text;
  }
}

TEST(ParseJsonDocumentTest, DuplicateKeysAreRejectedAtAnyDepth) {
  for (const char* text : {
           R"({"a": 1, "a": 2})",
           R"({"a": {"b": 1, "c": 2, "b": 3}})",
           R"({"x": [0, {"k": 1, "k": 1}]})",
           R"([[{"deep": {"deeper": {"z": 1, "z": null}}}]])",
       }) {
    absl::StatusOr<nlohmann::json> json = ParseJsonDocument(text, "dup.json");
    ASSERT_FALSE(json.ok()) << text;
    EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(json.status().message(), HasSubstr("dup.json: invalid JSON: duplicate key"));
  }
  absl::StatusOr<nlohmann::json> json = ParseJsonDocument(R"({"a": {"b": 1, "b": 2}})", "d");
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(json.status().message(), HasSubstr("duplicate key \"b\""));
}

TEST(ParseJsonDocumentTest, SameKeyInSiblingObjectsIsFine) {
  for (const char* text : {
           R"({"a": {"x": 1}, "b": {"x": 2}})",
           R"([{"x": 1}, {"x": 1}])",
           R"({"x": {"x": {"x": 1}}})",
           R"({"a": [{"k": 1}], "k": 2})",
       }) {
    absl::StatusOr<nlohmann::json> json = ParseJsonDocument(text, "s.json");
    EXPECT_TRUE(json.ok()) << text << ": " << json.status();
  }
}

TEST(ParseJsonDocumentTest, MaxDepth) {
  EXPECT_TRUE(ParseJsonDocument(Nested(32), "deep.json").ok());
  absl::StatusOr<nlohmann::json> json = ParseJsonDocument(Nested(33), "deep.json");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(),
              HasSubstr("deep.json: invalid JSON: nesting deeper than 32 levels"));

  EXPECT_TRUE(ParseJsonDocument(R"({"a": {"b": [1]}})", "d", 3).ok());
  json = ParseJsonDocument(R"({"a": {"b": [[1]]}})", "d", 3);
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(json.status().message(), HasSubstr("nesting deeper than 3 levels"));
  // Pathological nesting fails cleanly instead of exhausting the stack.
  json = ParseJsonDocument(Nested(100000), "bomb.json");
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(json.status().message(), HasSubstr("bomb.json"));
}

class JsonFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<nlohmann::json> parsed = ParseJsonDocument(R"({
      "int": 42, "negative": -7, "huge": 18446744073709551615, "float": 2.5,
      "string": "text", "true": true, "null": null, "object": {"a": 1},
      "list": ["a", " b ", "c"], "mixed": ["a", 1], "piped": "p2c|c2p", "spaced": " A | b ||",
      "int_string": "768", "bool_string": "true", "zero": 0
    })",
                                                              "cfg.json");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    root_ = *std::move(parsed);
  }

  nlohmann::json root_;
};

TEST_F(JsonFieldsTest, MissingAndNullGiveTheFallback) {
  const JsonFields fields(root_, "cfg.json");
  EXPECT_FALSE(fields.Has("absent"));
  EXPECT_FALSE(fields.Has("null"));
  EXPECT_TRUE(fields.Has("zero"));
  EXPECT_EQ(*fields.Int("absent", 5), 5);
  EXPECT_EQ(*fields.Int("null", -1), -1);
  EXPECT_EQ(*fields.Number("null", 0.5), 0.5);
  EXPECT_EQ(*fields.Bool("null", true), true);
  EXPECT_EQ(*fields.Bool("absent", false), false);
  EXPECT_EQ(*fields.String("null", "fallback"), "fallback");
  EXPECT_THAT(*fields.StringList("null", '|'), IsEmpty());
  EXPECT_THAT(*fields.StringList("absent", '|'), IsEmpty());
}

TEST_F(JsonFieldsTest, TypedValues) {
  const JsonFields fields(root_, "cfg.json");
  EXPECT_EQ(*fields.Int("int", 0), 42);
  EXPECT_EQ(*fields.Int("negative", 0), -7);
  EXPECT_EQ(*fields.Int("zero", 9), 0);
  EXPECT_EQ(*fields.Number("float", 0), 2.5);
  EXPECT_EQ(*fields.Number("int", 0), 42.0);
  EXPECT_EQ(*fields.Bool("true", false), true);
  EXPECT_EQ(*fields.String("string", ""), "text");
}

TEST_F(JsonFieldsTest, WrongTypesNameSourceAndKey) {
  const JsonFields fields(root_, "/models/m/config.json");
  struct Case {
    absl::Status status;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {fields.Int("float", 0).status(), "field 'float' must be an integer, got 2.5"},
      {fields.Int("int_string", 0).status(), "field 'int_string' must be an integer, got \"768\""},
      {fields.Int("true", 0).status(), "field 'true' must be an integer, got true"},
      {fields.Number("string", 0).status(), "field 'string' must be a number, got \"text\""},
      {fields.Bool("bool_string", false).status(),
       "field 'bool_string' must be true or false, got \"true\""},
      {fields.Bool("int", false).status(), "field 'int' must be true or false, got 42"},
      {fields.String("int", "").status(), "field 'int' must be a string, got 42"},
      {fields.String("object", "").status(), "field 'object' must be a string, got {\"a\":1}"},
      {fields.StringList("mixed", '|').status(), "field 'mixed' must list strings, got 1"},
      {fields.StringList("int", '|').status(),
       "field 'int' must be a list of strings or a '|'-separated string, got 42"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(c.status.message(), HasSubstr("/models/m/config.json: "));
    EXPECT_THAT(c.status.message(), HasSubstr(c.expected));
  }
}

// Regression: JsonFields::Int once tested is_number_integer() (also true for unsigned values)
// first, so an unsigned value of 2^63 or more wrapped to a negative int64 (18446744073709551615
// read as -1) instead of being an error.
TEST_F(JsonFieldsTest, UnsignedAboveInt64MaxIsAnError) {
  const JsonFields fields(root_, "/models/m/config.json");
  const absl::StatusOr<int64_t> value = fields.Int("huge", 0);
  ASSERT_FALSE(value.ok()) << "read as " << *value;
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(),
              HasSubstr("/models/m/config.json: field 'huge' must be an integer"));
}

TEST_F(JsonFieldsTest, StringListAcceptsBothForms) {
  const JsonFields fields(root_, "cfg.json");
  EXPECT_THAT(*fields.StringList("piped", '|'), ElementsAre("p2c", "c2p"));
  EXPECT_THAT(*fields.StringList("list", '|'), ElementsAre("a", "b", "c"));
  EXPECT_THAT(*fields.StringList("spaced", '|'), ElementsAre("A", "b"));
  EXPECT_THAT(*fields.StringList("string", '|'), ElementsAre("text"));
  EXPECT_THAT(*fields.StringList("piped", ','), ElementsAre("p2c|c2p"));
}

TEST(JsonFieldsNonObjectTest, NonObjectGivesFallbacks) {
  const nlohmann::json array = nlohmann::json::array({1, 2});
  const JsonFields fields(array, "a.json");
  EXPECT_FALSE(fields.Has("0"));
  EXPECT_EQ(*fields.Int("0", 3), 3);
}

TEST(JsonFieldsErrorTest, FieldErrorFormat) {
  const nlohmann::json object = nlohmann::json::object();
  const absl::Status status = JsonFields(object, "src.json").FieldError("k", "is bad");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "src.json: field 'k' is bad");
}

TEST(JsonExcerptTest, ShortAndLongValues) {
  EXPECT_EQ(JsonExcerpt(nlohmann::json("abc")), "\"abc\"");
  EXPECT_EQ(JsonExcerpt(nlohmann::json(12)), "12");
  const std::string long_text = JsonExcerpt(nlohmann::json(std::string(500, 'x')));
  EXPECT_EQ(long_text.size(), 60u);
  EXPECT_EQ(long_text.substr(57), "...");
  EXPECT_EQ(JsonExcerpt(nlohmann::json("\xc3\xa9")), "\"\\u00e9\"");  // ASCII only.
}

}  // namespace
}  // namespace dflash
