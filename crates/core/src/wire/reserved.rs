//! What the core reserves on the wire for itself, so that no application
//! receive can ever match it: every communicator has a second context, its
//! own with [`COLLECTIVE_BIT`] set, for collectives (their sequence numbers
//! are the tags, from 0), where two tags no collective call reaches are
//! kept for a revocation ([`REVOKE_TAG`]) and for one-sided window
//! traffic ([`RMA_TAG`]). A collective's every message starts with a
//! status block ([`status_block`]): OK, or the fault of the rank that sent it.

use bytes::Bytes;

use crate::error::{Error, ErrorClass};
use crate::wire::frame::Envelope;

/// Collective traffic of a communicator uses its context with this bit set,
/// so it never matches the application's point-to-point receives.
pub const COLLECTIVE_BIT: u64 = 1 << 63;

/// The tag no collective call uses: a message with it on a collective
/// context revokes that context (`rank::Instance::deliver`).
pub const REVOKE_TAG: i32 = i32::MAX;

/// The tag of window traffic on a window's key. (The window communicator's
/// own collectives, fence's barrier, number their tags from 0 and would
/// reach it only after 2^31 - 1 of them.)
pub const RMA_TAG: i32 = REVOKE_TAG - 1;

/// Whether `env` is a revocation: the reserved tag on a collective context.
pub fn is_revoke(env: &Envelope) -> bool {
    env.tag == REVOKE_TAG && env.context & COLLECTIVE_BIT != 0
}

/// Whether `env` is window traffic, for the windows, not a mailbox.
pub fn is_rma(env: &Envelope) -> bool {
    is_rma_key(env.tag, env.context)
}

/// `is_rma` of a message's tag and context.
pub fn is_rma_key(tag: i32, context: u64) -> bool {
    tag == RMA_TAG && context & COLLECTIVE_BIT != 0
}

const OK: &[u8] = &[0];
/// Longest fault message carried in a status block.
const FAULT_TEXT: usize = 512;

/// The status block of a message: OK, or a fault's class and message.
pub fn status_block(fault: Option<&Error>) -> Bytes {
    let Some(e) = fault else { return Bytes::from_static(OK) };
    let mut b = vec![e.class.code().clamp(1, 255) as u8];
    let mut cut = e.message.len().min(FAULT_TEXT);
    while !e.message.is_char_boundary(cut) {
        cut -= 1;
    }
    b.extend_from_slice(&e.message.as_bytes()[..cut]);
    Bytes::from(b)
}

/// The fault a status block reports, if any.
pub fn fault_of(status: &[u8]) -> Option<Error> {
    let (&class, text) = status.split_first()?;
    (class != 0).then(|| Error::new(ErrorClass::from_code(class as i64), String::from_utf8_lossy(text).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_block_carries_a_fault_cut_at_a_character_boundary() {
        assert_eq!(fault_of(&status_block(None)), None);
        let e = Error::new(ErrorClass::ProcFailed, "é".repeat(300));
        let back = fault_of(&status_block(Some(&e))).unwrap();
        assert_eq!(back.class, ErrorClass::ProcFailed);
        assert!(back.message.len() <= FAULT_TEXT && e.message.starts_with(&back.message));
    }

    #[test]
    fn reserved_tags_count_only_on_collective_contexts() {
        let env = |context, tag| Envelope { source: 0, context, tag, seq: None, sync: false, parts: vec![], forward: vec![] };
        assert!(is_revoke(&env(5 | COLLECTIVE_BIT, REVOKE_TAG)) && !is_revoke(&env(5, REVOKE_TAG)));
        assert!(is_rma(&env(5 | COLLECTIVE_BIT, RMA_TAG)) && !is_rma(&env(5, RMA_TAG)));
        assert!(!is_rma(&env(5 | COLLECTIVE_BIT, REVOKE_TAG)));
    }
}
