//! FP8 E4M3 (the OCP "E4M3FN" format used by Hopper/Ada tensor cores): 1 sign bit, 4
//! exponent bits (bias 7), 3 mantissa bits, subnormals, no infinities, NaN = `S.1111.111`
//! (codes 0x7F and 0xFF), largest finite value ±448.
//!
//! Encoding rounds to nearest, ties to even, and saturates: anything beyond ±448 (and ±∞)
//! becomes ±448, as `__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)` does.

/// Largest finite E4M3 magnitude.
pub const MAX: f32 = 448.0;
/// The canonical NaN code (positive sign).
pub const NAN: u8 = 0x7F;
/// Largest finite positive code (448).
const MAX_CODE: u8 = 0x7E;

/// The value of an E4M3 code.
pub fn decode(code: u8) -> f32 {
    VALUES[usize::from(code)]
}

/// Every code's value, computed once at compile time by [`value_of`].
static VALUES: [f32; 256] = {
    let mut values = [0f32; 256];
    let mut code = 0;
    while code < 256 {
        values[code] = value_of(code as u8);
        code += 1;
    }
    values
};

/// The value of an E4M3 code, built as the f32 it is: (1 + m/8) · 2^(e-7), or for a
/// subnormal (e = 0) m/8 · 2^-6.
const fn value_of(code: u8) -> f32 {
    let sign = ((code & 0x80) as u32) << 24;
    let exp = ((code >> 3) & 0x0F) as u32;
    let mant = (code & 0x07) as u32;
    if exp == 0x0F && mant == 0x07 {
        return f32::NAN;
    }
    let magnitude = if exp == 0 {
        mant as f32 / 512.0
    } else {
        f32::from_bits(((exp + 127 - 7) << 23) | (mant << 20))
    };
    f32::from_bits(sign | magnitude.to_bits())
}

/// The E4M3 code nearest to `x` (ties to even), saturating at ±448; NaN → 0x7F/0xFF.
///
/// The codes are monotonic in the magnitude, and within each binade the code grows by one
/// per quantum, carrying into the exponent field at the binade's end. So a normal result is
/// the f32's exponent, rebiased, followed by its significand rounded to 3 bits: integer
/// work on the bits, with the carry of a rounding that fills the mantissa going into the
/// exponent as it should (and from the largest subnormal into the smallest normal).
pub fn encode(x: f32) -> u8 {
    let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | NAN;
    }
    let a = x.abs();
    if a >= MAX {
        return sign | MAX_CODE; // saturate (also ±∞)
    }
    if a < MIN_NORMAL {
        // Subnormals: quantum 2^-9, code = m (exact: a power-of-two scaling).
        return sign | (a * 512.0).round_ties_even() as u8;
    }
    let bits = a.to_bits();
    // f32: exponent bias 127, 23 mantissa bits; E4M3: bias 7, 3 mantissa bits.
    let dropped = bits & 0x000F_FFFF;
    let mut kept = (bits >> 20) - ((127 - 7) << 3);
    if dropped > 0x8_0000 || (dropped == 0x8_0000 && kept & 1 == 1) {
        kept += 1;
    }
    sign | kept as u8 // below 448 the largest code reached is MAX_CODE
}

/// The smallest normal E4M3 magnitude, 2^-6.
const MIN_NORMAL: f32 = 1.0 / 64.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoding as first written, in f64 with `log2`: the oracle [`encode`] must match.
    fn encode_by_log2(x: f32) -> u8 {
        let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
        if x.is_nan() {
            return sign | NAN;
        }
        let a = f64::from(x.abs());
        if a >= f64::from(MAX) {
            return sign | MAX_CODE;
        }
        let code = if a < 2f64.powi(-6) {
            (a * 2f64.powi(9)).round_ties_even()
        } else {
            let e = a.log2().floor() as i32;
            let e = if 2f64.powi(e) > a { e - 1 } else { e };
            let steps = (a / 2f64.powi(e - 3)).round_ties_even();
            f64::from(e + 7) * 8.0 + (steps - 8.0)
        };
        sign | code as u8
    }

    #[test]
    fn decodes_as_the_powi_formula_did() {
        for code in 0..=255u8 {
            let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
            let (exp, mant) = (i32::from((code >> 3) & 0x0F), f32::from(code & 0x07));
            let v = if exp == 0 {
                mant * 2f32.powi(-9)
            } else {
                (8.0 + mant) * 2f32.powi(exp - 10)
            };
            if code & 0x7F == 0x7F {
                assert!(decode(code).is_nan());
            } else {
                assert_eq!(decode(code).to_bits(), (sign * v).to_bits(), "{code:#04x}");
            }
        }
    }

    #[test]
    fn encodes_as_the_log2_formula_did_at_every_rounding_boundary() {
        // Every f32 exponent from far below the subnormals to beyond 448, every 3-bit kept
        // mantissa, and the dropped bits around the tie (and some others).
        let dropped = [
            0, 1, 0x7_FFFF, 0x8_0000, 0x8_0001, 0xF_FFFF, 0x1_2345, 0xA_BCDE,
        ];
        for exp in 100u32..=140 {
            for kept in 0..8u32 {
                for d in dropped {
                    let bits = (exp << 23) | (kept << 20) | d;
                    for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                        assert_eq!(encode(x), encode_by_log2(x), "{x:e} ({bits:#010x})");
                    }
                }
            }
        }
        // And a sweep of every 4099th bit pattern below 2^10.
        for bits in (0..0x4480_0000u32).step_by(4099) {
            let x = f32::from_bits(bits);
            assert_eq!(encode(x), encode_by_log2(x), "{x:e} ({bits:#010x})");
        }
        for x in [0.0, -0.0, f32::MIN_POSITIVE, 1e-45, f32::INFINITY, f32::NAN] {
            assert_eq!(encode(x), encode_by_log2(x), "{x:e}");
        }
    }

    #[test]
    fn every_code_decodes_and_reencodes_to_itself() {
        for code in 0..=255u8 {
            let v = decode(code);
            if code & 0x7F == 0x7F {
                assert!(v.is_nan(), "code {code:#04x} must be NaN");
                assert_eq!(encode(v) & 0x7F, NAN);
            } else {
                assert!(v.is_finite(), "code {code:#04x} decoded to {v}");
                assert_eq!(encode(v), code, "code {code:#04x} = {v}");
            }
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(decode(0x38), 1.0);
        assert_eq!(decode(0x7E), 448.0);
        assert_eq!(decode(0xFE), -448.0);
        assert_eq!(decode(0x01), 2f32.powi(-9));
        assert_eq!(decode(0x07), 7.0 * 2f32.powi(-9));
        assert_eq!(decode(0x08), 2f32.powi(-6));
        assert_eq!(decode(0x00), 0.0);
        assert!(decode(0x80).is_sign_negative() && decode(0x80) == 0.0);
        assert_eq!(encode(1.0), 0x38);
        assert_eq!(encode(-2.0), 0xC0);
        assert_eq!(encode(0.0), 0x00);
        assert_eq!(encode(-0.0), 0x80);
    }

    #[test]
    fn positive_codes_are_strictly_increasing() {
        for code in 0..0x7Eu8 {
            assert!(decode(code) < decode(code + 1), "{code:#04x}");
        }
    }

    #[test]
    fn midpoints_round_to_even_and_near_midpoints_to_nearest() {
        for code in 0..0x7Eu8 {
            let (lo, hi) = (f64::from(decode(code)), f64::from(decode(code + 1)));
            let mid = ((lo + hi) / 2.0) as f32;
            assert_eq!(f64::from(mid), (lo + hi) / 2.0, "midpoint exact in f32");
            let even = if code % 2 == 0 { code } else { code + 1 };
            assert_eq!(encode(mid), even, "tie between {code:#04x} and next");
            assert_eq!(encode(-mid), 0x80 | even);
            let below = (mid as f64 - (hi - lo) * 1e-3) as f32;
            let above = (mid as f64 + (hi - lo) * 1e-3) as f32;
            assert_eq!(encode(below), code);
            assert_eq!(encode(above), code + 1);
        }
    }

    #[test]
    fn saturates_beyond_448() {
        assert_eq!(encode(448.0), 0x7E);
        assert_eq!(encode(463.99), 0x7E);
        assert_eq!(encode(464.0), 0x7E);
        assert_eq!(encode(1e6), 0x7E);
        assert_eq!(encode(f32::INFINITY), 0x7E);
        assert_eq!(encode(f32::NEG_INFINITY), 0xFE);
        assert_eq!(encode(f32::NAN) & 0x7F, NAN);
    }

    #[test]
    fn tiny_values_flush_to_zero_or_the_smallest_subnormal() {
        let q = 2f32.powi(-9);
        assert_eq!(encode(q * 0.5), 0x00); // tie → even (zero)
        assert_eq!(encode(q * 0.51), 0x01);
        assert_eq!(encode(q * 1.5), 0x02); // tie between 1 and 2 → 2
        assert_eq!(encode(-q * 0.49), 0x80);
    }
}
