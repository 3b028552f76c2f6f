//! A trial's ancestry: the chain of first parents back to a trial with none (a random
//! sample of the define space, or a proposal that named no parent).

use super::store::short;
use crate::{search::Candidate, search::Trial};

/// How artifacts and briefs name where a trial came from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Origin {
    /// The short digest of its proposed source; `None`: the kernel's own.
    pub source: Option<String>,
    /// The short digest of the patch a proposer sent to make it.
    pub patch: Option<String>,
    /// The proposer's note (empty unless a proposer made it).
    pub note: String,
}

impl Origin {
    pub fn of(c: &Candidate) -> Origin {
        let proposal = c.proposal.as_ref();
        Origin {
            source: c.source.as_ref().map(|s| short(&s.digest).to_string()),
            patch: proposal
                .and_then(|p| p.patch.as_deref())
                .map(|p| short(p).to_string()),
            note: proposal.map(|p| p.note.clone()).unwrap_or_default(),
        }
    }
}

/// Indices into `trials` (trial order, as the search keeps them) of the ancestors of
/// `trials[index]` through first parents, oldest first, ending with `index` itself.
pub fn lineage(trials: &[Trial], index: usize) -> Vec<usize> {
    let mut chain = vec![index];
    let mut at = index;
    while let Some(&parent) = trials[at].candidate.parents.first() {
        let Some(p) = position(trials, parent).filter(|&p| p < at) else {
            break;
        };
        chain.push(p);
        at = p;
    }
    chain.reverse();
    chain
}

/// The index of trial number `trial` in `trials`.
pub fn position(trials: &[Trial], trial: u32) -> Option<usize> {
    trials
        .binary_search_by_key(&trial, |t| t.candidate.trial)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memo::Evaluation;
    use crate::search::Candidate;

    fn trial(n: u32, parents: &[u32]) -> Trial {
        Trial {
            candidate: Candidate {
                trial: n,
                generation: 0,
                config: Default::default(),
                parents: parents.to_vec(),
                source: None,
                proposal: None,
            },
            evaluation: Evaluation::ok(1.0),
            cached: false,
            finished: String::new(),
        }
    }

    #[test]
    fn follows_first_parents_back_to_a_root() {
        let trials = [
            trial(1, &[]),
            trial(2, &[]),
            trial(3, &[2, 1]),
            trial(4, &[3]),
            trial(5, &[1]),
        ];
        assert_eq!(lineage(&trials, 3), [1, 2, 3]);
        assert_eq!(lineage(&trials, 4), [0, 4]);
        assert_eq!(lineage(&trials, 0), [0]);
        assert_eq!(position(&trials, 4), Some(3));
        assert_eq!(position(&trials, 9), None);
    }
}
