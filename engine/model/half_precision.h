// Bit-exact conversions between float32 and the 16-bit formats that checkpoints store
// (IEEE binary16 "F16" and bfloat16 "BF16"). Narrowing rounds to nearest, ties to even.
#pragma once

#include <bit>
#include <cstdint>

namespace dflash {

// binary16 -> float32, exact for every input including subnormals, infinities and NaN.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // Inf or NaN.
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // Normal.
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // Signed zero.
    bits = sign;
  } else {  // Subnormal: renormalise.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

// bfloat16 -> float32 (the upper half of a float32).
inline float BFloat16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// float32 -> bfloat16, round to nearest even; NaN stays a quiet NaN.
inline uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// float32 -> binary16, round to nearest even, overflow to infinity, gradual underflow.
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN.
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // Rounds to >= 65520: infinity.
  if (abs < 0x38800000u) {                        // Below the smallest normal half (2^-14).
    if (abs < 0x33000000u) return sign;           // Below half the smallest subnormal: zero.
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // |f| = M * 2^(exponent - 150) = (M >> shift) * 2^-24.
    uint32_t value = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (value & 1u))) ++value;
    return sign | static_cast<uint16_t>(value);
  }
  const uint32_t rebased = abs - (112u << 23);  // Exponent bias 127 -> 15.
  const uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>((rebased + rounding) >> 13);
}

}  // namespace dflash
