// engine/model/half_precision.h: exact float32 <-> binary16 / bfloat16 conversions.
#include "engine/model/half_precision.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool IsBFloat16NaN(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

// The value of a binary16 pattern from its definition, computed independently in double.
double HalfValue(uint16_t h) {
  const int sign = (h & 0x8000u) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -24);
  return sign * std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
}

TEST(HalfPrecisionTest, HalfToFloatMatchesTheDefinitionForAllPatterns) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const float value = HalfToFloat(half);
    if (IsHalfNaN(half)) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << h;
      EXPECT_EQ(std::signbit(value), (h & 0x8000u) != 0) << std::hex << h;
      continue;
    }
    EXPECT_EQ(static_cast<double>(value), HalfValue(half)) << std::hex << h;
    EXPECT_EQ(std::signbit(value), (h & 0x8000u) != 0) << std::hex << h;  // -0 stays -0.
  }
}

TEST(HalfPrecisionTest, RoundTripsAllPatterns) {
  int nan_count = 0;
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const uint16_t back = FloatToHalf(HalfToFloat(half));
    if (IsHalfNaN(half)) {
      ++nan_count;
      EXPECT_TRUE(IsHalfNaN(back)) << std::hex << h << " -> " << back;
      EXPECT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << h;
    } else {
      EXPECT_EQ(back, half) << std::hex << h;
    }
  }
  EXPECT_EQ(nan_count, 2 * 1023);
}

// Between two adjacent finite halves lo < hi (same sign), the midpoint goes to the one with an
// even mantissa, and anything a float ulp away from the midpoint goes to the nearer one.
TEST(HalfPrecisionTest, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t h = 0; h < 0x7bffu; ++h) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const uint16_t lo = static_cast<uint16_t>(h | sign);
      const uint16_t hi = static_cast<uint16_t>((h + 1) | sign);
      const double mid = (HalfValue(lo) + HalfValue(hi)) / 2;
      const float midpoint = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(midpoint), mid) << "midpoint not exact in float";
      const uint16_t even = (h & 1u) ? hi : lo;
      EXPECT_EQ(FloatToHalf(midpoint), even) << std::hex << lo;
      const float toward_lo = std::nextafter(midpoint, static_cast<float>(HalfValue(lo)));
      const float toward_hi = std::nextafter(midpoint, static_cast<float>(HalfValue(hi)));
      EXPECT_EQ(FloatToHalf(toward_lo), lo) << std::hex << lo;
      EXPECT_EQ(FloatToHalf(toward_hi), hi) << std::hex << lo;
    }
  }
}

TEST(HalfPrecisionTest, OverflowsToInfinityFrom65520) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7bffu);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00u);  // The tie rounds to the even "mantissa": infinity.
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xfc00u);
  EXPECT_EQ(FloatToHalf(-65519.0f), 0xfbffu);
  EXPECT_EQ(FloatToHalf(65536.0f), 0x7c00u);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00u);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::max()), 0x7c00u);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00u);
}

TEST(HalfPrecisionTest, NaNInputsStayNaN) {
  for (const uint32_t bits :
       {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xffc00000u, 0xff800001u, 0x7f802000u}) {
    const uint16_t half = FloatToHalf(FromBits(bits));
    EXPECT_TRUE(IsHalfNaN(half)) << std::hex << bits << " -> " << half;
    EXPECT_EQ(half & 0x8000u, (bits >> 16) & 0x8000u) << std::hex << bits;
  }
}

TEST(HalfPrecisionTest, SubnormalsAndUnderflow) {
  const float smallest = std::ldexp(1.0f, -24);  // 0x0001
  EXPECT_EQ(FloatToHalf(smallest), 0x0001u);
  EXPECT_EQ(FloatToHalf(-smallest), 0x8001u);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000u);  // Tie with 0: even is 0.
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -25)), 0x8000u);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000u);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002u);     // 1.5 ulp: tie, even is 2.
  EXPECT_EQ(FloatToHalf(std::ldexp(5.0f, -25)), 0x0002u);     // 2.5 ulp: tie, even is 2.
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03ffu);  // Largest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400u);  // Its tie with 2^-14.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400u);     // Smallest normal.
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000u);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000u);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000u);
  EXPECT_EQ(HalfToFloat(0x0001u), smallest);
  EXPECT_EQ(HalfToFloat(0x03ffu), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8000u), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000u)));
}

TEST(HalfPrecisionTest, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00u);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000u);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66u);
  EXPECT_EQ(FloatToHalf(3.14159265f), 0x4248u);
  EXPECT_EQ(HalfToFloat(0x3555u), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7bffu), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x7c00u), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00u), -std::numeric_limits<float>::infinity());
}

TEST(BFloat16Test, RoundTripsAllPatterns) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const uint16_t bf = static_cast<uint16_t>(b);
    const float value = BFloat16ToFloat(bf);
    EXPECT_EQ(Bits(value), b << 16) << std::hex << b;
    const uint16_t back = FloatToBFloat16(value);
    if (IsBFloat16NaN(bf)) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << b;
      EXPECT_TRUE(IsBFloat16NaN(back)) << std::hex << b << " -> " << back;
      EXPECT_EQ(back & 0x8000u, b & 0x8000u) << std::hex << b;
    } else {
      EXPECT_EQ(back, bf) << std::hex << b;
    }
  }
}

TEST(BFloat16Test, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t b = 0; b < 0x7f7fu; ++b) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const uint32_t lo = b | sign;
      const uint32_t hi = (b + 1) | sign;
      const uint32_t midpoint = (lo << 16) | 0x8000u;  // Exactly halfway between lo and hi.
      const uint32_t even = (b & 1u) ? hi : lo;
      EXPECT_EQ(FloatToBFloat16(FromBits(midpoint)), even) << std::hex << lo;
      EXPECT_EQ(FloatToBFloat16(FromBits(midpoint - 1)), lo) << std::hex << lo;
      EXPECT_EQ(FloatToBFloat16(FromBits(midpoint + 1)), hi) << std::hex << lo;
    }
  }
}

TEST(BFloat16Test, OverflowNaNAndSpecialValues) {
  // Largest finite bfloat16 is 0x7f7f; its tie with the next pattern rounds to infinity.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f7f8000u)), 0x7f80u);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f7f7fffu)), 0x7f7fu);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80u);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0xff80u);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80u);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000u);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80u);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000u)), 0x3f80u);  // Tie, 0x3f80 even.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000u)), 0x3f82u);  // Tie, 0x3f82 even.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00008000u)), 0x0000u);  // Subnormal tie to 0.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00018000u)), 0x0002u);
  for (const uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fffffffu}) {
    const uint16_t bf = FloatToBFloat16(FromBits(bits));
    EXPECT_TRUE(IsBFloat16NaN(bf)) << std::hex << bits << " -> " << bf;
    EXPECT_EQ(bf & 0x8000u, (bits >> 16) & 0x8000u);
  }
}

}  // namespace
}  // namespace dflash
