//! Moving `count` items of a layout between memory and the contiguous bytes
//! a message carries (MPI's pack and unpack), and counting the basic
//! elements in a number of packed bytes (`Get_elements`).

use super::layout::Layout;
use crate::error::{err, ErrorClass, Result};

impl Layout {
    /// The bytes `count` items touch, `[lo, hi)` from the first item's
    /// origin; (0, 0) when they touch none.
    pub fn span(&self, count: u64) -> Result<(i64, i64)> {
        if count == 0 || self.size == 0 {
            return Ok((0, 0));
        }
        let last = i64::try_from(count - 1).ok().and_then(|c| c.checked_mul(self.extent()));
        let last = last.ok_or_else(|| crate::error::Error::new(ErrorClass::Count, format!("{count} items overflow")))?;
        let (a, b) = (self.true_lb, self.true_ub);
        let (c, d) = (a.checked_add(last), b.checked_add(last));
        match (c, d) {
            (Some(c), Some(d)) => Ok((a.min(c), b.max(d))),
            _ => err(ErrorClass::Count, format!("{count} items overflow")),
        }
    }

    /// Check `count` items fit a buffer of `len` bytes whose first byte is
    /// at displacement `origin`; the byte offset of item 0's origin in it.
    fn base(&self, count: u64, len: usize, origin: i64) -> Result<i64> {
        let (lo, hi) = self.span(count)?;
        let base = origin.checked_neg().ok_or_else(|| crate::error::Error::new(ErrorClass::Buffer, "bad origin"))?;
        let (lo2, hi2) = (base.checked_add(lo), base.checked_add(hi));
        match (lo2, hi2) {
            (Some(l), Some(h)) if lo == hi || (l >= 0 && h <= len as i64) => Ok(base),
            _ => err(ErrorClass::Buffer, format!("{count} items of this datatype span bytes {lo}..{hi} but the buffer holds {len}")),
        }
    }

    /// Visit each run of `count` items: (offset in the buffer, length).
    fn runs(&self, count: u64, base: i64, mut f: impl FnMut(usize, usize)) {
        for k in 0..count as i64 {
            let item = base + k * self.extent();
            for b in &self.blocks {
                f((item + b.disp) as usize, b.len as usize);
            }
        }
    }

    /// The contiguous pieces of `count` items: (byte offset from item 0's
    /// origin, length), in typemap order, adjacent ones merged (what a
    /// one-sided operation on a derived target datatype touches).
    pub fn pieces(&self, count: u64) -> Vec<(i64, u64)> {
        let mut out: Vec<(i64, u64)> = Vec::new();
        for k in 0..count as i64 {
            let item = k * self.extent();
            for b in &self.blocks {
                let at = item + b.disp;
                match out.last_mut() {
                    Some((o, n)) if *o + *n as i64 == at => *n += b.len,
                    _ => out.push((at, b.len)),
                }
            }
        }
        out
    }

    /// Pack `count` items of `src` (whose first byte is at displacement
    /// `origin`) into `out`, which holds exactly their bytes.
    pub fn pack(&self, count: u64, src: &[u8], origin: i64, out: &mut [u8]) -> Result<()> {
        let base = self.base(count, src.len(), origin)?;
        if out.len() as u128 != self.size as u128 * count as u128 {
            return err(ErrorClass::Buffer, format!("{count} items of {} bytes do not pack into {} bytes", self.size, out.len()));
        }
        let mut at_out = 0;
        self.runs(count, base, |at, n| {
            out[at_out..at_out + n].copy_from_slice(&src[at..at + n]);
            at_out += n;
        });
        Ok(())
    }

    /// Spread packed bytes over `count` items of `dst` (first byte at
    /// `origin`); a shorter message fills the leading elements. Returns
    /// the bytes taken.
    pub fn unpack(&self, count: u64, packed: &[u8], dst: &mut [u8], origin: i64) -> Result<usize> {
        let base = self.base(count, dst.len(), origin)?;
        if packed.len() as u128 > self.size as u128 * count as u128 {
            return err(ErrorClass::Truncate, format!("{} bytes do not fit in {count} items of {} bytes", packed.len(), self.size));
        }
        let mut taken = 0;
        self.runs(count, base, |at, n| {
            let n = n.min(packed.len() - taken);
            dst[at..at + n].copy_from_slice(&packed[taken..taken + n]);
            taken += n;
        });
        Ok(taken)
    }

    /// How many basic elements `nbytes` packed bytes hold; None when they
    /// end inside one.
    pub fn elements_in(&self, nbytes: u64) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let whole = nbytes / self.size;
        let per_item: u64 = self.elements.iter().map(|&(_, k)| k).sum();
        let mut n = whole.checked_mul(per_item)?;
        let mut left = nbytes % self.size;
        for &(size, k) in &self.elements {
            if left == 0 {
                break;
            }
            let fits = (left / size).min(k);
            n += fits;
            left -= fits * size;
            if fits < k {
                break;
            }
        }
        (left == 0).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Layout {
        Layout::named(&[(0, 4)], 4, 4).unwrap()
    }

    #[test]
    fn pack_and_unpack_a_strided_column() {
        let col = int().vector(3, 1, 3).unwrap().resized(0, 4).unwrap();
        let m: Vec<u8> = (0u8..36).collect(); // 3x3 ints, bytes 0..36
        let mut out = vec![0u8; 24];
        col.pack(2, &m, 0, &mut out).unwrap();
        let want: Vec<u8> = [0, 12, 24, 4, 16, 28].iter().flat_map(|&s| s..s + 4).collect();
        assert_eq!(out, want);
        let mut back = vec![0u8; 36];
        assert_eq!(col.unpack(2, &out, &mut back, 0).unwrap(), 24);
        for s in [0, 12, 24, 4, 16, 28] {
            assert_eq!(&back[s..s + 4], &m[s..s + 4]);
        }
        assert_eq!(back[8], 0);
    }

    #[test]
    fn pieces_follow_the_typemap_and_merge_what_touches() {
        let col = int().vector(3, 1, 3).unwrap().resized(0, 4).unwrap();
        assert_eq!(col.pieces(2), vec![(0, 4), (12, 4), (24, 4), (4, 4), (16, 4), (28, 4)]);
        // rows of 2 ints, 3 apart: each row one piece; a dense run is one piece
        assert_eq!(int().vector(2, 2, 3).unwrap().pieces(1), vec![(0, 8), (12, 8)]);
        assert_eq!(int().contiguous(5).unwrap().pieces(2), vec![(0, 40)]);
        assert!(int().pieces(0).is_empty());
    }

    #[test]
    fn bounds_and_lengths_are_checked() {
        let v = int().vector(2, 1, 2).unwrap();
        let mut out = [0u8; 8];
        assert_eq!(v.pack(2, &[0u8; 16], 0, &mut [0u8; 16]).unwrap_err().class, ErrorClass::Buffer);
        assert!(v.pack(1, &[0u8; 12], 0, &mut out).is_ok());
        assert!(v.pack(1, &[0u8; 12], 0, &mut [0u8; 4]).is_err());
        let neg = int().vector(2, 1, -3).unwrap();
        assert!(neg.pack(1, &[0u8; 16], 0, &mut out).is_err());
        assert!(neg.pack(1, &[0u8; 16], -12, &mut out).is_ok());
        assert_eq!(int().unpack(1, &[0u8; 8], &mut [0u8; 8], 0).unwrap_err().class, ErrorClass::Truncate);
    }

    #[test]
    fn elements_of_a_pair() {
        let pair = Layout::named(&[(0, 8), (8, 4)], 16, 8).unwrap();
        assert_eq!(pair.elements_in(24), Some(4));
        assert_eq!(pair.elements_in(20), Some(3));
        assert_eq!(pair.elements_in(8), Some(1));
        assert_eq!(pair.elements_in(10), None);
    }
}
