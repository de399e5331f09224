//! What a rank waits for now, for whoever watches it (the dashboard, a
//! status with `traffic=true`): its posted receives, each as the source
//! and tag it asks for, or as the collective call it belongs to.
//!
//! Rules:
//! - A receive on a communicator's collective context (`COLLECTIVE_BIT`)
//!   belongs to a collective call; its tag is the call's sequence number,
//!   which means nothing to a reader, so it is named by the call instead.
//! - The calls are remembered as they start, by (context, sequence), the
//!   last [`KEPT`] only: naming costs a collective one uncontended lock and
//!   never grows. One no longer remembered is named "collective".
//! - Sources are world ranks (the domain's), as the dashboard shows them.

use std::collections::VecDeque;

use parking_lot::Mutex;
use serde::Serialize;

use crate::engine::mailbox::Pattern;
use crate::wire::reserved::COLLECTIVE_BIT;

/// How many collective calls are remembered (nonblocking ones may overlap).
const KEPT: usize = 32;

/// One thing a rank waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Awaiting {
    /// The world rank a message is awaited from; None: any.
    pub source: Option<u32>,
    /// The tag asked for; None: any (and always None within a collective).
    pub tag: Option<i32>,
    /// The collective call the receive belongs to, if it does.
    pub collective: Option<&'static str>,
}

/// The collective calls a rank started lately.
#[derive(Default)]
pub struct Collectives {
    recent: Mutex<VecDeque<(u64, i32, &'static str)>>,
}

impl Collectives {
    /// A collective call `name` started on `context` (the collective one) with sequence number `tag`.
    pub fn started(&self, context: u64, tag: i32, name: &'static str) {
        let mut recent = self.recent.lock();
        if recent.len() == KEPT {
            recent.pop_front();
        }
        recent.push_back((context, tag, name));
    }

    fn name(&self, context: u64, tag: Option<i32>) -> &'static str {
        let recent = self.recent.lock();
        recent.iter().rev().find(|(c, t, _)| *c == context && Some(*t) == tag).map_or("collective", |(_, _, n)| n)
    }

    /// What receives asking for `patterns` wait for.
    pub fn describe(&self, patterns: &[Pattern]) -> Vec<Awaiting> {
        patterns
            .iter()
            .map(|p| match p.context & COLLECTIVE_BIT != 0 {
                true => Awaiting { source: p.source, tag: None, collective: Some(self.name(p.context, p.tag)) },
                false => Awaiting { source: p.source, tag: p.tag, collective: None },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(context: u64, source: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern { context, source, tag }
    }

    #[test]
    fn a_point_to_point_receive_is_its_source_and_tag() {
        let c = Collectives::default();
        let got = c.describe(&[p(0, Some(3), Some(7)), p(0, None, None)]);
        assert_eq!(got[0], Awaiting { source: Some(3), tag: Some(7), collective: None });
        assert_eq!(got[1], Awaiting { source: None, tag: None, collective: None });
    }

    #[test]
    fn a_collective_receive_is_named_by_its_call_not_its_sequence_number() {
        let c = Collectives::default();
        c.started(COLLECTIVE_BIT | 4, 0, "barrier");
        c.started(COLLECTIVE_BIT | 4, 1, "allreduce");
        let got = c.describe(&[p(COLLECTIVE_BIT | 4, Some(1), Some(1)), p(COLLECTIVE_BIT | 9, Some(2), Some(0))]);
        assert_eq!(got[0], Awaiting { source: Some(1), tag: None, collective: Some("allreduce") });
        assert_eq!(got[1].collective, Some("collective"), "another communicator's call is not this one's");
    }

    #[test]
    fn only_the_last_calls_are_remembered() {
        let c = Collectives::default();
        for seq in 0..(KEPT as i32 + 5) {
            c.started(COLLECTIVE_BIT, seq, "bcast");
        }
        assert_eq!(c.recent.lock().len(), KEPT);
        assert_eq!(c.describe(&[p(COLLECTIVE_BIT, Some(0), Some(0))])[0].collective, Some("collective"));
        assert_eq!(c.describe(&[p(COLLECTIVE_BIT, Some(0), Some(KEPT as i32 + 4))])[0].collective, Some("bcast"));
    }
}
