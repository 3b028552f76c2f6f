//! The synthetic landscapes: a bowl, a model of tile sizes, and the real kernel's spaces.

use super::*;
use repro::schema::TrialStatus;

/// A deterministic pseudo-random number in [0, 1) from a configuration (ruggedness
/// without noise: the same configuration always gets the same bump).
fn hash01(c: &Config) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in c {
        for b in k.bytes().chain(v.to_le_bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn get(c: &Config, k: &str) -> f64 {
    c[k] as f64
}

/// A smooth bowl with interactions, a ruggedness term, a conditional parameter and an
/// invalid region that "fails to compile".
pub(super) fn bowl() -> Landscape {
    Landscape::new(
        "bowl",
        r#"
X: [0, 1, 2, 3, 4, 5, 6, 7]
Y: [0, 1, 2, 3, 4, 5]
Z: [0, 1, 2, 3]
MODE: [0, 1]
BOOST: {values: [1, 2, 3], when: "MODE == 1"}
"#,
        r#"["X + Y <= 10", "MODE == 0 || BOOST < 3 || Z > 0"]"#,
        |c| {
            let (x, y, z) = (get(c, "X"), get(c, "Y"), get(c, "Z"));
            if x >= 6.0 && y <= 1.0 {
                return Evaluation::rejected(TrialStatus::CompileError, "synthetic invalid region");
            }
            let bowl = (x - 5.0).powi(2) + 0.7 * (y - 3.0).powi(2) + 2.0 * (z - 2.0).powi(2);
            let interaction = 0.4 * (x - 5.0) * (y - 3.0);
            let mode = match c.get("BOOST") {
                None => 4.0,
                Some(b) => (*b as f64 - 2.0).abs() * 3.0,
            };
            Evaluation::ok(100.0 + bowl + interaction + mode + 6.0 * hash01(c))
        },
    )
}

/// Modelled on tile-size trade-offs of an attention kernel: work per block, waves over
/// the SMs, occupancy from registers and shared memory, pipelining depth, and gates
/// (too many registers or too much shared memory) that reject configurations.
pub(super) fn realistic() -> Landscape {
    Landscape::new(
        "realistic",
        r#"
TILE_M: [32, 64, 128]
TILE_N: [32, 64, 128]
NUM_WARPS: [2, 4, 8]
STAGES: [1, 2, 3]
UNROLL: [1, 2, 4]
USE_WARP_SPECIALIZATION: [0, 1]
NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
"#,
        r#"["TILE_M * TILE_N <= 8192", "USE_WARP_SPECIALIZATION == 0 || NUM_PRODUCER_WARPS < NUM_WARPS"]"#,
        |c| {
            let (tm, tn, warps, stages, unroll) = (
                get(c, "TILE_M"),
                get(c, "TILE_N"),
                get(c, "NUM_WARPS"),
                get(c, "STAGES"),
                get(c, "UNROLL"),
            );
            let ws = c["USE_WARP_SPECIALIZATION"] == 1;
            let producers = c.get("NUM_PRODUCER_WARPS").copied().unwrap_or(0) as f64;
            let consumers = warps - producers;
            let regs = 40.0 + tm * tn / (consumers * 32.0) * 0.9 + 8.0 * unroll;
            let smem = (tm * 64.0 * 2.0 + 2.0 * tn * 64.0 * stages) + if ws { 1024.0 } else { 0.0 };
            if regs > 160.0 {
                let mut e = Evaluation::rejected(TrialStatus::PtxasGate, "registers over the gate");
                e.registers = Some(regs as u32);
                return e;
            }
            if smem > 65536.0 {
                return Evaluation::rejected(TrialStatus::PtxasGate, "shared memory over the gate");
            }
            let blocks = (512.0 / tm).ceil() * 16.0;
            let sms = 132.0;
            let per_sm = ((65536.0 / (regs * warps * 32.0)).floor())
                .min((228.0 * 1024.0 / smem).floor())
                .clamp(1.0, 8.0);
            let waves = (blocks / (sms * per_sm)).ceil();
            let compute = tm * 512.0 * 64.0 / (consumers * 32.0 * 40.0);
            let memory = 512.0 * 64.0 * 2.0 / tn * (1.0 / stages.min(2.0 + producers)).sqrt();
            let overlap = if ws {
                0.72
            } else {
                1.0 - 0.08 * (stages - 1.0)
            };
            let unroll_gain = [1.0, 0.93, 0.97][(unroll as usize).trailing_zeros() as usize];
            let time = waves * (compute + memory * overlap) * unroll_gain;
            Evaluation::ok(time * (1.0 + 0.01 * hash01(c)))
        },
    )
}

/// A cost model over the real kernel's space (`tests/fixtures/tune/kernel_space_full.yaml`:
/// every knob of kernels/sdpa_fp8.cu, 722 configurations) on the mission shape: waves over
/// 132 SMs, occupancy from registers, threads and shared memory (the kernel's formula),
/// tensor-core vs scalar P·V, cp.async / warp-specialized overlap, per-tile sync cost, and a
/// 128-register PTXAS gate.
pub(super) fn kernel() -> Landscape {
    kernel_landscape("kernel", "kernel_space_full.yaml")
}

/// The same model over the 189 configurations of `benches/tune/pipeline.yaml` (cp.async and
/// WMMA P·V fixed on by the base variant).
pub(super) fn kernel_cp_wmma() -> Landscape {
    kernel_landscape("kernel, cp.async + WMMA", "kernel_space.yaml")
}

fn kernel_landscape(name: &'static str, fixture: &str) -> Landscape {
    let path = format!(
        "{}/tests/fixtures/tune/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Landscape {
        name,
        space: Space::from_yaml(&v["space"], v.get("constraints")).unwrap(),
        eval: |c| {
            let (tm, tn, nw) = (get(c, "TILE_M"), get(c, "TILE_N"), get(c, "NUM_WARPS"));
            // Absent from the 189-configuration space: the base variant sets them to 1.
            let fixed = |k: &str| c.get(k).copied().unwrap_or(1) as f64;
            let (cp, wmma) = (fixed("USE_CP_ASYNC"), fixed("USE_WMMA_PV"));
            let ws = get(c, "USE_WARP_SPECIALIZATION");
            let producers = c.get("NUM_PRODUCER_WARPS").copied().unwrap_or(0) as f64;
            let stages = c.get("NUM_STAGES").copied().unwrap_or(1) as f64;
            let threads = 32.0 * (nw + producers);
            let regs = 48.0
                + tm * 64.0 / (nw * 32.0)
                + if wmma == 1.0 { 0.0 } else { tn / 2.0 }
                + 4.0 * stages;
            if regs > 128.0 {
                let mut e = Evaluation::rejected(TrialStatus::PtxasGate, "ptxas.max_registers");
                e.registers = Some(regs as u32);
                return e;
            }
            let nraw = if cp == 1.0 {
                if ws == 1.0 {
                    2.0
                } else {
                    stages
                }
            } else {
                0.0
            };
            let nbuf = if ws == 1.0 { stages } else { 1.0 };
            let smem = tm * 72.0 * 2.0
                + nbuf * 2.0 * tn * 72.0 * 2.0
                + nraw * 2.0 * tn * 64.0
                + tm * (tn + 4.0) * 4.0
                + tm * (tn + 8.0) * 2.0
                + 8.0 * tm;
            let blocks = (512.0 / tm).ceil() * 16.0;
            let per_sm = (65536.0 / (regs * threads))
                .floor()
                .min((233472.0 / smem).floor())
                .clamp(1.0, 16.0);
            let waves = (blocks / (132.0 * per_sm)).ceil();
            let compute =
                tm * 512.0 * 64.0 * 2.0 / (nw * 32.0 * if wmma == 1.0 { 16.0 } else { 2.0 });
            let memory = 512.0 * 64.0 * 2.0 / 24.0;
            let overlap = if ws == 1.0 {
                0.55 + 0.05 * (2.0 - producers)
            } else if cp == 1.0 {
                1.0 - 0.12 * (stages - 1.0)
            } else {
                1.0
            };
            let sync = 512.0 / tn * 30.0;
            let time = waves * (compute + memory * overlap + sync) / 1000.0;
            Evaluation::ok(time * (1.0 + 0.01 * hash01(c)))
        },
    }
}
