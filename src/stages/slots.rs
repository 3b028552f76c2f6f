//! The one worker pool of the stages (bench jobs, tune trials, nvcc compiles): one worker
//! thread per slot (a GPU, or an nvcc process), each taking the next item when it is free,
//! so N GPUs stay busy with N trials at once. Results come back to the calling thread as
//! they finish (for live progress and incremental memo writes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

/// Run `work(slot, item)` for every item, at most one at a time per slot, and pass each
/// result to `sink(index, result)` on the calling thread as soon as it is ready. After
/// `cancel` is set, items not yet started are dropped (their index never reaches `sink`).
pub fn run_on_slots<T, R>(
    slots: u32,
    items: &[T],
    cancel: &AtomicBool,
    work: impl Fn(u32, &T) -> R + Sync,
    mut sink: impl FnMut(usize, R),
) where
    T: Sync,
    R: Send,
{
    let queue = Mutex::new((0..items.len()).collect::<VecDeque<_>>());
    let (tx, rx) = mpsc::channel::<(usize, R)>();
    std::thread::scope(|scope| {
        for slot in 0..slots.max(1) {
            let (tx, queue, work) = (tx.clone(), &queue, &work);
            scope.spawn(move || loop {
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                let Some(i) = next else { return };
                if tx.send((i, work(slot, &items[i]))).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            sink(i, r);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Barrier;

    #[test]
    fn every_item_once_and_every_slot_busy() {
        let items: Vec<u32> = (0..12).collect();
        // Both slots must be inside `work` at the same time for the barrier to open.
        let barrier = Barrier::new(2);
        let mut got = Vec::new();
        let mut slots_used = BTreeSet::new();
        run_on_slots(
            2,
            &items,
            &AtomicBool::new(false),
            |slot, item| {
                if *item < 2 {
                    barrier.wait();
                }
                (slot, item * 10)
            },
            |i, (slot, r)| {
                slots_used.insert(slot);
                got.push((i, r));
            },
        );
        got.sort();
        assert_eq!(
            got,
            (0..12).map(|i| (i as usize, i * 10)).collect::<Vec<_>>()
        );
        assert_eq!(slots_used, BTreeSet::from([0, 1]));
    }

    #[test]
    fn cancel_stops_taking_items() {
        let cancel = AtomicBool::new(false);
        let mut done = 0;
        run_on_slots(
            1,
            &[1, 2, 3, 4],
            &cancel,
            |_, item| {
                if *item == 2 {
                    cancel.store(true, Ordering::SeqCst);
                }
            },
            |_, ()| done += 1,
        );
        assert_eq!(done, 2);
    }
}
