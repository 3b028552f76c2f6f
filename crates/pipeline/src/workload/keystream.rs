//! A ChaCha20 generator whose keystream is computed ahead, on all cores: it yields the same
//! words as the generator itself, in the same order, so whatever samples from it draws
//! exactly what it would have drawn from the generator. ChaCha's blocks are independent
//! (any word position can be computed directly), but a sampler such as the normal
//! distribution's ziggurat takes a varying number of words per value, so the sampling stays
//! on one core while the keystream it reads (most of the work) does not.

use rand::{Rng, RngCore};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// Words per piece of parallel keystream work, and at most per window (4 MiB, reused).
const CHUNK_WORDS: usize = 1 << 14;
const MAX_WINDOW_WORDS: usize = 1 << 20;

/// `rng`'s keystream, a window of words at a time, each window computed on all cores.
pub(super) struct ReadAhead {
    window: Vec<u32>,
    next: usize,
    /// The generator, positioned after the window's last word.
    rng: ChaCha20Rng,
}

impl ReadAhead {
    /// Read `rng` from its current position, in windows sized for about `words` words.
    pub(super) fn new(rng: ChaCha20Rng, words: usize) -> ReadAhead {
        let len = words.clamp(CHUNK_WORDS, MAX_WINDOW_WORDS);
        ReadAhead {
            window: vec![0; len],
            next: len,
            rng,
        }
    }

    /// For `n` standard normals: the ziggurat takes one u64, two words, per try, and
    /// retries about 1.2 % of the time.
    pub(super) fn for_normals(rng: ChaCha20Rng, n: usize) -> ReadAhead {
        ReadAhead::new(rng, 2 * n + n / 32)
    }

    /// The next window of words, and the generator moved past it.
    fn refill(&mut self) {
        let start = self.rng.get_word_pos();
        let rng = &self.rng;
        self.window
            .par_chunks_mut(CHUNK_WORDS)
            .enumerate()
            .for_each(|(i, chunk)| {
                let mut piece = rng.clone();
                piece.set_word_pos(start + (i * CHUNK_WORDS) as u128);
                piece.fill(chunk);
            });
        self.rng.set_word_pos(start + self.window.len() as u128);
        self.next = 0;
    }
}

impl RngCore for ReadAhead {
    fn next_u32(&mut self) -> u32 {
        if self.next == self.window.len() {
            self.refill();
        }
        self.next += 1;
        self.window[self.next - 1]
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::StandardNormal;

    fn generator() -> ChaCha20Rng {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        rng.set_stream(3);
        rng.next_u32(); // start mid-block, at an odd word
        rng
    }

    #[test]
    fn yields_the_generators_words_window_after_window() {
        let mut plain = generator();
        // Windows that end mid-block, read across three of them.
        let mut ahead = ReadAhead::new(generator(), CHUNK_WORDS + 37);
        for i in 0..3 * CHUNK_WORDS + 200 {
            assert_eq!(ahead.next_u32(), plain.next_u32(), "word {i}");
        }
        assert_eq!(ahead.next_u64(), plain.next_u64());
        let (mut a, mut b) = ([0u8; 7], [0u8; 7]);
        ahead.fill_bytes(&mut a);
        plain.fill_bytes(&mut b);
        assert_eq!((a, ahead.next_u32()), (b, plain.next_u32()));
    }

    #[test]
    fn samples_the_same_normals_and_uniforms() {
        let n = 50_000;
        let mut plain = generator();
        let mut ahead = ReadAhead::for_normals(generator(), n);
        for _ in 0..n {
            let x: f64 = plain.sample(StandardNormal);
            assert_eq!(
                x.to_bits(),
                ahead.sample::<f64, _>(StandardNormal).to_bits()
            );
        }
        for _ in 0..1000 {
            assert_eq!(plain.random_range(0.5..1.5), ahead.random_range(0.5..1.5));
            assert_eq!(
                plain.random_range(3..64usize),
                ahead.random_range(3..64usize)
            );
        }
    }
}
