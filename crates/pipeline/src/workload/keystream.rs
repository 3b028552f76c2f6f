//! Standard normals from a ChaCha20 generator, drawn on all cores and exactly as
//! `(0..n).map(|_| rng.sample(StandardNormal))` draws them, the generator left where that
//! leaves it.
//!
//! ChaCha's keystream can be computed from any word position, so it is computed in
//! parallel pieces. The ziggurat sampler then takes a varying number of words per value
//! (two for most, more for the ~1 % it retries), so a piece of the keystream cannot know
//! where its first value starts. Each piece is decoded from its own first word as if a
//! value started there, recording where each of its values starts; then, piece by piece in
//! order, the true position (where the previous piece's last value ended) is looked up among
//! those starts. Decoding from a position always gives the same values, so from a recorded
//! start on the piece's values are the true ones; where the true position falls inside a
//! speculative value, values are drawn one by one from it until the two meet again.

use rand::{Rng, RngCore};
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// Keystream words per piece of parallel work.
const PIECE_WORDS: usize = 1 << 16;
/// Below this many values, or with fewer cores than this, one core draws them: the
/// parallel draw does about twice the work (the keystream kept in memory, the values
/// copied into place), which two cores do not win back.
const MIN_PARALLEL: usize = 1 << 14;
const MIN_CORES: usize = 4;

/// `n` standard normals, drawn from `rng` as one core would, `rng` moved past them.
pub(super) fn normals(rng: &mut ChaCha20Rng, n: usize) -> Vec<f64> {
    if n < MIN_PARALLEL || rayon::current_num_threads() < MIN_CORES {
        return (0..n).map(|_| rng.sample(StandardNormal)).collect();
    }
    normals_ahead(rng, n, words_for(n))
}

/// About 2.044 words per value (two per try, and the retries), and some to spare: any
/// past these are read from the generator itself.
fn words_for(n: usize) -> usize {
    2 * n + n / 16
}

/// [`normals`] with `ahead` words of keystream computed in parallel.
fn normals_ahead(rng: &mut ChaCha20Rng, n: usize, ahead: usize) -> Vec<f64> {
    let words = keystream(rng, ahead);
    let stream = Stream {
        words: &words,
        rng: &*rng,
    };
    let pieces: Vec<Piece> = (0..words.len().div_ceil(PIECE_WORDS))
        .into_par_iter()
        .map(|k| {
            Piece::decode(
                &stream,
                k * PIECE_WORDS,
                ((k + 1) * PIECE_WORDS).min(words.len()),
            )
        })
        .collect();
    // Stitch the pieces in order: which of their values are the true ones.
    let mut parts: Vec<&[f64]> = Vec::new();
    let mut caught_up: Vec<Vec<f64>> = Vec::new();
    let (mut pos, mut have) = (0, 0);
    for piece in &pieces {
        let mut own = Vec::new();
        let (next, taken) = piece.join(&stream, pos, n - have, &mut own);
        (pos, have) = (next, have + own.len() + taken.len());
        caught_up.push(own);
        parts.push(taken);
    }
    let mut rest = Vec::new();
    while have + rest.len() < n {
        let (value, next) = stream.value_at(pos);
        rest.push(value);
        pos = next;
    }
    let start = rng.get_word_pos();
    rng.set_word_pos(start + pos as u128);
    // Copy them into place on all cores.
    let mut out = vec![0f64; n];
    let mut slots: Vec<(&mut [f64], &[f64])> = Vec::new();
    let mut free = out.as_mut_slice();
    let sources = caught_up
        .iter()
        .zip(&parts)
        .flat_map(|(own, taken)| [own.as_slice(), *taken]);
    for source in sources.chain([rest.as_slice()]) {
        let (slot, after) = free.split_at_mut(source.len());
        slots.push((slot, source));
        free = after;
    }
    slots
        .into_par_iter()
        .for_each(|(slot, source)| slot.copy_from_slice(source));
    out
}

/// `count` words of `rng`'s keystream from its position, computed in parallel pieces.
fn keystream(rng: &ChaCha20Rng, count: usize) -> Vec<u32> {
    let start = rng.get_word_pos();
    let mut words = vec![0u32; count];
    words
        .par_chunks_mut(PIECE_WORDS)
        .enumerate()
        .for_each(|(i, chunk)| {
            let mut piece = rng.clone();
            piece.set_word_pos(start + (i * PIECE_WORDS) as u128);
            piece.fill(chunk);
        });
    words
}

/// The keystream computed ahead, and the generator (at its start) for the words past it.
struct Stream<'a> {
    words: &'a [u32],
    rng: &'a ChaCha20Rng,
}

impl Stream<'_> {
    /// The value that starts at word `pos`, and where the next one starts.
    fn value_at(&self, pos: usize) -> (f64, usize) {
        let mut reader = Reader {
            stream: self,
            pos,
            past: None,
        };
        let value = reader.sample(StandardNormal);
        (value, reader.pos)
    }
}

/// Reads the stream from a word position, as the generator would from there.
struct Reader<'s, 'a> {
    stream: &'s Stream<'a>,
    pos: usize,
    /// The generator, moved to the first word read past the stream, once a value reads
    /// there.
    past: Option<ChaCha20Rng>,
}

impl RngCore for Reader<'_, '_> {
    fn next_u32(&mut self) -> u32 {
        let word = match self.stream.words.get(self.pos) {
            Some(&w) => w,
            None => {
                let pos = self.pos;
                let rng = self.past.get_or_insert_with(|| {
                    let mut rng = self.stream.rng.clone();
                    rng.set_word_pos(rng.get_word_pos() + pos as u128);
                    rng
                });
                rng.next_u32()
            }
        };
        self.pos += 1;
        word
    }

    /// Two words, the first the low half, as `ChaCha20Rng` reads them.
    fn next_u64(&mut self) -> u64 {
        let low = self.next_u32();
        u64::from(self.next_u32()) << 32 | u64::from(low)
    }

    /// Whole words, little-endian, a last partial one consumed whole, as `ChaCha20Rng`
    /// fills bytes.
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(4) {
            let word = self.next_u32().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// The values decoded from one piece's first word on, as if one started there: those that
/// start inside the piece, with their start positions.
struct Piece {
    starts: Vec<usize>,
    values: Vec<f64>,
    /// Where the value after the last one starts (the piece's end or past it).
    end: usize,
}

impl Piece {
    fn decode(stream: &Stream, from: usize, to: usize) -> Piece {
        let mut piece = Piece {
            starts: Vec::with_capacity((to - from) / 2),
            values: Vec::with_capacity((to - from) / 2),
            end: from,
        };
        while piece.end < to {
            let (value, next) = stream.value_at(piece.end);
            piece.starts.push(piece.end);
            piece.values.push(value);
            piece.end = next;
        }
        piece
    }

    /// The true values that start in this piece, the true position being `pos`, `wanted`
    /// at most: those drawn one by one to catch up go to `own`, then the piece's own values
    /// from where the two meet. Returns where the value after the last one starts, and the
    /// piece's values taken.
    fn join(
        &self,
        stream: &Stream,
        mut pos: usize,
        wanted: usize,
        own: &mut Vec<f64>,
    ) -> (usize, &[f64]) {
        loop {
            if own.len() == wanted || pos >= self.end {
                return (pos, &[]);
            }
            match self.starts.binary_search(&pos) {
                Ok(j) => {
                    let take = (wanted - own.len()).min(self.values.len() - j);
                    let next = self.starts.get(j + take).copied().unwrap_or(self.end);
                    return (next, &self.values[j..j + take]);
                }
                // Inside a speculative value: one true value, then look again.
                Err(_) => {
                    let (value, next) = stream.value_at(pos);
                    own.push(value);
                    pos = next;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn generator(seed: u64) -> ChaCha20Rng {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        rng.set_stream(3);
        rng.next_u32(); // start mid-block, at an odd word
        rng
    }

    #[test]
    fn draws_what_one_core_draws_and_leaves_the_generator_there() {
        // Several seeds: some piece boundaries fall inside a retried value.
        for seed in 0..4 {
            for n in [10, MIN_PARALLEL, 3 * PIECE_WORDS + 17] {
                let mut plain = generator(seed);
                let want: Vec<u64> = (0..n)
                    .map(|_| plain.sample::<f64, _>(StandardNormal).to_bits())
                    .collect();
                let after = plain.next_u64();
                // As `normals` draws on this machine, in parallel with the keystream computed
                // ahead as sized, and with too short a keystream for all the values.
                for ahead in [None, Some(words_for(n)), Some(n)] {
                    let mut rng = generator(seed);
                    let got = match ahead {
                        None => normals(&mut rng, n),
                        Some(words) => normals_ahead(&mut rng, n, words),
                    };
                    let got: Vec<u64> = got.iter().map(|x| x.to_bits()).collect();
                    assert!(got == want, "seed {seed}, {n} values, {ahead:?} ahead");
                    assert_eq!(rng.next_u64(), after, "seed {seed}, {n} values, {ahead:?}");
                }
            }
        }
    }

    #[test]
    fn a_true_position_inside_a_speculative_value_is_caught_up() {
        let rng = generator(9);
        let words = keystream(&rng, 4 * PIECE_WORDS);
        let stream = Stream {
            words: &words,
            rng: &rng,
        };
        let piece = Piece::decode(&stream, 0, words.len());
        // A retried value spans more than two words: start one word into it.
        let k = (0..piece.starts.len() - 1)
            .find(|&k| piece.starts[k + 1] - piece.starts[k] > 2)
            .expect("some value is retried in 2^17 words");
        let inside = piece.starts[k] + 1;
        let (mut out, mut pos) = (Vec::new(), inside);
        let mut reference = Vec::new();
        while reference.len() < 100 {
            let (v, next) = stream.value_at(pos);
            reference.push(v);
            pos = next;
        }
        let n = reference.len();
        let (_, taken) = piece.join(&stream, inside, n, &mut out);
        out.extend_from_slice(taken);
        assert_eq!(out, reference);
    }
}
