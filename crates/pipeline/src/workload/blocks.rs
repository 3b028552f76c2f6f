//! Per-block quantization of a row-major tensor: blocks tile its trailing dimensions, one
//! scale per block. Both directions work row by row (a row: the last dimension) on all
//! cores; every element's result depends on its own value and its block's scale only, so
//! the bytes are the same however the rows are split.

use super::dtype::Dtype;
use rayon::prelude::*;

/// Rows per piece of parallel work, at least (a row of attention's K is 64 elements).
const MIN_ROWS: usize = 1 << 10;

/// The blocks of a row-major tensor of `extents`, `block` in its trailing dimensions,
/// numbered row-major over the grid of blocks.
pub(super) struct BlockGrid {
    /// The tensor's extents and each dimension's block extent (1 in the leading ones).
    extents: Vec<usize>,
    full: Vec<usize>,
    /// Blocks along each dimension.
    per_dim: Vec<usize>,
}

impl BlockGrid {
    pub(super) fn new(extents: &[usize], block: &[usize]) -> BlockGrid {
        let lead = extents.len() - block.len();
        let full: Vec<usize> = std::iter::repeat_n(1, lead)
            .chain(block.iter().copied())
            .collect();
        let per_dim = extents.iter().zip(&full).map(|(e, b)| e / b).collect();
        BlockGrid {
            extents: extents.to_vec(),
            full,
            per_dim,
        }
    }

    pub(super) fn blocks(&self) -> usize {
        self.per_dim.iter().product()
    }

    /// Elements per row (the last extent; 1 for a scalar-shaped tensor).
    pub(super) fn row_len(&self) -> usize {
        self.extents.last().copied().unwrap_or(1).max(1)
    }

    /// The block of element `j` of row `r`.
    pub(super) fn block_of(&self, r: usize, j: usize) -> usize {
        let Some(last) = self.extents.len().checked_sub(1) else {
            return 0;
        };
        let mut rest = r;
        let mut id = 0;
        let mut stride = 1;
        for d in (0..last).rev() {
            id += (rest % self.extents[d]) / self.full[d] * stride;
            rest /= self.extents[d];
            stride *= self.per_dim[d];
        }
        id * self.per_dim[last] + j / self.full[last]
    }

    /// [`Self::block_of`] for the elements of row `r`, in order.
    fn row(&self, r: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self.block_of(r, 0);
        let width = self.full.last().copied().unwrap_or(1);
        (0..self.row_len()).map(move |j| first + j / width)
    }
}

/// FP8 codes of `x` with one scale per block: `scale = amax / max finite` (1 for an
/// all-zero block), `code = encode(x / scale)`, in f32 as the attention workload always did.
pub(super) fn quantize(dtype: Dtype, x: &[f64], grid: &BlockGrid) -> (Vec<u8>, Vec<f32>) {
    let row = grid.row_len();
    let blocks = grid.blocks();
    // The largest magnitude per block: a max, the same in any order.
    let amax = x
        .par_chunks(row)
        .with_min_len(MIN_ROWS)
        .enumerate()
        .fold(
            || vec![0f32; blocks],
            |mut amax, (r, xs)| {
                for (b, &v) in grid.row(r).zip(xs) {
                    amax[b] = amax[b].max((v as f32).abs());
                }
                amax
            },
        )
        .reduce(
            || vec![0f32; blocks],
            |a, b| a.into_iter().zip(b).map(|(a, b)| a.max(b)).collect(),
        );
    let max = dtype.max_finite() as f32;
    let scales: Vec<f32> = amax
        .into_iter()
        .map(|a| if a > 0.0 { a / max } else { 1.0 })
        .collect();
    let size = dtype.size();
    let mut codes = vec![0u8; x.len() * size];
    codes
        .par_chunks_mut(row * size)
        .with_min_len(MIN_ROWS)
        .zip(x.par_chunks(row))
        .enumerate()
        .for_each(|(r, (out, xs))| {
            for ((b, &v), out) in grid.row(r).zip(xs).zip(out.chunks_exact_mut(size)) {
                dtype.put(f64::from(v as f32 / scales[b]), out);
            }
        });
    (codes, scales)
}

/// The values `codes` stand for: each decoded and multiplied by its block's scale, in f32.
pub(super) fn dequantize(dtype: Dtype, codes: &[u8], scales: &[f64], grid: &BlockGrid) -> Vec<f64> {
    let row = grid.row_len();
    let size = dtype.size();
    let mut values = vec![0f64; codes.len() / size];
    values
        .par_chunks_mut(row)
        .with_min_len(MIN_ROWS)
        .zip(codes.par_chunks(row * size))
        .enumerate()
        .for_each(|(r, (out, bytes))| {
            for ((b, code), v) in grid.row(r).zip(bytes.chunks_exact(size)).zip(out) {
                *v = f64::from(dtype.get(code) as f32 * scales[b] as f32);
            }
        });
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(extents: &[usize], block: &[usize]) -> Vec<usize> {
        let grid = BlockGrid::new(extents, block);
        let rows = extents.iter().product::<usize>() / grid.row_len();
        (0..rows)
            .flat_map(|r| grid.row(r).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn blocks_tile_the_trailing_dimensions() {
        assert_eq!(ids(&[2, 4], &[2]), [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(ids(&[2, 2, 2], &[2, 1]), [0, 1, 0, 1, 2, 3, 2, 3]);
        // Attention's K: one block per (batch, head), over [S, D].
        let k = ids(&[2, 3, 4, 2], &[4, 2]);
        assert_eq!(k, (0..6).flat_map(|h| [h; 8]).collect::<Vec<_>>());
        let g = BlockGrid::new(&[2, 3, 4, 2], &[2, 1]);
        assert_eq!(g.blocks(), 2 * 3 * 2 * 2);
        // Row 5 is (0, 1, 1): block row (0, 1, 0) of the grid, then column 1.
        assert_eq!(g.block_of(5, 1), 5);
        let (codes, scales) = quantize(
            Dtype::E5m2,
            &[1.0, -2.0, 0.0, 0.0],
            &BlockGrid::new(&[2, 2], &[2]),
        );
        assert_eq!(scales, [2.0 / 57344.0, 1.0]);
        assert_eq!(Dtype::E5m2.decode(&codes), [28672.0, -57344.0, 0.0, 0.0]);
    }

    #[test]
    fn dequantizing_scales_each_block_by_its_own_scale() {
        let grid = BlockGrid::new(&[2, 2], &[2]);
        let (codes, scales) = quantize(Dtype::E4m3, &[1.0, -0.5, 3.0, 0.75], &grid);
        let scales: Vec<f64> = scales.into_iter().map(f64::from).collect();
        assert_eq!(
            dequantize(Dtype::E4m3, &codes, &scales, &grid),
            [1.0, -0.5, 3.0, 0.75]
        );
    }
}
