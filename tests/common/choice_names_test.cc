// common/choice_names.h: names of table-spelled enumerations, both ways.
#include "common/choice_names.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

enum class Fruit { kApple, kPear, kPlum };
constexpr std::array<std::pair<absl::string_view, Fruit>, 3> kFruitNames = {{
    {"apple", Fruit::kApple},
    {"pear", Fruit::kPear},
    {"plum", Fruit::kPlum},
}};

TEST(ChoiceNamesTest, NamesAndParsesEveryEntry) {
  for (const auto& [name, fruit] : kFruitNames) {
    EXPECT_EQ(ChoiceName(kFruitNames, fruit), name);
    EXPECT_EQ(*ParseChoice(kFruitNames, name, "fruit"), fruit);
  }
}

TEST(ChoiceNamesTest, AnUnknownNameListsTheAcceptedOnes) {
  const absl::StatusOr<Fruit> fig = ParseChoice(kFruitNames, "fig", "fruit");
  EXPECT_EQ(fig.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fig.status().message(), "unknown fruit 'fig' (expected apple, pear or plum)");
}

TEST(ChoiceNamesTest, AValueOutsideTheTableIsAQuestionMark) {
  EXPECT_EQ(ChoiceName(kFruitNames, static_cast<Fruit>(7)), "?");
}

}  // namespace
}  // namespace dflash
