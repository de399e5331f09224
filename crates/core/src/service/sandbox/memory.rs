//! A memory budget over the instance processes: what all of them may hold
//! resident (`max_instances_memory`), and each key's
//! (`max_instances_memory_per_key`). One instance's address space is
//! bounded too (`max_instance_memory`, RLIMIT_AS), but many instances of one
//! key, each within its bound, could still take the machine's memory; the
//! budget is what keeps one key from making the endpoint's machine run out.
//!
//! Rules ([`choose`] decides, pure):
//! - Every instance process's group (the process and what it started) is
//!   measured, resident bytes from `/proc`, every [`CHECK`].
//! - A key whose instances hold more than its share loses its largest
//!   instance, then the next, until it is within its share.
//! - While all of them hold more than the whole budget, the largest
//!   instance of the key that holds the most is ended.
//! - An instance ended so fails with `MemoryLimitExceeded`, saying how much
//!   was held and which setting bounds it. 0 turns a bound off.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::jobs::process_group::Stat;
use crate::keys::KeyId;

/// How often the instance processes are measured.
pub const CHECK: Duration = Duration::from_millis(250);

/// One instance process's use, as [`choose`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub ticket: u64,
    /// None: an instance the endpoint's own user started (no key).
    pub owner: Option<KeyId>,
    pub resident: u64,
}

/// Which instances to end, and why: see the rules above.
pub fn choose(usage: &[Usage], max: u64, per_key: u64) -> Vec<(u64, String)> {
    let mut left: Vec<Usage> = usage.to_vec();
    left.sort_by(|a, b| b.resident.cmp(&a.resident).then(a.ticket.cmp(&b.ticket))); // largest first
    let mut ended = Vec::new();
    let held = |left: &[Usage], owner: Option<KeyId>| left.iter().filter(|u| u.owner == owner).map(|u| u.resident).sum::<u64>();
    if per_key > 0 {
        let mut owners: Vec<KeyId> = left.iter().filter_map(|u| u.owner).collect();
        owners.sort_by_key(|k| k.0); // in key order, whatever order the instances came in
        owners.dedup();
        for owner in owners {
            loop {
                let total = held(&left, Some(owner));
                if total <= per_key {
                    break;
                }
                let i = left.iter().position(|u| u.owner == Some(owner)).expect("it holds some");
                let u = left.remove(i);
                ended.push((
                    u.ticket,
                    format!(
                        "{owner}'s instances held {} MiB resident here, more than a key's share ({} MiB, \
                         --max-instances-memory-per-key); this, its largest ({} MiB), was ended",
                        total >> 20,
                        per_key >> 20,
                        u.resident >> 20
                    ),
                ));
            }
        }
    }
    if max > 0 {
        loop {
            let total: u64 = left.iter().map(|u| u.resident).sum();
            if total <= max || left.is_empty() {
                break;
            }
            let owners: HashSet<Option<KeyId>> = left.iter().map(|u| u.owner).collect();
            let heaviest = owners.into_iter().max_by_key(|&o| (held(&left, o), std::cmp::Reverse(o.map(|k| k.0)))).expect("not empty");
            let i = left.iter().position(|u| u.owner == heaviest).expect("it holds some");
            let u = left.remove(i);
            ended.push((
                u.ticket,
                format!(
                    "the instances here held {} MiB resident, more than the endpoint allows ({} MiB, --max-instances-memory); \
                     this, the largest of the key holding the most ({} MiB), was ended",
                    total >> 20,
                    max >> 20,
                    u.resident >> 20
                ),
            ));
        }
    }
    ended
}

/// The budget, and the instance processes it watches.
pub struct Budget {
    max: u64,
    per_key: u64,
    members: Mutex<HashMap<u64, Member>>,
    next: AtomicU64,
}

struct Member {
    owner: Option<KeyId>,
    pgid: libc::pid_t,
    over: Arc<Over>,
}

/// Told to an instance the budget ends.
#[derive(Default)]
pub struct Over {
    why: OnceLock<String>,
    told: Notify,
}

impl Over {
    /// Wait until the budget ends this instance; why.
    pub async fn wait(&self) -> String {
        loop {
            let told = self.told.notified();
            if let Some(why) = self.why.get() {
                return why.clone();
            }
            told.await;
        }
    }
}

/// An instance process watched by the budget, until dropped.
pub struct Watched {
    budget: Arc<Budget>,
    ticket: u64,
    pub over: Arc<Over>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.budget.members.lock().remove(&self.ticket);
    }
}

impl Budget {
    /// A budget of `max` bytes resident in all, `per_key` for one key (0: no bound); it measures in the runtime.
    pub fn new(max: u64, per_key: u64) -> Arc<Budget> {
        let budget = Arc::new(Budget { max, per_key, members: Mutex::new(HashMap::new()), next: AtomicU64::new(0) });
        if max > 0 || per_key > 0 {
            crate::runtime::runtime().spawn(watch_forever(Arc::downgrade(&budget)));
        }
        budget
    }

    /// Watch process group `pgid`, an instance of `owner`'s.
    pub fn watch(self: &Arc<Self>, owner: Option<KeyId>, pgid: libc::pid_t) -> Watched {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        let over = Arc::new(Over::default());
        self.members.lock().insert(ticket, Member { owner, pgid, over: over.clone() });
        Watched { budget: self.clone(), ticket, over }
    }

    /// Measure every watched group and tell those over the budget.
    fn check(&self) {
        let groups: HashMap<libc::pid_t, (u64, Option<KeyId>)> =
            self.members.lock().iter().map(|(&ticket, m)| (m.pgid, (ticket, m.owner))).collect();
        if groups.is_empty() {
            return;
        }
        let resident = resident_by_group(&groups.keys().copied().collect());
        let usage: Vec<Usage> = groups
            .iter()
            .map(|(pgid, &(ticket, owner))| Usage { ticket, owner, resident: resident.get(pgid).copied().unwrap_or(0) })
            .collect();
        for (ticket, why) in choose(&usage, self.max, self.per_key) {
            if let Some(m) = self.members.lock().get(&ticket) {
                let _ = m.over.why.set(why);
                m.over.told.notify_waiters();
            }
        }
    }
}

async fn watch_forever(budget: Weak<Budget>) {
    loop {
        tokio::time::sleep(CHECK).await;
        let Some(budget) = budget.upgrade() else { return };
        budget.check();
    }
}

/// The resident bytes of each of `groups`' processes together.
fn resident_by_group(groups: &HashSet<libc::pid_t>) -> HashMap<libc::pid_t, u64> {
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut by_group = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return by_group };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<libc::pid_t>().ok()) else { continue };
        let Some(stat) = Stat::of(pid) else { continue };
        if groups.contains(&stat.pgrp) {
            *by_group.entry(stat.pgrp).or_insert(0u64) += stat.resident_pages.saturating_mul(page);
        }
    }
    by_group
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn u(ticket: u64, owner: u32, mib: u64) -> Usage {
        Usage { ticket, owner: Some(KeyId(owner)), resident: mib * MIB }
    }

    #[test]
    fn a_key_over_its_share_loses_its_largest_instances_first() {
        let usage = [u(1, 1, 100), u(2, 1, 300), u(3, 1, 200), u(4, 2, 500)];
        let ended = choose(&usage, 0, 350 * MIB);
        let tickets: Vec<u64> = ended.iter().map(|e| e.0).collect();
        assert_eq!(tickets, vec![2, 4], "key 1 down to 300 MiB by its 300 MiB one; key 2's one alone is over");
        assert!(ended[0].1.contains("key 1's instances held 600 MiB") && ended[0].1.contains("--max-instances-memory-per-key"));
        assert!(choose(&usage, 0, 600 * MIB).is_empty(), "within their shares");
    }

    #[test]
    fn over_the_whole_budget_the_heaviest_key_gives_up_first() {
        // Key 2 holds one big instance, key 1 many smaller ones that add up to more.
        let usage = [u(1, 1, 200), u(2, 1, 200), u(3, 1, 200), u(4, 2, 500), Usage { ticket: 5, owner: None, resident: 50 * MIB }];
        let ended = choose(&usage, 1000 * MIB, 0);
        assert_eq!(ended.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1], "1150 MiB: key 1 (600) gives one up");
        assert!(ended[0].1.contains("--max-instances-memory"));
        let ended = choose(&usage, 500 * MIB, 0);
        assert_eq!(ended.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 4], "then whoever holds the most");
    }

    #[test]
    fn zero_is_no_bound() {
        assert!(choose(&[u(1, 1, 1 << 20)], 0, 0).is_empty());
    }

    #[test]
    fn a_watched_group_is_measured() {
        let me = unsafe { libc::getpgrp() };
        let resident = resident_by_group(&HashSet::from([me]));
        assert!(resident[&me] > MIB, "this test's own group holds some memory");
    }
}
