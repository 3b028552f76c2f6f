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
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((code >> 3) & 0x0F);
    let mant = f32::from(code & 0x07);
    if exp == 0x0F && code & 0x07 == 0x07 {
        return f32::NAN;
    }
    let magnitude = if exp == 0 {
        mant * 2f32.powi(-9) // subnormal: m/8 · 2^-6
    } else {
        (8.0 + mant) * 2f32.powi(exp - 10) // (1 + m/8) · 2^(e-7)
    };
    sign * magnitude
}

/// The E4M3 code nearest to `x` (ties to even), saturating at ±448; NaN → 0x7F/0xFF.
pub fn encode(x: f32) -> u8 {
    let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | NAN;
    }
    let a = f64::from(x.abs());
    if a >= f64::from(MAX) {
        return sign | MAX_CODE; // saturate (also ±∞)
    }
    // The codes are monotonic in the magnitude, and within each binade the code grows by
    // one per quantum, carrying into the exponent field at the binade's end. So the code
    // is `(binade start code) + round(a / quantum)`, which also handles the carry from
    // subnormals into the smallest normal and from one binade into the next.
    let code = if a < 2f64.powi(-6) {
        // Subnormals: quantum 2^-9, code = m.
        (a * 2f64.powi(9)).round_ties_even()
    } else {
        let e = a.log2().floor() as i32; // a in [2^e, 2^(e+1)); exact for powers of two
        let e = if 2f64.powi(e) > a { e - 1 } else { e };
        let steps = (a / 2f64.powi(e - 3)).round_ties_even(); // in [8, 16]
        f64::from(e + 7) * 8.0 + (steps - 8.0)
    };
    sign | code as u8 // below 448 the largest code reached is MAX_CODE
}

#[cfg(test)]
mod tests {
    use super::*;

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
