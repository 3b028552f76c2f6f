//! Timing a kernel launch honestly (DESIGN.md, "Measuring honestly").
//!
//! 1. Warm-up: `warmup` single launches, then a synchronize.
//! 2. Batch size: a graph of ten launches is timed with events to estimate one launch; a sample then
//!    holds `batch = ⌈100 µs / estimate⌉` launches (1..=1000), so event resolution and
//!    host overhead are small against the sample.
//! 3. The batch is captured into a CUDA graph (`cuda_graph`), which removes host launch
//!    gaps between kernels; if capture fails, the batch is enqueued launch by launch
//!    between the events (`batched_events`).
//! 4. Each sample: (L2 flush: overwrite a buffer twice the L2 size, before the start event,
//!    outside the timed region), start event, the batch, end event. The sample's value is
//!    elapsed / batch: the mean time of one launch within the batch.
//! 5. Adaptive (like nvbench's noise criterion): after `iters` samples, while the CV of the
//!    samples exceeds `max_cv` and the time limit allows, take `iters` more (at most 10×).

use super::driver::{CudaError, DeviceBuffer, Event, Graph, Stream};
use std::time::{Duration, Instant};

/// Whether L2 is flushed before each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L2Mode {
    Warm,
    Flush,
}

impl L2Mode {
    pub fn parse(s: &str) -> Option<L2Mode> {
        match s {
            "warm" => Some(L2Mode::Warm),
            "flush" => Some(L2Mode::Flush),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            L2Mode::Warm => "warm",
            L2Mode::Flush => "flush",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TimingConfig {
    pub warmup: u32,
    /// Samples per round (the minimum taken).
    pub iters: u32,
    pub l2: L2Mode,
    /// Keep sampling while the CV is above this.
    pub max_cv: f64,
    /// Stop adding rounds after this much wall time.
    pub time_limit: Duration,
    /// Aim for samples at least this long.
    pub target_sample_us: f64,
    /// Launches per sample, instead of choosing from `target_sample_us`.
    pub fixed_batch: Option<u32>,
}

/// Raw timing result: per-launch times of each sample.
#[derive(Debug, Clone)]
pub struct Timing {
    pub samples_us: Vec<f64>,
    pub launches_per_sample: u32,
    /// `cuda_graph` or `batched_events`.
    pub method: &'static str,
}

const MAX_BATCH: u32 = 1000;
const MAX_ROUNDS: u32 = 10;

/// The batch size that makes one sample last at least `target_us`.
pub fn batch_for(per_launch_us: f64, target_us: f64) -> u32 {
    if per_launch_us.is_nan() || per_launch_us <= 0.0 {
        return MAX_BATCH;
    }
    ((target_us / per_launch_us).ceil() as u32).clamp(1, MAX_BATCH)
}

/// Time `launch` (which enqueues one kernel launch on the stream it is given).
/// `l2_bytes` is the device's L2 size, for the flush buffer.
pub fn time_kernel(
    stream: &Stream,
    launch: &dyn Fn(&Stream) -> Result<(), CudaError>,
    cfg: &TimingConfig,
    l2_bytes: usize,
) -> Result<Timing, CudaError> {
    for _ in 0..cfg.warmup {
        launch(stream)?;
    }
    stream.synchronize()?;

    // Estimate one launch from a batch of ten, itself a graph where capture works, so
    // host launch overhead does not inflate the estimate.
    const PROBE: u32 = 10;
    let probe = Batch::new(stream, launch, PROBE);
    probe.run(stream, launch)?;
    let (start, end) = (Event::new()?, Event::new()?);
    start.record(stream)?;
    probe.run(stream, launch)?;
    end.record(stream)?;
    let estimate_us = f64::from(start.elapsed_ms(&end)?) * 1000.0 / f64::from(PROBE);
    let batch = cfg
        .fixed_batch
        .unwrap_or_else(|| batch_for(estimate_us, cfg.target_sample_us));
    let batch_runner = Batch::new(stream, launch, batch);
    let run_batch = |s: &Stream| batch_runner.run(s, launch);
    run_batch(stream)?; // warm the graph (first replay uploads work descriptors)
    stream.synchronize()?;

    let flush = match cfg.l2 {
        L2Mode::Flush => Some(DeviceBuffer::alloc((2 * l2_bytes).max(1 << 20))?),
        L2Mode::Warm => None,
    };
    let began = Instant::now();
    let mut samples = Vec::new();
    for round in 0..MAX_ROUNDS {
        let events: Vec<(Event, Event)> = (0..cfg.iters)
            .map(|_| Ok((Event::new()?, Event::new()?)))
            .collect::<Result<_, CudaError>>()?;
        for (i, (a, b)) in events.iter().enumerate() {
            if let Some(buf) = &flush {
                buf.fill_u32(round * cfg.iters + i as u32, stream)?;
            }
            a.record(stream)?;
            run_batch(stream)?;
            b.record(stream)?;
        }
        for (a, b) in &events {
            samples.push(f64::from(a.elapsed_ms(b)?) * 1000.0 / f64::from(batch));
        }
        let cv = crate::stats::summarize(&samples).map_or(0.0, |s| s.cv);
        if cv <= cfg.max_cv || began.elapsed() >= cfg.time_limit {
            break;
        }
    }
    Ok(Timing {
        samples_us: samples,
        launches_per_sample: batch,
        method: batch_runner.method(),
    })
}

/// `n` launches: a captured graph, or (if capture fails) a loop of launches.
struct Batch {
    graph: Option<Graph>,
    n: u32,
}

impl Batch {
    fn new(stream: &Stream, launch: &dyn Fn(&Stream) -> Result<(), CudaError>, n: u32) -> Batch {
        let graph = Graph::capture(stream, |s| (0..n).try_for_each(|_| launch(s))).ok();
        Batch { graph, n }
    }

    fn run(
        &self,
        stream: &Stream,
        launch: &dyn Fn(&Stream) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        match &self.graph {
            Some(g) => g.launch(stream),
            None => (0..self.n).try_for_each(|_| launch(stream)),
        }
    }

    fn method(&self) -> &'static str {
        if self.graph.is_some() {
            "cuda_graph"
        } else {
            "batched_events"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_reach_the_target_sample_length() {
        assert_eq!(batch_for(10.0, 100.0), 10);
        assert_eq!(batch_for(3.0, 100.0), 34);
        assert_eq!(batch_for(250.0, 100.0), 1);
        assert_eq!(batch_for(0.01, 100.0), MAX_BATCH);
        assert_eq!(batch_for(0.0, 100.0), MAX_BATCH);
        assert_eq!(batch_for(f64::NAN, 100.0), MAX_BATCH);
    }

    #[test]
    fn l2_modes_round_trip() {
        for m in [L2Mode::Warm, L2Mode::Flush] {
            assert_eq!(L2Mode::parse(m.name()), Some(m));
        }
        assert_eq!(L2Mode::parse("cold"), None);
    }
}
