// Host conversions between float and the two 16-bit storage types (IEEE half, bfloat16).
// Round-to-nearest-even, NaN and infinity preserved; used by the CPU path and host tests.
#pragma once

#include <cstdint>
#include <cstring>

namespace dualkv::detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);
  // Subnormal half: value = mantissa * 2^-24, exact in float.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf
  if (magnitude < 0x38800000u) {                        // subnormal or zero
    // Scale so that the half subnormal unit (2^-24) becomes 1, then round to nearest even.
    const float scaled = bits_float(magnitude) * 16777216.0f;
    auto units = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(units);
    if (rest > 0.5f || (rest == 0.5f && (units & 1u))) ++units;
    return sign | static_cast<uint16_t>(units);
  }
  uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  rounded -= 112u << 23;
  return sign | static_cast<uint16_t>(rounded >> 13);
}

}  // namespace dualkv::detail
