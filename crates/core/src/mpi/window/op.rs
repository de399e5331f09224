//! The meaning of one-sided operation frames: what an origin asks of a
//! target's window (put, get, accumulate, ..., lock, unlock, post,
//! complete) and the target's reply, as the payload of a message on the
//! window's reserved context (`wire::reserved::is_rma`); and how a request is
//! applied to window memory, bounds checked first.
//!
//! Frame, little-endian: kind u8, op u8 (accumulate: index in `OPS`;
//! lock: 1 exclusive, 2 shared), 0 u16, class i32 (a reply's error class,
//! 0 for success), id u64 (the origin's operation id, echoed by the
//! reply), disp u64 (in the target's displacement units; a dynamic
//! window's: an address), len u64 (bytes at the target), dtype [u8; 8]
//! (the accumulate's element type, `collective::op::Dtype`'s name, NUL
//! padded); then the data: put/accumulate: `len` bytes; compare-and-swap:
//! the new value, then the compare value (`len` each); a reply: the bytes
//! read, or the error text.

use crate::error::{err, Error, ErrorClass, Result};
use crate::mpi::collective::op::OpKind;
use crate::mpi::collective::Op;
use crate::mpi::window::extended;

pub const HEADER: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Put = 1,
    Get = 2,
    Accumulate = 3,
    GetAccumulate = 4,
    CompareAndSwap = 5,
    Lock = 6,
    Unlock = 7,
    /// A target exposes its window to this origin (MPI_Win_post).
    Post = 8,
    /// An origin ends its access epoch at this target (MPI_Win_complete).
    Complete = 9,
    Reply = 10,
}

impl Kind {
    fn from_u8(k: u8) -> Option<Kind> {
        use Kind::*;
        Some(match k {
            1 => Put,
            2 => Get,
            3 => Accumulate,
            4 => GetAccumulate,
            5 => CompareAndSwap,
            6 => Lock,
            7 => Unlock,
            8 => Post,
            9 => Complete,
            10 => Reply,
            _ => return None,
        })
    }
}

/// The accumulate operations by their index on the wire.
pub const OPS: [&str; 14] =
    ["sum", "prod", "max", "min", "land", "lor", "lxor", "band", "bor", "bxor", "maxloc", "minloc", "replace", "no_op"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub op: u8,
    pub class: i32,
    pub id: u64,
    pub disp: u64,
    pub len: u64,
    pub dtype: [u8; 8],
}

impl Header {
    pub fn new(kind: Kind, id: u64) -> Header {
        Header { kind, op: 0, class: 0, id, disp: 0, len: 0, dtype: [0; 8] }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut h = Vec::with_capacity(HEADER);
        h.extend_from_slice(&[self.kind as u8, self.op, 0, 0]);
        h.extend_from_slice(&self.class.to_le_bytes());
        h.extend_from_slice(&self.id.to_le_bytes());
        h.extend_from_slice(&self.disp.to_le_bytes());
        h.extend_from_slice(&self.len.to_le_bytes());
        h.extend_from_slice(&self.dtype);
        h
    }

    /// The header of a frame and the data after it.
    pub fn decode(b: &[u8]) -> Result<(Header, &[u8])> {
        if b.len() < HEADER {
            return err(ErrorClass::Arg, format!("window operation of {} bytes is shorter than its header", b.len()));
        }
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let Some(kind) = Kind::from_u8(b[0]) else {
            return err(ErrorClass::Arg, format!("unknown window operation {}", b[0]));
        };
        let h = Header {
            kind,
            op: b[1],
            class: i32::from_le_bytes(b[4..8].try_into().unwrap()),
            id: u64_at(8),
            disp: u64_at(16),
            len: u64_at(24),
            dtype: b[32..40].try_into().unwrap(),
        };
        Ok((h, &b[HEADER..]))
    }

    /// The accumulate's operation, checked for its element type.
    pub fn accumulate_op(&self) -> Result<Acc> {
        let Some(name) = OPS.get(self.op as usize) else {
            return err(ErrorClass::Op, format!("unknown accumulate operation {}", self.op));
        };
        let end = self.dtype.iter().position(|&c| c == 0).unwrap_or(8);
        let dtype = std::str::from_utf8(&self.dtype[..end]).map_err(|_| Error::new(ErrorClass::Type, "element type name is not UTF-8"))?;
        if dtype == extended::NAME {
            let kind = OpKind::parse(name)?;
            extended::check(kind)?;
            return Ok(Acc::Extended(kind));
        }
        Op::new(name, dtype).map(Acc::Builtin)
    }
}

/// An accumulate's operation: a builtin reduction of the collectives', or
/// one on long doubles (`extended`).
pub enum Acc {
    Builtin(Op),
    Extended(OpKind),
}

impl Acc {
    fn kind(&self) -> OpKind {
        match self {
            Acc::Builtin(op) => op.kind,
            Acc::Extended(k) => *k,
        }
    }

    /// `right = left op right`.
    fn apply(&self, left: &[u8], right: &mut [u8]) -> Result<()> {
        match self {
            Acc::Builtin(op) => op.apply(left, right),
            Acc::Extended(k) => extended::apply(*k, left, right),
        }
    }
}

/// An element type's name as the header carries it.
pub fn dtype_name(name: &str) -> Result<[u8; 8]> {
    let mut d = [0u8; 8];
    if name.len() > 8 {
        return err(ErrorClass::Type, format!("element type name {name:?} longer than 8 bytes"));
    }
    d[..name.len()].copy_from_slice(name.as_bytes());
    Ok(d)
}

/// Where `len` bytes at displacement `disp` (in units of `disp_unit`) lie
/// in a window of `size` bytes: their offset, or MPI_ERR_RMA_RANGE. Every
/// step is checked: nothing from the wire can wrap round into the window.
pub fn range(disp: u64, disp_unit: u64, len: u64, size: u64) -> Result<usize> {
    let out = || {
        Error::new(
            ErrorClass::RmaRange,
            format!("{len} bytes at displacement {disp} (unit {disp_unit}) are outside the target window of {size} bytes"),
        )
    };
    let offset = disp.checked_mul(disp_unit).ok_or_else(out)?;
    let end = offset.checked_add(len).ok_or_else(out)?;
    if end > size {
        return Err(out());
    }
    usize::try_from(offset).map_err(|_| out())
}

/// Where `len` bytes at address `addr` lie among a dynamic window's
/// attached spans `(address, length)`: the span's index and the offset in
/// it. The bytes must lie within one span (MPI_ERR_RMA_RANGE otherwise).
pub fn locate(spans: &[(usize, usize)], addr: u64, len: u64) -> Result<(usize, usize)> {
    let end = addr.checked_add(len);
    for (i, &(base, n)) in spans.iter().enumerate() {
        let (base, n) = (base as u64, n as u64);
        if let (Some(end), Some(stop)) = (end, base.checked_add(n)) {
            if addr >= base && end <= stop {
                return Ok((i, (addr - base) as usize));
            }
        }
    }
    err(ErrorClass::RmaRange, format!("{len} bytes at address {addr:#x} are not within memory attached to the target window"))
}

/// Apply a data operation to the target bytes `mem` (exactly `h.len`
/// long, found by `range`/`locate`): the bytes to reply with (read
/// before any update).
pub fn apply(h: &Header, data: &[u8], mem: &mut [u8]) -> Result<Vec<u8>> {
    let n = mem.len();
    let need = |want: usize| {
        if data.len() != want {
            return err(ErrorClass::Count, format!("window operation carries {} bytes, {want} expected", data.len()));
        }
        Ok(())
    };
    match h.kind {
        Kind::Put => {
            need(n)?;
            mem.copy_from_slice(data);
            Ok(Vec::new())
        }
        Kind::Get => Ok(mem.to_vec()),
        Kind::Accumulate | Kind::GetAccumulate => {
            let op = h.accumulate_op()?;
            // NO_OP carries no data (Get_accumulate's fetch only).
            let old = if h.kind == Kind::GetAccumulate { mem.to_vec() } else { Vec::new() };
            if op.kind() != OpKind::NoOp {
                need(n)?;
                op.apply(data, mem)?; // target = origin op target
            }
            Ok(old)
        }
        Kind::CompareAndSwap => {
            need(2 * n)?;
            let old = mem.to_vec();
            if mem[..] == data[n..] {
                mem.copy_from_slice(&data[..n]);
            }
            Ok(old)
        }
        k => err(ErrorClass::Arg, format!("{k:?} is not a data operation")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header { kind: Kind::GetAccumulate, op: 0, class: 0, id: 77, disp: 3, len: 16, dtype: dtype_name("i4").unwrap() };
        let mut b = h.encode();
        b.extend_from_slice(b"data");
        let (g, data) = Header::decode(&b).unwrap();
        assert_eq!((g, data), (h, &b"data"[..]));
        assert!(Header::decode(&b[..10]).is_err());
        let mut bad = b.clone();
        bad[0] = 99;
        assert!(Header::decode(&bad).is_err());
    }

    #[test]
    fn ranges_are_checked_without_wrapping() {
        assert_eq!(range(2, 4, 8, 16).unwrap(), 8);
        assert_eq!(range(0, 1, 16, 16).unwrap(), 0);
        assert_eq!(range(16, 1, 0, 16).unwrap(), 16);
        assert_eq!(range(2, 4, 9, 16).unwrap_err().class, ErrorClass::RmaRange);
        assert_eq!(range(u64::MAX, 2, 1, 16).unwrap_err().class, ErrorClass::RmaRange);
        assert_eq!(range(1, 1, u64::MAX, 16).unwrap_err().class, ErrorClass::RmaRange);
    }

    #[test]
    fn dynamic_accesses_lie_within_one_attached_span() {
        let spans = [(1000, 10), (1010, 10)];
        assert_eq!(locate(&spans, 1002, 8).unwrap(), (0, 2));
        assert_eq!(locate(&spans, 1010, 10).unwrap(), (1, 0));
        assert!(locate(&spans, 1005, 10).is_err(), "straddles two spans");
        assert!(locate(&spans, u64::MAX, 2).is_err());
        assert!(locate(&[], 0, 0).is_err());
    }

    #[test]
    fn data_operations_apply_as_mpi_has_them() {
        let mut mem = [1u8, 2, 3, 4];
        let mut h = Header::new(Kind::Put, 1);
        apply(&h, &[9, 9, 9, 9], &mut mem).unwrap();
        assert_eq!(mem, [9; 4]);
        assert!(apply(&h, &[1], &mut mem).is_err(), "a short put is refused");
        h.kind = Kind::GetAccumulate;
        h.dtype = dtype_name("u1").unwrap();
        h.op = 0; // sum
        assert_eq!(apply(&h, &[1, 2, 3, 4], &mut mem).unwrap(), vec![9; 4]);
        assert_eq!(mem, [10, 11, 12, 13]);
        h.op = 13; // no_op: fetch only, no data
        assert_eq!(apply(&h, &[], &mut mem).unwrap(), vec![10, 11, 12, 13]);
        h.op = 12; // replace
        h.kind = Kind::Accumulate;
        apply(&h, &[0, 0, 0, 0], &mut mem).unwrap();
        assert_eq!(mem, [0; 4]);
        let cas = Header { kind: Kind::CompareAndSwap, ..Header::new(Kind::Put, 2) };
        let mut one = [5u8];
        assert_eq!(apply(&cas, &[7, 4], &mut one).unwrap(), vec![5]);
        assert_eq!(one, [5], "compare differs: unchanged");
        apply(&cas, &[7, 5], &mut one).unwrap();
        assert_eq!(one, [7]);
    }
}
