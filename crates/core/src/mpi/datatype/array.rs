//! The array constructors, `subarray` and `darray`, composed from the
//! basic ones exactly as the MPI standard defines them (section 5.1.3/4;
//! the distribution arithmetic is ROMIO's, which MPICH uses).

use super::layout::Layout;
use crate::error::{err, ErrorClass, Result};

pub const ORDER_C: i64 = 56;
pub const ORDER_FORTRAN: i64 = 57;
pub const DISTRIBUTE_BLOCK: i64 = 121;
pub const DISTRIBUTE_CYCLIC: i64 = 122;
pub const DISTRIBUTE_NONE: i64 = 123;
pub const DISTRIBUTE_DFLT_DARG: i64 = -49767;

fn checked(v: Option<i64>) -> Result<i64> {
    v.ok_or_else(|| crate::error::Error::new(ErrorClass::Arg, "array size overflows"))
}

/// Dimensions from the fastest-varying one on, for `order`.
fn fastest_first(ndims: usize, order: i64) -> Result<Vec<usize>> {
    match order {
        ORDER_C => Ok((0..ndims).rev().collect()),
        ORDER_FORTRAN => Ok((0..ndims).collect()),
        _ => err(ErrorClass::Arg, format!("invalid array order {order}")),
    }
}

impl Layout {
    /// A `subsizes` block at `starts` of a `sizes` array of this type.
    pub fn subarray(&self, sizes: &[i64], subsizes: &[i64], starts: &[i64], order: i64) -> Result<Layout> {
        let n = sizes.len();
        if n == 0 || subsizes.len() != n || starts.len() != n {
            return err(ErrorClass::Arg, "sizes, subsizes and starts need one entry per dimension (at least one)");
        }
        for i in 0..n {
            if sizes[i] < 1 || subsizes[i] < 1 || starts[i] < 0 || checked(subsizes[i].checked_add(starts[i]))? > sizes[i] {
                return err(
                    ErrorClass::Arg,
                    format!("dimension {i}: subarray {} at {} does not fit in {}", subsizes[i], starts[i], sizes[i]),
                );
            }
        }
        let extent = self.extent();
        let (mut t, mut stride, mut disp) = (self.clone(), extent, 0i64);
        for (k, &i) in fastest_first(n, order)?.iter().enumerate() {
            t = if k == 0 { t.contiguous(subsizes[i])? } else { t.hvector(subsizes[i], 1, stride)? };
            disp = checked(disp.checked_add(checked(starts[i].checked_mul(stride))?))?;
            stride = checked(stride.checked_mul(sizes[i]))?;
        }
        t.hindexed(&[1], &[disp])?.resized(0, stride)
    }

    /// The part of a `gsizes` array that process `rank` of `size` holds when
    /// it is distributed over a `psizes` process grid (row-major).
    #[allow(clippy::too_many_arguments)]
    pub fn darray(
        &self,
        size: i64,
        rank: i64,
        gsizes: &[i64],
        distribs: &[i64],
        dargs: &[i64],
        psizes: &[i64],
        order: i64,
    ) -> Result<Layout> {
        let n = gsizes.len();
        if n == 0 || distribs.len() != n || dargs.len() != n || psizes.len() != n {
            return err(ErrorClass::Arg, "gsizes, distribs, dargs and psizes need one entry per dimension (at least one)");
        }
        let mut procs = 1i64;
        for &p in psizes {
            if p < 1 {
                return err(ErrorClass::Arg, format!("invalid process grid size {p}"));
            }
            procs = checked(procs.checked_mul(p))?;
        }
        if procs != size || rank < 0 || rank >= size {
            return err(ErrorClass::Arg, format!("rank {rank} of {size} does not fit the process grid {psizes:?}"));
        }
        // this rank's coordinates in the grid, row-major whatever the order
        let mut coords = vec![0i64; n];
        let mut r = rank;
        for i in (0..n).rev() {
            coords[i] = r % psizes[i];
            r /= psizes[i];
        }
        let extent = self.extent();
        let (mut t, mut stride, mut disp) = (self.clone(), extent, 0i64);
        for (k, &i) in fastest_first(n, order)?.iter().enumerate() {
            if gsizes[i] < 1 {
                return err(ErrorClass::Arg, format!("invalid global size {}", gsizes[i]));
            }
            let (next, offset) = match distribs[i] {
                DISTRIBUTE_BLOCK => block(&t, k == 0, gsizes[i], dargs[i], psizes[i], coords[i], stride)?,
                DISTRIBUTE_CYCLIC => cyclic(&t, gsizes[i], dargs[i], psizes[i], coords[i], stride)?,
                DISTRIBUTE_NONE if psizes[i] == 1 => block(&t, k == 0, gsizes[i], DISTRIBUTE_DFLT_DARG, 1, 0, stride)?,
                DISTRIBUTE_NONE => return err(ErrorClass::Arg, "an undistributed dimension needs a process grid size of 1"),
                d => return err(ErrorClass::Arg, format!("invalid distribution {d}")),
            };
            t = next;
            disp = checked(disp.checked_add(checked(offset.checked_mul(stride))?))?;
            stride = checked(stride.checked_mul(gsizes[i]))?;
        }
        t.hindexed(&[1], &[disp])?.resized(0, stride)
    }
}

/// One dimension in blocks: (this rank's part, its first index).
fn block(t: &Layout, innermost: bool, global: i64, darg: i64, procs: i64, coord: i64, stride: i64) -> Result<(Layout, i64)> {
    let blksize = if darg == DISTRIBUTE_DFLT_DARG { (global + procs - 1) / procs } else { darg };
    if blksize < 1 || checked(blksize.checked_mul(procs))? < global {
        return err(ErrorClass::Arg, format!("block size {blksize} over {procs} processes does not cover {global}"));
    }
    let mysize = (global - blksize * coord).clamp(0, blksize);
    let part = if innermost { t.contiguous(mysize)? } else { t.hvector(mysize, 1, stride)? };
    Ok((part, if mysize == 0 { 0 } else { blksize * coord }))
}

/// One dimension cyclically, `darg` items at a time.
fn cyclic(t: &Layout, global: i64, darg: i64, procs: i64, coord: i64, stride: i64) -> Result<(Layout, i64)> {
    let blksize = if darg == DISTRIBUTE_DFLT_DARG { 1 } else { darg };
    if blksize < 1 {
        return err(ErrorClass::Arg, format!("invalid cyclic block size {blksize}"));
    }
    let start = coord * blksize;
    let round = checked(procs.checked_mul(blksize))?;
    let local = if global - 1 < start {
        0
    } else {
        let span = global - start;
        (span / round) * blksize + (span % round).min(blksize)
    };
    let (count, rem) = (local / blksize, local % blksize);
    let step = checked(round.checked_mul(stride))?;
    let mut part = t.hvector(count, blksize, step)?;
    if rem > 0 {
        let tail_at = checked(count.checked_mul(step))?;
        part = Layout::structure(&[1, rem], &[0, tail_at], &[&part, t])?;
    }
    Ok((part, if local == 0 { 0 } else { start }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Layout {
        Layout::named(&[(0, 4)], 4, 4).unwrap()
    }

    #[test]
    fn subarray_bounds_as_mpich() {
        let t = int().subarray(&[4, 4], &[2, 2], &[1, 1], ORDER_C).unwrap();
        assert_eq!((t.lb, t.extent(), t.true_lb, t.true_ub - t.true_lb), (0, 64, 20, 24));
        assert_eq!(t.size, 16);
    }

    #[test]
    fn darray_block_and_cyclic() {
        // 8 ints over 4 processes in blocks: rank 1 holds items 2 and 3
        let t = int().darray(4, 1, &[8], &[DISTRIBUTE_BLOCK], &[DISTRIBUTE_DFLT_DARG], &[4], ORDER_C).unwrap();
        assert_eq!((t.lb, t.extent(), t.true_lb, t.true_ub - t.true_lb), (0, 32, 8, 8));
        // cyclically: rank 1 holds items 1 and 5
        let c = int().darray(4, 1, &[8], &[DISTRIBUTE_CYCLIC], &[DISTRIBUTE_DFLT_DARG], &[4], ORDER_C).unwrap();
        assert_eq!(c.blocks.iter().map(|b| (b.disp, b.len)).collect::<Vec<_>>(), vec![(4, 4), (20, 4)]);
        assert!(int().darray(3, 0, &[8], &[DISTRIBUTE_BLOCK], &[DISTRIBUTE_DFLT_DARG], &[4], ORDER_C).is_err());
    }
}
