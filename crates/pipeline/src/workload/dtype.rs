//! The element types a workload's arguments may have, and their bytes: little-endian,
//! as the kernel sees them. Floats are drawn in f64 and rounded through f32 (so an input
//! is the same bytes whichever path drew it); FP8 E4M3 is `crate::workload::e4m3`, E5M2 below.

use crate::workload::e4m3;
use half::{bf16, f16};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dtype {
    /// FP8 E4M3 (OCP "E4M3FN"): ±448, no infinities.
    E4m3,
    /// FP8 E5M2: ±57344, with infinities.
    E5m2,
    Fp16,
    Bf16,
    Fp32,
    Int32,
    Int64,
}

impl Dtype {
    pub const ALL: [Dtype; 7] = [
        Dtype::E4m3,
        Dtype::E5m2,
        Dtype::Fp16,
        Dtype::Bf16,
        Dtype::Fp32,
        Dtype::Int32,
        Dtype::Int64,
    ];

    /// The name pipeline.yaml uses.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::E4m3 => "e4m3",
            Dtype::E5m2 => "e5m2",
            Dtype::Fp16 => "fp16",
            Dtype::Bf16 => "bf16",
            Dtype::Fp32 => "fp32",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
        }
    }

    /// Bytes per element (and of the parameter, passed by value).
    pub fn size(self) -> usize {
        match self {
            Dtype::E4m3 | Dtype::E5m2 => 1,
            Dtype::Fp16 | Dtype::Bf16 => 2,
            Dtype::Fp32 | Dtype::Int32 => 4,
            Dtype::Int64 => 8,
        }
    }

    pub fn is_fp8(self) -> bool {
        matches!(self, Dtype::E4m3 | Dtype::E5m2)
    }

    pub fn is_float(self) -> bool {
        !matches!(self, Dtype::Int32 | Dtype::Int64)
    }

    /// The largest finite value (what per-block quantization scales to).
    pub fn max_finite(self) -> f64 {
        match self {
            Dtype::E4m3 => f64::from(e4m3::MAX),
            Dtype::E5m2 => E5M2_MAX,
            Dtype::Fp16 => f16::MAX.to_f64(),
            Dtype::Bf16 => bf16::MAX.to_f64(),
            Dtype::Fp32 => f64::from(f32::MAX),
            Dtype::Int32 => f64::from(i32::MAX),
            Dtype::Int64 => i64::MAX as f64,
        }
    }

    /// Write `x` as one element into `out` (`self.size()` bytes). Floats round to nearest
    /// even (FP8 saturates to its largest finite value, as `__NV_SATFINITE` does); integers
    /// round, saturating.
    pub fn put(self, x: f64, out: &mut [u8]) {
        match self {
            Dtype::E4m3 => out[0] = e4m3::encode(x as f32),
            Dtype::E5m2 => out[0] = e5m2_encode(x as f32),
            Dtype::Fp16 => out.copy_from_slice(&f16::from_f32(x as f32).to_le_bytes()),
            Dtype::Bf16 => out.copy_from_slice(&bf16::from_f32(x as f32).to_le_bytes()),
            Dtype::Fp32 => out.copy_from_slice(&(x as f32).to_le_bytes()),
            Dtype::Int32 => out.copy_from_slice(&(x.round() as i32).to_le_bytes()),
            Dtype::Int64 => out.copy_from_slice(&(x.round() as i64).to_le_bytes()),
        }
    }

    /// The element in `b` (`self.size()` bytes).
    pub fn get(self, b: &[u8]) -> f64 {
        match self {
            Dtype::E4m3 => f64::from(e4m3::decode(b[0])),
            Dtype::E5m2 => f64::from(e5m2_decode(b[0])),
            Dtype::Fp16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
            Dtype::Bf16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            Dtype::Fp32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::Int32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::Int64 => i64::from_le_bytes(b.try_into().expect("8 bytes")) as f64,
        }
    }

    /// `values` as a buffer of this type, encoded in parallel pieces (RMSNorm's mission
    /// input has 8 Mi elements).
    pub fn encode(self, values: &[f64]) -> Vec<u8> {
        let mut out = vec![0u8; values.len() * self.size()];
        out.par_chunks_exact_mut(self.size())
            .with_min_len(1 << 15)
            .zip(values)
            .for_each(|(b, &x)| self.put(x, b));
        out
    }

    /// The elements of `bytes` (a whole number of elements) as f64, decoded in parallel
    /// pieces.
    pub fn decode(self, bytes: &[u8]) -> Vec<f64> {
        bytes
            .par_chunks_exact(self.size())
            .with_min_len(1 << 15)
            .map(|b| self.get(b))
            .collect()
    }

    /// One element of the fill an output gets before the kernel runs: a NaN for floats
    /// (so an unwritten element can never pass), `0x7F..FF` for integers.
    pub fn sentinel(self) -> &'static [u8] {
        match self {
            Dtype::E4m3 | Dtype::E5m2 => &[0x7F],
            Dtype::Fp16 | Dtype::Bf16 => &[0xFF, 0x7F],
            Dtype::Fp32 | Dtype::Int32 => &[0xFF, 0xFF, 0xFF, 0x7F],
            Dtype::Int64 => &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
        }
    }

    /// `n` elements of the sentinel.
    pub fn sentinel_fill(self, n: usize) -> Vec<u8> {
        self.sentinel().repeat(n)
    }

    /// How many elements of `bytes` still hold the sentinel.
    pub fn count_sentinels(self, bytes: &[u8]) -> usize {
        let s = self.sentinel();
        bytes.chunks_exact(s.len()).filter(|e| *e == s).count()
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Largest finite E5M2 magnitude.
const E5M2_MAX: f64 = 57344.0;

/// E5M2 is the top byte of an IEEE fp16: round the fp16 to 2 mantissa bits (nearest, ties
/// to even), saturating finite values at ±57344; NaN stays NaN, ±∞ saturates.
fn e5m2_encode(x: f32) -> u8 {
    if x.is_nan() {
        return if x.is_sign_negative() { 0xFF } else { 0x7F };
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    if f64::from(x.abs()) >= E5M2_MAX {
        return sign | 0x7B; // 57344
    }
    // Round directly from f32 (a detour through fp16 would round twice).
    let a = f64::from(x.abs());
    let code = if a < 2f64.powi(-14) {
        (a * 2f64.powi(16)).round_ties_even() // subnormals: quantum 2^-16
    } else {
        let e = a.log2().floor() as i32;
        let e = if 2f64.powi(e) > a { e - 1 } else { e };
        let steps = (a / 2f64.powi(e - 2)).round_ties_even(); // in [4, 8]
        f64::from(e + 15) * 4.0 + (steps - 4.0)
    };
    sign | code as u8
}

fn e5m2_decode(code: u8) -> f32 {
    f16::from_bits(u16::from(code) << 8).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_e5m2_code_decodes_and_reencodes_to_itself() {
        for code in 0..=255u8 {
            let v = e5m2_decode(code);
            if v.is_nan() {
                assert!(e5m2_decode(e5m2_encode(v)).is_nan(), "code {code:#04x}");
            } else if v.is_infinite() {
                assert_eq!(e5m2_encode(v), (code & 0x80) | 0x7B, "∞ saturates");
            } else {
                assert_eq!(e5m2_encode(v), code, "code {code:#04x} = {v}");
            }
        }
        assert_eq!(e5m2_decode(0x3C), 1.0);
        assert_eq!(e5m2_decode(0x7B), 57344.0);
        assert_eq!(e5m2_decode(0x01), 2f32.powi(-16));
    }

    #[test]
    fn e5m2_rounds_to_nearest_even() {
        // 1.0 (0x3C) and 1.25 (0x3D): 1.125 ties to even (1.0), 1.2 goes up.
        assert_eq!(e5m2_encode(1.125), 0x3C);
        assert_eq!(e5m2_encode(1.2), 0x3D);
        assert_eq!(e5m2_encode(1.375), 0x3E); // tie between 0x3D and 0x3E → even
        assert_eq!(e5m2_encode(-1e9), 0xFB);
        // Subnormal ties: half the smallest subnormal goes to zero.
        assert_eq!(e5m2_encode(2f32.powi(-17)), 0x00);
        assert_eq!(e5m2_encode(1.5 * 2f32.powi(-16)), 0x02);
    }

    #[test]
    fn every_dtype_round_trips_representable_values() {
        let values = [0.0, 1.0, -2.0, 3.0, -448.0];
        for dtype in Dtype::ALL {
            let bytes = dtype.encode(&values);
            assert_eq!(bytes.len(), values.len() * dtype.size(), "{dtype}");
            assert_eq!(dtype.decode(&bytes), values, "{dtype}");
        }
        for dtype in Dtype::ALL.into_iter().filter(|d| d.is_float()) {
            assert_eq!(
                dtype.decode(&dtype.encode(&[0.5, -0.375])),
                [0.5, -0.375],
                "{dtype}"
            );
        }
        assert_eq!(Dtype::E4m3.encode(&[1e6]), [0x7E], "saturates at 448");
        assert_eq!(Dtype::Int32.encode(&[2.6]), 3i32.to_le_bytes());
        assert_eq!(
            Dtype::Fp16.decode(&Dtype::Fp16.encode(&[0.1]))[0],
            0.0999755859375
        );
        assert_eq!(
            Dtype::Bf16.decode(&Dtype::Bf16.encode(&[0.1]))[0],
            0.10009765625
        );
    }

    #[test]
    fn float_sentinels_are_nan_and_are_counted() {
        for dtype in Dtype::ALL.into_iter().filter(|d| d.is_float()) {
            assert!(dtype.decode(dtype.sentinel())[0].is_nan(), "{dtype}");
        }
        let mut out = Dtype::Fp16.sentinel_fill(4);
        out[2..4].copy_from_slice(&f16::ONE.to_le_bytes());
        assert_eq!(Dtype::Fp16.count_sentinels(&out), 3);
        assert_eq!(
            Dtype::Int64.count_sentinels(&Dtype::Int64.sentinel_fill(5)),
            5
        );
    }

    #[test]
    fn names_round_trip_through_yaml() {
        for dtype in Dtype::ALL {
            let parsed: Dtype = serde_yaml::from_str(dtype.name()).unwrap();
            assert_eq!(parsed, dtype);
        }
        let err = serde_yaml::from_str::<Dtype>("float16")
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected one of `e4m3`"), "{err}");
    }
}
