//! What a launch may ask for: CUDA's architectural limits (the same on every GPU since
//! compute capability 3.0), narrowed by a device's own where one is present
//! (`repro_gpu::limits` reads them from the driver).

use super::exprs::Geometry;

/// Launch limits of a device, or of CUDA in general.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub max_grid: [i64; 3],
    pub max_block: [i64; 3],
    pub max_threads_per_block: i64,
    /// Dynamic shared memory per block with the opt-in; `None`: unknown without a device.
    pub max_dynamic_smem: Option<i64>,
}

impl Limits {
    /// CUDA's limits for every architecture: grid x < 2³¹, y and z ≤ 65535; block x, y
    /// ≤ 1024, z ≤ 64; 1024 threads per block.
    pub const ARCHITECTURAL: Limits = Limits {
        max_grid: [i32::MAX as i64, 65535, 65535],
        max_block: [1024, 1024, 64],
        max_threads_per_block: 1024,
        max_dynamic_smem: None,
    };

    /// Every way `g` exceeds these limits: (the launch key, its index or `None` for the
    /// key itself, the message).
    pub fn check(&self, g: &Geometry) -> Vec<Exceeded> {
        const AXES: [&str; 3] = ["x", "y", "z"];
        let mut out = Vec::new();
        for (axis, (&n, &max)) in g.grid.iter().zip(&self.max_grid).enumerate() {
            if n > max {
                out.push(Exceeded {
                    key: "grid",
                    index: Some(axis),
                    message: format!("grid.{} is {n}; the limit is {max}", AXES[axis]),
                });
            }
        }
        for (axis, (&n, &max)) in g.block.iter().zip(&self.max_block).enumerate() {
            if n > max {
                out.push(Exceeded {
                    key: "block",
                    index: Some(axis),
                    message: format!("block.{} is {n}; the limit is {max}", AXES[axis]),
                });
            }
        }
        let threads = g.block.iter().product::<i64>();
        let axis_over = out.iter().any(|e| e.key == "block");
        if threads > self.max_threads_per_block && !axis_over {
            out.push(Exceeded {
                key: "block",
                index: None,
                message: format!(
                    "a block of {} threads; the limit is {} per block",
                    g.block.map(|b| b.to_string()).join(" × "),
                    self.max_threads_per_block
                ),
            });
        }
        if let Some(max) = self.max_dynamic_smem.filter(|&max| g.smem > max) {
            out.push(Exceeded {
                key: "smem",
                index: None,
                message: format!(
                    "{} bytes of dynamic shared memory per block; this GPU allows {max}",
                    g.smem
                ),
            });
        }
        out
    }
}

/// One limit a launch exceeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// `grid`, `block` or `smem`.
    pub key: &'static str,
    /// The extent (0 = x) at fault, or `None` for the key as a whole.
    pub index: Option<usize>,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(grid: [i64; 3], block: [i64; 3], smem: i64) -> Geometry {
        Geometry { grid, block, smem }
    }

    #[test]
    fn architectural_limits_catch_each_axis_and_the_thread_count() {
        let ok = launch([i32::MAX as i64, 65535, 65535], [1024, 1, 1], 1 << 20);
        assert!(Limits::ARCHITECTURAL.check(&ok).is_empty());
        let bad = launch([1, 65536, 1], [64, 32, 2], 0);
        let found = Limits::ARCHITECTURAL.check(&bad);
        let keys: Vec<_> = found.iter().map(|e| (e.key, e.index)).collect();
        assert_eq!(keys, [("grid", Some(1)), ("block", None)]);
        assert_eq!(found[0].message, "grid.y is 65536; the limit is 65535");
        assert_eq!(
            found[1].message,
            "a block of 64 × 32 × 2 threads; the limit is 1024 per block"
        );
        let z = Limits::ARCHITECTURAL.check(&launch([1, 1, 1], [1, 1, 65], 0));
        assert_eq!(z[0].message, "block.z is 65; the limit is 64");
    }

    #[test]
    fn a_device_limit_checks_dynamic_shared_memory() {
        let h100 = Limits {
            max_dynamic_smem: Some(232448),
            ..Limits::ARCHITECTURAL
        };
        assert!(h100.check(&launch([1; 3], [128, 1, 1], 232448)).is_empty());
        let over = h100.check(&launch([1; 3], [128, 1, 1], 232449));
        assert_eq!((over[0].key, over[0].index), ("smem", None));
    }
}
