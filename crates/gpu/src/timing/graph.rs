//! The graph method: back-to-back launches in a CUDA graph, timed per batch.
//!
//! 1. Batch size: a graph of ten launches is timed with events to estimate one launch; a
//!    sample then holds `batch = ⌈target / estimate⌉` launches (1..=1000), so event
//!    resolution and host overhead are small against the sample.
//! 2. The batch is captured into a CUDA graph (`cuda_graph`), which removes host launch
//!    gaps between kernels; if capture fails, the batch is enqueued launch by launch
//!    between the events (`batched_events`).
//! 3. Each sample: (L2 flush), start event, the batch, end event. Its value is
//!    elapsed / batch: the mean time of one launch within the batch.

use super::{sample_adaptively, L2Flush, Launch, Timing, TimingConfig};
use crate::{driver::CudaError, driver::Event, driver::Graph, driver::Stream};

const MAX_BATCH: u32 = 1000;

/// The batch size that makes one sample last at least `target_us`.
pub fn batch_for(per_launch_us: f64, target_us: f64) -> u32 {
    if per_launch_us.is_nan() || per_launch_us <= 0.0 {
        return MAX_BATCH;
    }
    ((target_us / per_launch_us).ceil() as u32).clamp(1, MAX_BATCH)
}

pub(super) fn time(
    stream: &Stream,
    launch: &Launch,
    cfg: &TimingConfig,
    flush: &L2Flush,
) -> anyhow::Result<Timing> {
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
    let runner = Batch::new(stream, launch, batch);
    runner.run(stream, launch)?; // warm the graph (first replay uploads work descriptors)
    stream.synchronize()?;

    let mut samples = Vec::new();
    sample_adaptively(
        cfg,
        &mut samples,
        |samples, round| {
            let events: Vec<(Event, Event)> = (0..cfg.iters)
                .map(|_| Ok((Event::new()?, Event::new()?)))
                .collect::<Result<_, CudaError>>()?;
            for (i, (a, b)) in events.iter().enumerate() {
                flush.before_sample(round * cfg.iters + i as u32, stream)?;
                a.record(stream)?;
                runner.run(stream, launch)?;
                b.record(stream)?;
            }
            for (a, b) in &events {
                samples.push(f64::from(a.elapsed_ms(b)?) * 1000.0 / f64::from(batch));
            }
            Ok(())
        },
        |samples| samples.clone(),
    )?;
    Ok(Timing {
        samples_us: samples,
        launches_per_sample: batch,
        method: runner.method(),
        timer_overhead_us: None,
    })
}

/// `n` launches: a captured graph, or (if capture fails) a loop of launches.
struct Batch {
    graph: Option<Graph>,
    n: u32,
}

impl Batch {
    fn new(stream: &Stream, launch: &Launch, n: u32) -> Batch {
        let graph = Graph::capture(stream, |s| (0..n).try_for_each(|_| launch(s))).ok();
        Batch { graph, n }
    }

    fn run(&self, stream: &Stream, launch: &Launch) -> Result<(), CudaError> {
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
}
