//! Which selected stages may start now. Each stage waits for the selected stages it needs;
//! when the last of them ends it becomes ready. Ready stages come out in run order. A
//! whole run costs O(stages + needs): nothing rescans the stages that still wait.

use repro_pipeline::dag::Dag;
use std::collections::BTreeSet;

pub(super) struct ReadyQueue {
    /// Per stage: how many selected stages it needs have not ended yet.
    waiting: Vec<usize>,
    /// Per stage: its place in the run order.
    position: Vec<usize>,
    selected: Vec<bool>,
    /// (place in the run order, stage) of the stages that may start.
    ready: BTreeSet<(usize, usize)>,
}

impl ReadyQueue {
    pub(super) fn new(dag: &Dag, selected: &[usize]) -> ReadyQueue {
        let n = dag.len();
        let mut is_selected = vec![false; n];
        for &i in selected {
            is_selected[i] = true;
        }
        let mut position = vec![0; n];
        for (at, &i) in dag.topo_order().iter().enumerate() {
            position[i] = at;
        }
        let mut waiting = vec![0; n];
        let mut ready = BTreeSet::new();
        for &i in selected {
            waiting[i] = dag.needs(i).iter().filter(|&&j| is_selected[j]).count();
            if waiting[i] == 0 {
                ready.insert((position[i], i));
            }
        }
        ReadyQueue {
            waiting,
            position,
            selected: is_selected,
            ready,
        }
    }

    /// The first ready stage in run order.
    pub(super) fn pop(&mut self) -> Option<usize> {
        self.ready.pop_first().map(|(_, i)| i)
    }

    /// [`pop`](Self::pop), unless the run was `stopped`.
    pub(super) fn pop_unless(&mut self, stopped: bool) -> Option<usize> {
        if stopped {
            None
        } else {
            self.pop()
        }
    }

    /// Put back a stage [`pop`](Self::pop)ped that could not start yet (no free slot).
    pub(super) fn put_back(&mut self, i: usize) {
        self.ready.insert((self.position[i], i));
    }

    /// Stage `i` ended (however): what waited only for it becomes ready.
    pub(super) fn ended(&mut self, dag: &Dag, i: usize) {
        for &d in dag.dependants(i) {
            if self.selected[d] {
                self.waiting[d] -= 1;
                if self.waiting[d] == 0 {
                    self.ready.insert((self.position[d], d));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_become_ready_in_run_order_when_what_they_need_ended() {
        // a ← b ← d, a ← c; e alone. Selected: all but c.
        let names = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        let dag = Dag::new(names, vec![vec![], vec![0], vec![0], vec![1, 2], vec![]]).unwrap();
        let mut q = ReadyQueue::new(&dag, &[0, 1, 3, 4]);
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.pop(), Some(4));
        assert_eq!(q.pop(), None);
        q.put_back(4);
        q.ended(&dag, 0);
        assert_eq!(q.pop(), Some(1), "b comes before e in run order");
        assert_eq!(q.pop(), Some(4));
        q.ended(&dag, 1);
        assert_eq!(q.pop(), Some(3), "c is not selected: d waits only for b");
        assert_eq!(q.pop(), None);
    }
}
