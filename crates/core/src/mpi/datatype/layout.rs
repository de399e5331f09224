//! A datatype's layout: which bytes of memory one item of the type covers,
//! in the order MPI sends them, and its bounds, built by MPI's type
//! constructors. Pure arithmetic; every displacement and count is checked.

use crate::error::{err, ErrorClass, Result};

/// `len` bytes at displacement `disp` from the start of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub disp: i64,
    pub len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// One item's bytes in typemap order, adjacent runs merged.
    pub(crate) blocks: Vec<Block>,
    /// Its basic elements in order: (element size, how many), equal sizes merged.
    pub(crate) elements: Vec<(u64, u64)>,
    pub size: u64,
    pub lb: i64,
    pub ub: i64,
    pub true_lb: i64,
    pub true_ub: i64,
    /// The largest alignment of its basic elements (a struct's extent is
    /// rounded up to it, as C pads a struct).
    pub align: u64,
    /// Bounds set by `resized`: kept exact, never padded.
    pub resized: bool,
}

fn overflow() -> crate::error::Error {
    crate::error::Error::new(ErrorClass::Arg, "datatype displacement or size overflows")
}

fn add(a: i64, b: i64) -> Result<i64> {
    a.checked_add(b).ok_or_else(overflow)
}

fn mul(a: i64, b: i64) -> Result<i64> {
    a.checked_mul(b).ok_or_else(overflow)
}

fn count(n: i64, what: &str) -> Result<i64> {
    if n < 0 {
        return err(ErrorClass::Count, format!("negative {what} {n}"));
    }
    Ok(n)
}

/// Builds a layout from copies of children placed at displacements.
struct Builder {
    out: Layout,
    any: bool,
    limit: usize,
}

impl Builder {
    fn new() -> Builder {
        let out =
            Layout { blocks: Vec::new(), elements: Vec::new(), size: 0, lb: 0, ub: 0, true_lb: 0, true_ub: 0, align: 1, resized: false };
        Builder { out, any: false, limit: crate::config::datatype_max_blocks() }
    }

    /// Append `n` copies of `child`, `stride` bytes apart, from `disp`.
    fn place(&mut self, child: &Layout, disp: i64, n: i64, stride: i64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let last = add(disp, mul(n - 1, stride)?)?;
        let (first_lb, last_lb) = (add(disp, child.lb)?, add(last, child.lb)?);
        let (first_ub, last_ub) = (add(disp, child.ub)?, add(last, child.ub)?);
        let (lb, ub) = (first_lb.min(last_lb), first_ub.max(last_ub));
        let o = &mut self.out;
        if self.any {
            o.lb = o.lb.min(lb);
            o.ub = o.ub.max(ub);
        } else {
            (o.lb, o.ub) = (lb, ub);
        }
        o.align = o.align.max(child.align);
        o.resized |= child.resized;
        if child.size > 0 {
            let (tl, tu) = (add(disp, child.true_lb)?, add(disp, child.true_ub)?);
            let (tl2, tu2) = (add(last, child.true_lb)?, add(last, child.true_ub)?);
            let (tl, tu) = (tl.min(tl2), tu.max(tu2));
            if o.size == 0 {
                (o.true_lb, o.true_ub) = (tl, tu);
            } else {
                (o.true_lb, o.true_ub) = (o.true_lb.min(tl), o.true_ub.max(tu));
            }
            let grow = child.size.checked_mul(n as u64).ok_or_else(overflow)?;
            o.size = o.size.checked_add(grow).ok_or_else(overflow)?;
            if let ([b], [(s, k)]) = (&child.blocks[..], &child.elements[..]) {
                if b.len as i64 == stride {
                    // copies side by side: one run (a contiguous type of a million bytes is one block)
                    let len = b.len.checked_mul(n as u64).ok_or_else(overflow)?;
                    push_block(&mut o.blocks, Block { disp: add(disp, b.disp)?, len }, self.limit)?;
                    push_elements(&mut o.elements, *s, k.checked_mul(n as u64).ok_or_else(overflow)?, self.limit)?;
                    self.any = true;
                    return Ok(());
                }
            }
            for i in 0..n {
                let at = add(disp, mul(i, stride)?)?;
                for b in &child.blocks {
                    push_block(&mut o.blocks, Block { disp: add(at, b.disp)?, len: b.len }, self.limit)?;
                }
                for &(s, k) in &child.elements {
                    push_elements(&mut o.elements, s, k, self.limit)?;
                }
            }
        }
        self.any = true;
        Ok(())
    }

    fn finish(self) -> Layout {
        self.out
    }
}

fn push_block(blocks: &mut Vec<Block>, b: Block, limit: usize) -> Result<()> {
    if b.len == 0 {
        return Ok(());
    }
    if let Some(last) = blocks.last_mut() {
        if last.disp.checked_add(last.len as i64) == Some(b.disp) {
            last.len += b.len;
            return Ok(());
        }
    }
    if blocks.len() >= limit {
        return err(ErrorClass::Type, format!("datatype has more than {limit} separate blocks (MPIWS_DATATYPE_MAX_BLOCKS)"));
    }
    blocks.push(b);
    Ok(())
}

fn push_elements(elements: &mut Vec<(u64, u64)>, size: u64, n: u64, limit: usize) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    if let Some((s, k)) = elements.last_mut() {
        if *s == size {
            *k = k.checked_add(n).ok_or_else(overflow)?;
            return Ok(());
        }
    }
    if elements.len() >= limit {
        return err(ErrorClass::Type, format!("datatype has more than {limit} runs of elements (MPIWS_DATATYPE_MAX_BLOCKS)"));
    }
    elements.push((size, n));
    Ok(())
}

impl Layout {
    /// A predefined type: its basic elements `(displacement, size)` in order
    /// (one, or a value and an index for the pair types), its extent and
    /// alignment.
    pub fn named(parts: &[(i64, u64)], extent: i64, align: u64) -> Result<Layout> {
        let mut b = Builder::new();
        for &(disp, size) in parts {
            let one = Layout {
                blocks: vec![Block { disp: 0, len: size }],
                elements: vec![(size, 1)],
                size,
                lb: 0,
                ub: size as i64,
                true_lb: 0,
                true_ub: size as i64,
                align: 1,
                resized: false,
            };
            b.place(&one, disp, 1, 0)?;
        }
        let mut out = b.finish();
        (out.lb, out.ub, out.align) = (0, extent, align.max(1));
        Ok(out)
    }

    pub fn extent(&self) -> i64 {
        self.ub - self.lb
    }

    pub fn contiguous(&self, n: i64) -> Result<Layout> {
        let mut b = Builder::new();
        b.place(self, 0, count(n, "count")?, self.extent())?;
        Ok(b.finish())
    }

    pub fn vector(&self, n: i64, blocklength: i64, stride: i64) -> Result<Layout> {
        self.hvector(n, blocklength, mul(stride, self.extent())?)
    }

    /// `n` blocks of `blocklength` items, `stride` bytes apart.
    pub fn hvector(&self, n: i64, blocklength: i64, stride: i64) -> Result<Layout> {
        let (n, blocklength) = (count(n, "count")?, count(blocklength, "block length")?);
        let mut b = Builder::new();
        for i in 0..n {
            b.place(self, mul(i, stride)?, blocklength, self.extent())?;
        }
        Ok(b.finish())
    }

    /// Blocks at displacements counted in items of this type.
    pub fn indexed(&self, blocklengths: &[i64], displacements: &[i64]) -> Result<Layout> {
        let bytes = displacements.iter().map(|&d| mul(d, self.extent())).collect::<Result<Vec<_>>>()?;
        self.hindexed(blocklengths, &bytes)
    }

    /// Blocks at displacements in bytes.
    pub fn hindexed(&self, blocklengths: &[i64], displacements: &[i64]) -> Result<Layout> {
        if blocklengths.len() != displacements.len() {
            return err(ErrorClass::Arg, "block lengths and displacements differ in number");
        }
        let mut b = Builder::new();
        for (&n, &d) in blocklengths.iter().zip(displacements) {
            b.place(self, d, count(n, "block length")?, self.extent())?;
        }
        Ok(b.finish())
    }

    /// Blocks of several types at displacements in bytes; the extent is
    /// padded to the largest alignment (unless a part was resized).
    pub fn structure(blocklengths: &[i64], displacements: &[i64], types: &[&Layout]) -> Result<Layout> {
        if blocklengths.len() != displacements.len() || blocklengths.len() != types.len() {
            return err(ErrorClass::Arg, "block lengths, displacements and datatypes differ in number");
        }
        let mut b = Builder::new();
        for ((&n, &d), t) in blocklengths.iter().zip(displacements).zip(types) {
            b.place(t, d, count(n, "block length")?, t.extent())?;
        }
        let mut out = b.finish();
        let align = out.align as i64;
        let rest = out.extent().rem_euclid(align);
        if !out.resized && rest != 0 {
            out.ub = add(out.ub, align - rest)?;
        }
        Ok(out)
    }

    /// The same bytes with bounds `lb`, `lb + extent`.
    pub fn resized(&self, lb: i64, extent: i64) -> Result<Layout> {
        let mut out = self.clone();
        (out.lb, out.ub, out.resized) = (lb, add(lb, extent)?, true);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Layout {
        Layout::named(&[(0, 4)], 4, 4).unwrap()
    }

    fn bounds(t: &Layout) -> (i64, i64, i64, i64) {
        (t.lb, t.extent(), t.true_lb, t.true_ub - t.true_lb)
    }

    #[test]
    fn bounds_as_mpich_gives_them() {
        let double = Layout::named(&[(0, 8)], 8, 8).unwrap();
        let char_ = Layout::named(&[(0, 1)], 1, 1).unwrap();
        let s = Layout::structure(&[1, 1], &[0, 8], &[&double, &char_]).unwrap();
        assert_eq!(bounds(&s), (0, 16, 0, 9));
        let v = double.vector(2, 1, 3).unwrap();
        assert_eq!(bounds(&v), (0, 32, 0, 32));
        assert_eq!(v.blocks, vec![Block { disp: 0, len: 8 }, Block { disp: 24, len: 8 }]);
        let neg = int().vector(2, 1, -3).unwrap();
        assert_eq!(bounds(&neg), (-12, 16, -12, 16));
        let r = int().resized(-4, 12).unwrap();
        let s = Layout::structure(&[1, 1], &[0, 100], &[&r, &int()]).unwrap();
        assert_eq!(bounds(&s), (-4, 108, 0, 104));
        let empty = int().contiguous(0).unwrap();
        assert_eq!((bounds(&empty), empty.size), ((0, 0, 0, 0), 0));
        let h = int().hindexed(&[0, 1], &[100, 8]).unwrap();
        assert_eq!(bounds(&h), (8, 4, 8, 4));
    }

    #[test]
    fn adjacent_blocks_merge_and_elements_count() {
        let c = int().contiguous(5).unwrap();
        assert_eq!(c.blocks, vec![Block { disp: 0, len: 20 }]);
        assert_eq!(c.elements, vec![(4, 5)]);
        let pair = Layout::named(&[(0, 8), (8, 4)], 16, 8).unwrap();
        let p3 = pair.contiguous(3).unwrap();
        assert_eq!(p3.size, 36);
        assert_eq!(p3.elements.len(), 6);
    }

    #[test]
    fn a_huge_contiguous_type_is_one_block() {
        let byte = Layout::named(&[(0, 1)], 1, 1).unwrap();
        let big = byte.contiguous(i32::MAX as i64 + 1000).unwrap();
        assert_eq!((big.blocks.len(), big.elements.len(), big.size), (1, 1, i32::MAX as u64 + 1000));
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert_eq!(int().contiguous(-1).unwrap_err().class, ErrorClass::Count);
        assert_eq!(int().hvector(2, 1, i64::MAX).unwrap_err().class, ErrorClass::Arg);
        assert_eq!(int().hindexed(&[1], &[]).unwrap_err().class, ErrorClass::Arg);
    }
}
