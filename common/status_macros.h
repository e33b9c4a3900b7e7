// Early-return helpers for absl::Status and absl::StatusOr, used at every module boundary.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DFLASH_STATUS_CONCAT_INNER(a, b) a##b
#define DFLASH_STATUS_CONCAT(a, b) DFLASH_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define DFLASH_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status dflash_status_ = (expr); !dflash_status_.ok()) { \
      return dflash_status_;                                          \
    }                                                                 \
  } while (false)

// `DFLASH_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an OK StatusOr or returns its status.
#define DFLASH_ASSIGN_OR_RETURN(lhs, rexpr) \
  DFLASH_ASSIGN_OR_RETURN_IMPL(DFLASH_STATUS_CONCAT(dflash_statusor_, __LINE__), lhs, rexpr)

#define DFLASH_ASSIGN_OR_RETURN_IMPL(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) {                                    \
    return std::move(statusor).status();                   \
  }                                                        \
  lhs = *std::move(statusor)
