// float32 values (scores, embeddings) as JSON numbers with the fewest digits that read back as
// the same float32: "0.1", not the 17 digits of the double nearest to 0.1f.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace dflash::http {

// The double whose shortest decimal form is `value`'s shortest float32 form (nlohmann::json
// writes a double in its shortest form). Non-finite values have no JSON form: 0.
inline double JsonFloat(float value) {
  if (!std::isfinite(value)) return 0.0;
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof(text) - 1, value);
  if (error != std::errc()) return static_cast<double>(value);
  *end = '\0';
  return std::strtod(text, nullptr);
}

}  // namespace dflash::http
