const float32Scratch = new Float32Array(1);
const uint32Scratch = new Uint32Array(float32Scratch.buffer);

/**
 * Converts a number to IEEE 754 binary16 bits (round to nearest, ties to even), as ggml's
 * `GGML_FP32_TO_FP16` does. The value is first rounded to float32.
 */
export function float32ToFloat16Bits(value: number): number {
  float32Scratch[0] = value;
  const bits = uint32Scratch[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7f_ffff;

  if (exponent === 0xff) {
    // Infinity stays infinity; NaN keeps a quiet payload bit.
    return sign | 0x7c00 | (mantissa === 0 ? 0 : 0x200);
  }
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Subnormal half (or zero): shift the mantissa with its implicit bit into place.
    if (halfExponent < -10) return sign;
    const fullMantissa = mantissa | 0x80_0000;
    const shift = 14 - halfExponent;
    const halfMantissa = fullMantissa >>> shift;
    const remainder = fullMantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    const roundUp = remainder > halfway || (remainder === halfway && (halfMantissa & 1) === 1);
    return sign | (halfMantissa + (roundUp ? 1 : 0));
  }
  const halfMantissa = mantissa >>> 13;
  const remainder = mantissa & 0x1fff;
  const roundUp = remainder > 0x1000 || (remainder === 0x1000 && (halfMantissa & 1) === 1);
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  return sign | ((halfExponent << 10) + halfMantissa + (roundUp ? 1 : 0));
}
