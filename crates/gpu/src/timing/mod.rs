//! Timing a kernel honestly (docs/guide/gpu.md), by one of two methods:
//!
//! - [`Method::Isolated`] (the default): each sample is one launch between two events,
//!   queued behind a [`super::blocker`] hold so the host is out of the measurement. The
//!   events' own cost, measured the same way with nothing between them, is subtracted. This
//!   is what Nsight Compute's `gpu__time_duration` measures: one launch, start to end
//!   (within 1% of it on an H100, docs/PERFORMANCE.md).
//! - [`Method::Graph`]: each sample is a CUDA graph of back-to-back launches; its value is
//!   the mean time per launch. This is the throughput of a kernel replayed in a graph, where
//!   the GPU prepares each launch while the one before runs: 0.6-0.7 µs less per launch
//!   than an isolated one for the shipped kernels on the mission shape on an H100.
//!
//! Both warm up, optionally flush L2 before each sample (outside the timed region), and are
//! adaptive: after `iters` samples, while the samples are noisy (CV above `max_cv`) *and*
//! the median they give is still uncertain (its 95% confidence interval wider than `max_cv`
//! of it), take `iters` more, while the time limit allows (at most [`MAX_ROUNDS`] rounds).
//! More samples narrow the median's interval, not the CV: a kernel whose spread is the
//! timer's own resolution (a few µs kernel) keeps its CV however long it is sampled, but its
//! median is settled once the interval is.
//!
//! [`time_interleaved`] times two kernels the isolated way, sample by sample in turn, for
//! `repro compare`.

mod graph;
mod isolated;

use super::driver::{CudaError, DeviceBuffer, Stream};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How samples are taken (`repro exec --method`, the bench and tune stages' `method:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    #[default]
    Isolated,
    Graph,
}

/// Whether L2 is flushed before each sample (`repro exec --l2`, the stages' `l2:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum L2Mode {
    #[default]
    Warm,
    Flush,
}

/// The names both enums are written as on the command line and in pipeline.yaml, and their
/// parsing: `FromStr` for what a user typed, `From<&str>` for a name written in code.
macro_rules! named_enum {
    ($ty:ident, $what:literal, $($variant:ident => $name:literal),+) => {
        impl $ty {
            pub const NAMES: [&'static str; 2] = [$($name),+];

            pub fn parse(s: &str) -> Option<$ty> {
                match s {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }

            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $ty::parse(s).ok_or_else(|| {
                    format!(concat!("expected ", $what, " {}, got `{}`"), $ty::NAMES.join(" or "), s)
                })
            }
        }

        /// A name written in code (`"graph".into()`); panics on anything else, as a typo in
        /// a literal is a bug. User input goes through `FromStr`.
        impl From<&str> for $ty {
            fn from(s: &str) -> Self {
                s.parse().unwrap_or_else(|e: String| panic!("{e}"))
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum!(Method, "a timing method:", Isolated => "isolated", Graph => "graph");
named_enum!(L2Mode, "an L2 mode:", Warm => "warm", Flush => "flush");

#[derive(Debug, Clone)]
pub struct TimingConfig {
    pub method: Method,
    pub warmup: u32,
    /// Samples per round (the minimum taken).
    pub iters: u32,
    pub l2: L2Mode,
    /// Keep sampling while the CV is above this and the median's 95% confidence interval
    /// is wider than this fraction of it.
    pub max_cv: f64,
    /// Stop adding rounds after this much wall time.
    pub time_limit: Duration,
    /// Graph method: aim for samples at least this long.
    pub target_sample_us: f64,
    /// Graph method: launches per sample, instead of choosing from `target_sample_us`.
    pub fixed_batch: Option<u32>,
}

/// Raw timing result: the time of one launch, per sample.
#[derive(Debug, Clone)]
pub struct Timing {
    pub samples_us: Vec<f64>,
    pub launches_per_sample: u32,
    /// `isolated`, `cuda_graph`, or `batched_events` (graph capture failed).
    pub method: &'static str,
    /// Isolated method: the median time of an empty timed region, subtracted from every
    /// sample.
    pub timer_overhead_us: Option<f64>,
}

/// Two kernels timed in turn ([`time_interleaved`]): `a[i]` and `b[i]` were taken back to
/// back, µs per launch, the timer's cost subtracted.
#[derive(Debug, Clone)]
pub struct PairTiming {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub timer_overhead_us: f64,
}

const MAX_ROUNDS: u32 = 10;

/// Enqueues one launch of the kernel being timed on the stream it is given.
pub type Launch<'a> = dyn Fn(&Stream) -> Result<(), CudaError> + 'a;

/// Time `launch` (which enqueues one kernel launch on the stream it is given).
/// `l2_bytes` is the device's L2 size, for the flush buffer.
pub fn time_kernel(
    stream: &Stream,
    launch: &Launch,
    cfg: &TimingConfig,
    l2_bytes: usize,
) -> anyhow::Result<Timing> {
    let flush = warm_up(stream, &[launch], cfg, l2_bytes)?;
    match cfg.method {
        Method::Isolated => isolated::time(stream, launch, cfg, &flush),
        Method::Graph => graph::time(stream, launch, cfg, &flush),
    }
}

/// Time two kernels on one stream by the isolated method, interleaved: `cfg.iters` pairs
/// (a fixed count: the comparison's confidence interval says how sure it is), after
/// `cfg.warmup` launches of each in turn. `cfg.method` is not consulted.
pub fn time_interleaved(
    stream: &Stream,
    a: &Launch,
    b: &Launch,
    cfg: &TimingConfig,
    l2_bytes: usize,
) -> anyhow::Result<PairTiming> {
    let flush = warm_up(stream, &[a, b], cfg, l2_bytes)?;
    isolated::time_pair(stream, [a, b], cfg, &flush)
}

/// `cfg.warmup` rounds of one launch of each of `launches` in turn, waited for; then the
/// L2 flush the samples will use.
fn warm_up(
    stream: &Stream,
    launches: &[&Launch],
    cfg: &TimingConfig,
    l2_bytes: usize,
) -> anyhow::Result<L2Flush> {
    for _ in 0..cfg.warmup {
        for launch in launches {
            launch(stream)?;
        }
    }
    stream.synchronize()?;
    Ok(L2Flush::new(cfg.l2, l2_bytes)?)
}

/// Overwrites a buffer twice the size of L2 before a sample, or does nothing (L2 warm).
struct L2Flush(Option<DeviceBuffer>);

impl L2Flush {
    fn new(mode: L2Mode, l2_bytes: usize) -> Result<L2Flush, CudaError> {
        Ok(L2Flush(match mode {
            L2Mode::Flush => Some(DeviceBuffer::alloc((2 * l2_bytes).max(1 << 20))?),
            L2Mode::Warm => None,
        }))
    }

    /// Enqueue the flush for sample number `sample` (a new pattern each time).
    fn before_sample(&self, sample: u32, stream: &Stream) -> Result<(), CudaError> {
        match &self.0 {
            Some(buf) => buf.fill_u32(sample, stream),
            None => Ok(()),
        }
    }
}

/// Call `take_round(state, round)` (which takes `cfg.iters` samples into `state`) until
/// `samples(state)` are [`settled`], the time limit has passed, or [`MAX_ROUNDS`] rounds
/// are done.
fn sample_adaptively<S>(
    cfg: &TimingConfig,
    state: &mut S,
    mut take_round: impl FnMut(&mut S, u32) -> anyhow::Result<()>,
    samples: impl Fn(&S) -> Vec<f64>,
) -> anyhow::Result<()> {
    let began = Instant::now();
    for round in 0..MAX_ROUNDS {
        take_round(state, round)?;
        if settled(&samples(state), cfg.max_cv) || began.elapsed() >= cfg.time_limit {
            break;
        }
    }
    Ok(())
}

/// Do more samples stop mattering? Yes once their CV is at most `max_cv`, or the 95%
/// confidence interval of their median is within `max_cv` of it (half-width over median).
/// Samples that cannot be summarized are settled: more of them would not help.
fn settled(samples: &[f64], max_cv: f64) -> bool {
    repro_base::stats::summarize(samples)
        .is_none_or(|s| s.cv <= max_cv || s.ci95_half_width() <= max_cv * s.p50.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_stops_once_the_median_is_settled_not_only_the_cv() {
        // A 3.3 µs kernel read by a timer of 32 ns steps: CV near 2% for good.
        let quantized: Vec<f64> = (0..100)
            .map(|i| [3.264, 3.296, 3.296, 3.328, 3.392][i % 5])
            .collect();
        let s = repro_base::stats::summarize(&quantized).unwrap();
        assert!(s.cv > 0.01, "{}", s.cv);
        assert!(
            settled(&quantized, 0.01),
            "its median is known to well within 1%"
        );
        // Wide, few samples: the median is not settled yet.
        let wide = [1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0, 10.0];
        assert!(!settled(&wide, 0.01));
        assert!(settled(&[5.0; 10], 0.01), "no spread");
    }

    #[test]
    fn l2_modes_and_methods_round_trip() {
        for m in [L2Mode::Warm, L2Mode::Flush] {
            assert_eq!(L2Mode::parse(m.name()), Some(m));
        }
        assert_eq!(L2Mode::parse("cold"), None);
        assert_eq!(
            Method::NAMES.map(Method::parse),
            [Some(Method::Isolated), Some(Method::Graph)]
        );
        assert_eq!(Method::parse("cuda_graph"), None);
    }

    fn cfg(max_cv: f64, time_limit: Duration) -> TimingConfig {
        TimingConfig {
            method: Method::Graph,
            warmup: 0,
            iters: 4,
            l2: L2Mode::Warm,
            max_cv,
            time_limit,
            target_sample_us: 100.0,
            fixed_batch: None,
        }
    }

    /// Rounds of recorded samples: `first`, then `later` again and again.
    fn run(cfg: &TimingConfig, first: [f64; 4], later: [f64; 4]) -> Vec<f64> {
        let mut taken = Vec::new();
        sample_adaptively(
            cfg,
            &mut taken,
            |t, round| {
                t.extend(if round == 0 { first } else { later });
                Ok(())
            },
            |t| t.clone(),
        )
        .unwrap();
        taken
    }

    #[test]
    fn sampling_goes_on_while_unsettled_and_stops_at_the_limits() {
        let noisy = [10.0, 14.0, 9.0, 13.0];
        // A noisy first round: more rounds until the median is settled.
        let taken = run(&cfg(0.1, Duration::from_secs(60)), noisy, [11.0; 4]);
        assert!(
            taken.len() > 4 && taken.len() < 4 * MAX_ROUNDS as usize && settled(&taken, 0.1),
            "{taken:?}"
        );
        // Samples that stay spread out, under a limit they never meet, stop after
        // MAX_ROUNDS rounds...
        let spread = [1.0, 100.0, 2.0, 90.0];
        assert_eq!(
            run(&cfg(0.0, Duration::from_secs(60)), noisy, spread).len(),
            4 * MAX_ROUNDS as usize
        );
        // ...and a spent time limit after the first.
        assert_eq!(run(&cfg(0.0, Duration::ZERO), noisy, spread).len(), 4);
    }
}
