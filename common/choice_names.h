// Enumerations spelled by a fixed table of (name, value) pairs: the choices of the configuration
// file and of the command lines ("cuda", "bfloat16", "zero_shot").
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dflash {

// The name `value` has in `names`; "?" for a value the table lacks.
template <typename Enum, size_t N>
absl::string_view ChoiceName(const std::array<std::pair<absl::string_view, Enum>, N>& names,
                             Enum value) {
  for (const auto& [name, choice] : names) {
    if (choice == value) return name;
  }
  return "?";
}

// The value named `name`; else INVALID_ARGUMENT "unknown <what> '<name>' (expected a, b or c)".
template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseChoice(const std::array<std::pair<absl::string_view, Enum>, N>& names,
                                 absl::string_view name, absl::string_view what) {
  std::string expected;
  for (size_t i = 0; i < N; ++i) {
    if (names[i].first == name) return names[i].second;
    absl::StrAppend(&expected, i == 0 ? "" : i + 1 == N ? " or " : ", ", names[i].first);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " '", name, "' (expected ", expected, ")"));
}

}  // namespace dflash
