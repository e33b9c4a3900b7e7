#include "common/flags_help.h"

#include <utility>

#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace dflash {

void ListFlagsOf(std::vector<std::string> sources) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [sources = std::move(sources)](absl::string_view file) {
    for (const std::string& source : sources) {
      if (absl::StrContains(file, source)) return true;
    }
    return false;
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
}

}  // namespace dflash
