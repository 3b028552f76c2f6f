//! The isolated method: one launch per sample, as Nsight Compute times it.
//!
//! Each sample is `[L2 flush] hold · start event · launch · end event · release · wait`:
//! the hold ([`crate::blocker`]) keeps the GPU waiting until the host has queued the
//! events and the launch, so the events bracket the GPU's work and not the host's
//! submission.
//!
//! Two events with nothing between them still read about 1.25 µs apart on an H100: that is
//! the timer, not the kernel. Each sample is paired with such an empty region, taken the
//! same way, and the median empty region is subtracted from every sample (as hyperfine
//! subtracts the cost of spawning its shell). `timer_overhead_us` records what was
//! subtracted.

use super::{sample_adaptively, L2Flush, Launch, PairTiming, Timing, TimingConfig};
use crate::blocker::Blocker;
use crate::{driver::Event, driver::Stream};
use repro_base::stats::summarize;

/// Raw event readings: kernel regions and empty regions, in µs.
#[derive(Default)]
struct Readings {
    kernel: Vec<f64>,
    empty: Vec<f64>,
}

impl Readings {
    /// The median empty region.
    fn timer_overhead(&self) -> f64 {
        summarize(&self.empty).map_or(0.0, |s| s.p50)
    }

    /// Kernel regions less the timer's cost.
    fn samples(&self) -> Vec<f64> {
        let overhead = self.timer_overhead();
        self.kernel.iter().map(|k| k - overhead).collect()
    }
}

pub(super) fn time(
    stream: &Stream,
    launch: &Launch,
    cfg: &TimingConfig,
    flush: &L2Flush,
) -> anyhow::Result<Timing> {
    let mut region = Region::new()?;
    let mut readings = Readings::default();
    sample_adaptively(
        cfg,
        &mut readings,
        |readings, round| {
            for i in 0..cfg.iters {
                readings.empty.push(region.time(stream, None)?);
                flush.before_sample(round * cfg.iters + i, stream)?;
                readings.kernel.push(region.time(stream, Some(launch))?);
            }
            Ok(())
        },
        Readings::samples,
    )?;
    Ok(Timing {
        samples_us: readings.samples(),
        launches_per_sample: 1,
        method: "isolated",
        timer_overhead_us: Some(readings.timer_overhead()),
    })
}

/// Two kernels, interleaved: `cfg.iters` pairs, each one sample of A and one of B back to
/// back, A first in even pairs and B first in odd ones (so neither always runs right after
/// the other). Every sample is taken as [`time`] takes one, with its own empty region; the
/// median empty region is subtracted from both sides.
pub(super) fn time_pair(
    stream: &Stream,
    launches: [&Launch; 2],
    cfg: &TimingConfig,
    flush: &L2Flush,
) -> anyhow::Result<PairTiming> {
    let mut region = Region::new()?;
    let mut sides: [Readings; 2] = Default::default();
    let mut empty = Vec::new();
    for pair in 0..cfg.iters {
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            empty.push(region.time(stream, None)?);
            flush.before_sample(2 * pair + k as u32, stream)?;
            sides[k]
                .kernel
                .push(region.time(stream, Some(launches[k]))?);
        }
    }
    for side in &mut sides {
        side.empty.clone_from(&empty);
    }
    let [a, b] = sides;
    Ok(PairTiming {
        timer_overhead_us: a.timer_overhead(),
        a: a.samples(),
        b: b.samples(),
    })
}

/// A start and an end event around one launch, or around nothing, behind a hold.
struct Region {
    blocker: Blocker,
    start: Event,
    end: Event,
}

impl Region {
    fn new() -> anyhow::Result<Region> {
        Ok(Region {
            blocker: Blocker::new()?,
            start: Event::new()?,
            end: Event::new()?,
        })
    }

    /// Enqueue `hold · start · [launch] · end · release` and wait for it: µs from start to
    /// end. Waiting leaves the GPU idle before the next hold, so every launch starts from
    /// an idle, fully queued stream, as under Nsight Compute (back-to-back samples, not
    /// waited for, read 0.6-1.4 µs more on an H100: docs/PERFORMANCE.md).
    fn time(&mut self, stream: &Stream, launch: Option<&Launch>) -> anyhow::Result<f64> {
        let hold = self.blocker.hold(stream)?;
        self.start.record(stream)?;
        if let Some(launch) = launch {
            launch(stream)?;
        }
        self.end.record(stream)?;
        self.blocker.release(hold);
        let us = f64::from(self.start.elapsed_ms(&self.end)?) * 1000.0;
        self.blocker.check_no_timeouts()?;
        Ok(us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_empty_region_is_subtracted_from_every_sample() {
        // Readings of an H100 run (µs): a 22.4 µs kernel, the timer at 1.25 µs with one
        // slow reading that the median ignores.
        let r = Readings {
            kernel: vec![23.648, 23.616, 23.680, 25.920],
            empty: vec![1.248, 1.248, 1.280, 3.904, 1.216],
        };
        assert_eq!(r.timer_overhead(), 1.248);
        let s = r.samples();
        let expected = [22.4, 22.368, 22.432, 24.672];
        assert!(
            s.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-9),
            "{s:?}"
        );
        assert_eq!(Readings::default().timer_overhead(), 0.0);
    }
}
