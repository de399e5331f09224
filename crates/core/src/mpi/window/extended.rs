//! MPI_LONG_DOUBLE accumulates at a target: x86's 80-bit extended floats
//! (in 16-byte slots, as C's `long double` has them there), which Rust has
//! no type for, added, multiplied and compared with the x87 unit itself, so
//! the result is bit for bit what the origin's C or numpy would compute.
//! Elsewhere the element type is refused (MPI_ERR_TYPE).

use crate::error::{err, ErrorClass, Result};
use crate::mpi::collective::op::OpKind;

/// The element type's name on the wire (`op::Header::dtype`).
pub const NAME: &str = "f80x16";
const SLOT: usize = 16;

/// Whether MPI defines `kind` on long doubles (as far as mpiws applies it).
pub fn check(kind: OpKind) -> Result<()> {
    match kind {
        OpKind::Sum | OpKind::Prod | OpKind::Max | OpKind::Min | OpKind::Replace | OpKind::NoOp => Ok(()),
        k => err(ErrorClass::Op, format!("operation {k:?} is not applied to MPI_LONG_DOUBLE by mpiws")),
    }
}

/// `right = left op right`, element by element.
pub fn apply(kind: OpKind, left: &[u8], right: &mut [u8]) -> Result<()> {
    check(kind)?;
    if left.len() != right.len() || !left.len().is_multiple_of(SLOT) {
        return err(ErrorClass::Count, format!("long double operands differ in size ({} and {} bytes)", left.len(), right.len()));
    }
    match kind {
        OpKind::NoOp => return Ok(()),
        OpKind::Replace => {
            right.copy_from_slice(left);
            return Ok(());
        }
        _ => {}
    }
    for (a, b) in left.chunks_exact(SLOT).zip(right.chunks_exact_mut(SLOT)) {
        one(kind, a, b)?;
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
fn one(kind: OpKind, a: &[u8], b: &mut [u8]) -> Result<()> {
    use std::arch::asm;
    // SAFETY: `a` and `b` are 16 bytes each (chunks_exact); the x87 reads
    // and writes the first 10; the x87 stack is left as it was found.
    unsafe {
        match kind {
            OpKind::Sum | OpKind::Prod => {
                let mul = (kind == OpKind::Prod) as u8;
                asm!(
                    "fld tbyte ptr [{b}]",
                    "fld tbyte ptr [{a}]",
                    "test {mul}, {mul}",
                    "jnz 2f",
                    "faddp st(1), st",
                    "jmp 3f",
                    "2:",
                    "fmulp st(1), st",
                    "3:",
                    "fstp tbyte ptr [{b}]",
                    a = in(reg) a.as_ptr(),
                    b = in(reg) b.as_mut_ptr(),
                    mul = in(reg_byte) mul,
                    out("st(0)") _, out("st(1)") _,
                );
            }
            _ => {
                let (gt, lt): (u8, u8);
                asm!(
                    "fld tbyte ptr [{b}]",
                    "fld tbyte ptr [{a}]",
                    "fcomip st, st(1)",
                    "fstp st(0)",
                    "seta {gt}",
                    "setb {lt}",
                    a = in(reg) a.as_ptr(),
                    b = in(reg) b.as_ptr(),
                    gt = out(reg_byte) gt,
                    lt = out(reg_byte) lt,
                    out("st(0)") _, out("st(1)") _,
                );
                let a_wins = if kind == OpKind::Max { gt != 0 } else { lt != 0 };
                if a_wins {
                    b[..10].copy_from_slice(&a[..10]);
                }
            }
        }
    }
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
fn one(_kind: OpKind, _a: &[u8], _b: &mut [u8]) -> Result<()> {
    err(ErrorClass::Type, "MPI_LONG_DOUBLE accumulates need an x86-64 target")
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// An 80-bit extended value of a small integer, in a 16-byte slot.
    fn ld(v: u64) -> [u8; 16] {
        let mut s = [0u8; 16];
        if v == 0 {
            return s;
        }
        let e = 63 - v.leading_zeros() as u16; // exponent of the top bit
        s[..8].copy_from_slice(&(v << (63 - e)).to_le_bytes());
        s[8..10].copy_from_slice(&(16383 + e).to_le_bytes());
        s
    }

    #[test]
    fn arithmetic_and_comparisons_on_extended_floats() {
        let mut b = ld(3).to_vec();
        apply(OpKind::Sum, &ld(4), &mut b).unwrap();
        assert_eq!(&b[..], &ld(7));
        apply(OpKind::Prod, &ld(6), &mut b).unwrap();
        assert_eq!(&b[..], &ld(42));
        apply(OpKind::Max, &ld(5), &mut b).unwrap();
        assert_eq!(&b[..], &ld(42));
        apply(OpKind::Min, &ld(5), &mut b).unwrap();
        assert_eq!(&b[..], &ld(5));
        apply(OpKind::Max, &ld(9), &mut b).unwrap();
        assert_eq!(&b[..], &ld(9));
        assert_eq!(apply(OpKind::Band, &ld(1), &mut b).unwrap_err().class, ErrorClass::Op);
        assert!(apply(OpKind::Sum, &ld(1)[..8], &mut b[..8]).is_err());
    }
}
