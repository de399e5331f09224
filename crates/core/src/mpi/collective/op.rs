//! Builtin reduction operations on typed buffers, applied in the core so a
//! numeric reduce never enters Python. Buffers are raw bytes in the machine's
//! byte order (every rank of a domain must share it, as with MPI's
//! homogeneous mode); elements are read unaligned, since network buffers
//! carry no alignment promise.

use crate::error::{err, Result};
use crate::ErrorClass;

/// An element type, named as numpy's type codes spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    C64,
    C128,
    Bool,
    /// A (value, int32 index) pair for MAXLOC/MINLOC, laid out as the C
    /// struct MPI defines (`MPI_DOUBLE_INT` is {double; int} with padding).
    Pair(Value),
}

/// The value half of a MAXLOC/MINLOC pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    I16,
    I32,
    I64,
    F32,
    F64,
}

impl Dtype {
    /// From a numpy-style name: "i4", "f8", "u1", "b1", "c16", or the pair
    /// names "2i", "fi", "di", "li", "si" (value type, then int).
    pub fn parse(name: &str) -> Result<Dtype> {
        Ok(match name {
            "i1" => Dtype::I8,
            "i2" => Dtype::I16,
            "i4" => Dtype::I32,
            "i8" => Dtype::I64,
            "u1" => Dtype::U8,
            "u2" => Dtype::U16,
            "u4" => Dtype::U32,
            "u8" => Dtype::U64,
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            "c8" => Dtype::C64,
            "c16" => Dtype::C128,
            "b1" => Dtype::Bool,
            "si" => Dtype::Pair(Value::I16),
            "2i" => Dtype::Pair(Value::I32),
            "li" => Dtype::Pair(Value::I64),
            "fi" => Dtype::Pair(Value::F32),
            "di" => Dtype::Pair(Value::F64),
            _ => return err(ErrorClass::Type, format!("no reduction on datatype '{name}'")),
        })
    }

    pub fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 | Dtype::Bool => 1,
            Dtype::I16 | Dtype::U16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 | Dtype::C64 => 8,
            Dtype::C128 => 16,
            Dtype::Pair(v) => match v {
                Value::I16 | Value::I32 | Value::F32 => 8,
                Value::I64 | Value::F64 => 16,
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Sum,
    Prod,
    Max,
    Min,
    Land,
    Lor,
    Lxor,
    Band,
    Bor,
    Bxor,
    MaxLoc,
    MinLoc,
    Replace,
    NoOp,
}

impl OpKind {
    pub fn parse(name: &str) -> Result<OpKind> {
        Ok(match name {
            "sum" => OpKind::Sum,
            "prod" => OpKind::Prod,
            "max" => OpKind::Max,
            "min" => OpKind::Min,
            "land" => OpKind::Land,
            "lor" => OpKind::Lor,
            "lxor" => OpKind::Lxor,
            "band" => OpKind::Band,
            "bor" => OpKind::Bor,
            "bxor" => OpKind::Bxor,
            "maxloc" => OpKind::MaxLoc,
            "minloc" => OpKind::MinLoc,
            "replace" => OpKind::Replace,
            "no_op" => OpKind::NoOp,
            _ => return err(ErrorClass::Op, format!("unknown operation '{name}'")),
        })
    }
}

/// An operation on elements of one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    pub dtype: Dtype,
}

macro_rules! fold {
    ($left:expr, $right:expr, $t:ty, |$a:ident, $b:ident| $e:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (l, r) in $left.chunks_exact(N).zip($right.chunks_exact_mut(N)) {
            let $a = <$t>::from_ne_bytes(l.try_into().unwrap());
            let $b = <$t>::from_ne_bytes((&*r).try_into().unwrap());
            r.copy_from_slice(&($e).to_ne_bytes());
        }
    }};
}

/// The arithmetic and logical ops for one integer type.
macro_rules! int_op {
    ($kind:expr, $l:expr, $r:expr, $t:ty) => {
        match $kind {
            OpKind::Sum => fold!($l, $r, $t, |a, b| a.wrapping_add(b)),
            OpKind::Prod => fold!($l, $r, $t, |a, b| a.wrapping_mul(b)),
            OpKind::Max => fold!($l, $r, $t, |a, b| a.max(b)),
            OpKind::Min => fold!($l, $r, $t, |a, b| a.min(b)),
            OpKind::Land => fold!($l, $r, $t, |a, b| ((a != 0) && (b != 0)) as $t),
            OpKind::Lor => fold!($l, $r, $t, |a, b| ((a != 0) || (b != 0)) as $t),
            OpKind::Lxor => fold!($l, $r, $t, |a, b| ((a != 0) != (b != 0)) as $t),
            OpKind::Band => fold!($l, $r, $t, |a, b| a & b),
            OpKind::Bor => fold!($l, $r, $t, |a, b| a | b),
            OpKind::Bxor => fold!($l, $r, $t, |a, b| a ^ b),
            _ => unreachable!(),
        }
    };
}

macro_rules! float_op {
    ($kind:expr, $l:expr, $r:expr, $t:ty) => {
        match $kind {
            OpKind::Sum => fold!($l, $r, $t, |a, b| a + b),
            OpKind::Prod => fold!($l, $r, $t, |a, b| a * b),
            // MPI leaves NaN to the implementation; numpy propagates it.
            OpKind::Max => fold!($l, $r, $t, |a, b| if a.is_nan() || a > b { a } else { b }),
            OpKind::Min => fold!($l, $r, $t, |a, b| if a.is_nan() || a < b { a } else { b }),
            OpKind::Land => fold!($l, $r, $t, |a, b| ((a != 0.0) && (b != 0.0)) as u8 as $t),
            OpKind::Lor => fold!($l, $r, $t, |a, b| ((a != 0.0) || (b != 0.0)) as u8 as $t),
            OpKind::Lxor => fold!($l, $r, $t, |a, b| ((a != 0.0) != (b != 0.0)) as u8 as $t),
            _ => unreachable!(),
        }
    };
}

/// (value, index) pairs: the greater (MAXLOC) or smaller value wins; on a
/// tie the smaller index, as MPI specifies.
fn loc<T: PartialOrd + Copy>(kind: OpKind, l: &[u8], r: &mut [u8], size: usize, read: fn(&[u8]) -> T, idx_at: usize) {
    let idx = |b: &[u8]| i32::from_ne_bytes(b[idx_at..idx_at + 4].try_into().unwrap());
    for (a, b) in l.chunks_exact(size).zip(r.chunks_exact_mut(size)) {
        let (va, vb) = (read(a), read(b));
        let a_wins = match kind {
            OpKind::MaxLoc => va > vb || (va == vb && idx(a) < idx(b)),
            _ => va < vb || (va == vb && idx(a) < idx(b)),
        };
        if a_wins {
            b.copy_from_slice(a);
        }
    }
}

impl Op {
    pub fn new(kind: &str, dtype: &str) -> Result<Op> {
        let op = Op { kind: OpKind::parse(kind)?, dtype: Dtype::parse(dtype)? };
        op.check()?;
        Ok(op)
    }

    /// Whether MPI defines this op on this type.
    fn check(&self) -> Result<()> {
        use Dtype::*;
        use OpKind::*;
        let ok = match (self.kind, self.dtype) {
            (Replace | NoOp, _) => true,
            (MaxLoc | MinLoc, Pair(_)) => true,
            (_, Pair(_)) | (MaxLoc | MinLoc, _) => false,
            (Band | Bor | Bxor, F32 | F64 | C64 | C128) => false,
            (Max | Min | Land | Lor | Lxor, C64 | C128) => false,
            (Sum | Prod | Max | Min, Bool) => false,
            _ => true,
        };
        if ok {
            Ok(())
        } else {
            err(ErrorClass::Op, format!("operation {:?} is not defined on datatype {:?}", self.kind, self.dtype))
        }
    }

    /// `right = left op right`, element by element: with `left` from lower
    /// ranks, a reduction in rank order.
    pub fn apply(&self, left: &[u8], right: &mut [u8]) -> Result<()> {
        if left.len() != right.len() || !left.len().is_multiple_of(self.dtype.size()) {
            return err(
                ErrorClass::Count,
                format!("reduction operands differ in size ({} and {} bytes of {:?})", left.len(), right.len(), self.dtype),
            );
        }
        let k = self.kind;
        match k {
            OpKind::NoOp => return Ok(()),
            OpKind::Replace => {
                right.copy_from_slice(left);
                return Ok(());
            }
            _ => {}
        }
        match self.dtype {
            Dtype::I8 => int_op!(k, left, right, i8),
            Dtype::I16 => int_op!(k, left, right, i16),
            Dtype::I32 => int_op!(k, left, right, i32),
            Dtype::I64 => int_op!(k, left, right, i64),
            Dtype::U8 => int_op!(k, left, right, u8),
            Dtype::U16 => int_op!(k, left, right, u16),
            Dtype::U32 => int_op!(k, left, right, u32),
            Dtype::U64 => int_op!(k, left, right, u64),
            Dtype::Bool => int_op!(k, left, right, u8),
            Dtype::F32 => float_op!(k, left, right, f32),
            Dtype::F64 => float_op!(k, left, right, f64),
            Dtype::C64 => complex(k, left, right, 4),
            Dtype::C128 => complex(k, left, right, 8),
            Dtype::Pair(v) => {
                let size = self.dtype.size();
                match v {
                    Value::I16 => loc(k, left, right, size, |b| i16::from_ne_bytes(b[..2].try_into().unwrap()), 4),
                    Value::I32 => loc(k, left, right, size, |b| i32::from_ne_bytes(b[..4].try_into().unwrap()), 4),
                    Value::F32 => loc(k, left, right, size, |b| f32::from_ne_bytes(b[..4].try_into().unwrap()), 4),
                    Value::I64 => loc(k, left, right, size, |b| i64::from_ne_bytes(b[..8].try_into().unwrap()), 8),
                    Value::F64 => loc(k, left, right, size, |b| f64::from_ne_bytes(b[..8].try_into().unwrap()), 8),
                }
            }
        }
        Ok(())
    }
}

/// Sum and product of complex numbers of two `half`-byte floats.
fn complex(kind: OpKind, left: &[u8], right: &mut [u8], half: usize) {
    let rd = |b: &[u8]| -> f64 {
        if half == 4 {
            f32::from_ne_bytes(b.try_into().unwrap()) as f64
        } else {
            f64::from_ne_bytes(b.try_into().unwrap())
        }
    };
    let wr = |b: &mut [u8], v: f64| {
        if half == 4 {
            b.copy_from_slice(&(v as f32).to_ne_bytes())
        } else {
            b.copy_from_slice(&v.to_ne_bytes())
        }
    };
    for (a, b) in left.chunks_exact(2 * half).zip(right.chunks_exact_mut(2 * half)) {
        let (ar, ai) = (rd(&a[..half]), rd(&a[half..]));
        let (br, bi) = (rd(&b[..half]), rd(&b[half..]));
        let (r, i) = match kind {
            OpKind::Sum => (ar + br, ai + bi),
            _ => (ar * br - ai * bi, ar * bi + ai * br),
        };
        wr(&mut b[..half], r);
        wr(&mut b[half..], i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn sums_and_maxima_of_doubles() {
        let op = Op::new("sum", "f8").unwrap();
        let mut r = f64s(&[1.0, 2.0]);
        op.apply(&f64s(&[0.5, -4.0]), &mut r).unwrap();
        assert_eq!(r, f64s(&[1.5, -2.0]));
        let op = Op::new("max", "f8").unwrap();
        op.apply(&f64s(&[9.0, -9.0]), &mut r).unwrap();
        assert_eq!(r, f64s(&[9.0, -2.0]));
    }

    #[test]
    fn maxloc_prefers_the_lower_index_on_ties() {
        let pair = |v: i32, i: i32| [v.to_ne_bytes(), i.to_ne_bytes()].concat();
        let op = Op::new("maxloc", "2i").unwrap();
        let mut r = [pair(5, 3), pair(7, 1)].concat();
        op.apply(&[pair(5, 2), pair(6, 0)].concat(), &mut r).unwrap();
        assert_eq!(r, [pair(5, 2), pair(7, 1)].concat());
    }

    #[test]
    fn bitwise_ops_on_floats_and_mismatched_sizes_are_refused() {
        assert_eq!(Op::new("band", "f8").unwrap_err().class, ErrorClass::Op);
        assert_eq!(Op::new("sum", "x9").unwrap_err().class, ErrorClass::Type);
        let op = Op::new("sum", "i4").unwrap();
        assert_eq!(op.apply(&[0; 8], &mut [0; 4]).unwrap_err().class, ErrorClass::Count);
    }
}
