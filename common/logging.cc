#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace dflash {

spdlog::logger& Log() {
  static spdlog::logger* const logger = [] {
    auto created = spdlog::stderr_color_mt("dflash");
    created->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
    return created.get();
  }();
  return *logger;
}

}  // namespace dflash
