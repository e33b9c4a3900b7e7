// The project's log sink. One place decides where lines go (stderr, through spdlog) so that the
// server can later redirect or structure them without touching callers.
#pragma once

#include <spdlog/spdlog.h>

#include "absl/strings/string_view.h"

// Debian's Abseil keeps its own string_view class (ABSL_OPTION_USE_STD_STRING_VIEW 0); let log
// lines format it like any string.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view text, FormatContext& context) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text.data(), text.size()),
                                                    context);
  }
};

namespace dflash {

// Returns the shared logger; it is created on first use and is safe to use from any thread.
spdlog::logger& Log();

}  // namespace dflash
