//! The one thread pool of the stages (bench runs, tune trials, nvcc compiles): one thread
//! per slot (a GPU, or an nvcc process), each taking the next item when it is free, so N
//! GPUs stay busy with N trials at once. Items may be given up front or arrive while the
//! slots work ([`run_streamed`]). Results come back to the calling thread as they finish
//! (for live progress and incremental memo writes).

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
    sink: impl FnMut(usize, R),
) where
    T: Sync,
    R: Send,
{
    let (tx, rx) = mpsc::channel();
    for item in items.iter().enumerate() {
        tx.send(item).expect("the receiver is here");
    }
    drop(tx);
    run_streamed(slots, rx, cancel, work, sink);
}

/// [`run_on_slots`] for items that arrive while the slots work (the tune stage's compiled
/// candidates, measured as each compile finishes): `(index, item)` from `items` until its
/// senders are gone.
pub fn run_streamed<T, R>(
    slots: u32,
    items: mpsc::Receiver<(usize, T)>,
    cancel: &AtomicBool,
    work: impl Fn(u32, T) -> R + Sync,
    mut sink: impl FnMut(usize, R),
) where
    T: Send,
    R: Send,
{
    let items = Mutex::new(items);
    let (tx, rx) = mpsc::channel::<(usize, R)>();
    std::thread::scope(|scope| {
        for slot in 0..slots.max(1) {
            let (tx, items, work) = (tx.clone(), &items, &work);
            scope.spawn(move || loop {
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                let next = items.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok((i, item)) = next else { return };
                // The wait for an item may have outlasted an interrupt.
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                if tx.send((i, work(slot, item))).is_err() {
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

    #[test]
    fn streamed_items_are_worked_on_as_they_arrive() {
        let (tx, rx) = mpsc::channel();
        let mut got = Vec::new();
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..5usize {
                    tx.send((i, i * 3)).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
            run_streamed(
                2,
                rx,
                &AtomicBool::new(false),
                |_, x| x + 1,
                |i, r| got.push((i, r)),
            );
        });
        got.sort();
        assert_eq!(got, (0..5).map(|i| (i, i * 3 + 1)).collect::<Vec<_>>());
    }
}
