//! Endpoint keys: who may use the service interface, and for what.
//!
//! A keys file has one key per line, optionally followed by the scopes it
//! grants (`run`, `jobs`, `files`, `admin`, `relay`, `metrics`, separated by spaces or
//! commas); a key with no scope has all of them. `relay=NAME` (repeatable)
//! grants `relay` for that name alone, and makes the name that key's: no
//! other key may be relayed under it, so no one can take a name before its
//! endpoint connects. A key with plain `relay` may take any name no key
//! claims. `#` starts a comment. Requests carry
//! a key as `Authorization: Bearer <key>`. A key's identity (its line, as
//! [`KeyId`]) owns what it creates: domains, so that another key cannot take
//! them over, and its share of the endpoint's instances.
//!
//! Pure code: parsing and checking, no I/O but reading the file.

use std::fmt;
use std::path::Path;

use crate::error::{err, ErrorClass, Result};

/// Shorter keys are refused: a key must not be guessable.
pub const MIN_KEY_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Create domain instances (`POST /run`).
    Run,
    /// Use deployed programs: spawn, watch, kill jobs, read their results.
    Jobs,
    /// Upload, read and delete files.
    Files,
    /// See and manage everything on the endpoint: every domain and job.
    Admin,
    /// Be reached through this endpoint, a relay (`POST /relay/{name}`).
    Relay,
    /// Read the endpoint's metrics (`GET /metrics`): what Prometheus scrapes with.
    Metrics,
}

impl Scope {
    const ALL: [Scope; 6] = [Scope::Run, Scope::Jobs, Scope::Files, Scope::Admin, Scope::Relay, Scope::Metrics];

    fn bit(self) -> u8 {
        1 << self as u8
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Jobs => "jobs",
            Scope::Files => "files",
            Scope::Admin => "admin",
            Scope::Relay => "relay",
            Scope::Metrics => "metrics",
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// Which key (its position in the keys file, from 1): the owner of what it created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub u32);

impl KeyId {
    /// The owner of what a key no longer in the keys file made (a job kept
    /// across a restart): no key is it, so only `admin` may act on it.
    pub const GONE: KeyId = KeyId(0);
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {}", self.0)
    }
}

#[derive(Clone)]
pub struct Key {
    pub id: KeyId,
    secret: Vec<u8>,
    scopes: u8,
    /// The relay names this key claims (`relay=NAME`); empty: none.
    relay_names: Vec<String>,
}

impl Key {
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes & scope.bit() != 0
    }

    pub fn scopes(&self) -> Vec<&'static str> {
        Scope::ALL.into_iter().filter(|s| self.allows(*s)).map(Scope::name).collect()
    }

    /// A name for the key that outlives its line in the keys file and
    /// reveals nothing of its secret: what durable records (the jobs
    /// ledger) say owns a thing.
    pub fn fingerprint(&self) -> String {
        digest_hex(&self.secret)
    }
}

/// A name for `data` that reveals nothing of it: the first 128 bits of its
/// SHA-256, in hex (key fingerprints, tunnel names, the same-host offer).
pub fn digest_hex(data: &[u8]) -> String {
    hex(&ring::digest::digest(&ring::digest::SHA256, data).as_ref()[..16])
}

/// 128 unguessable bits, in hex: ids that are capabilities, and secrets.
pub fn random_hex() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut b).expect("the system's random numbers");
    hex(&b)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Debug for Key {
    // Never print a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({}, {:?})", self.id, self.scopes())
    }
}

/// The keys an endpoint accepts. Empty: no request to the service interface
/// is allowed (an endpoint made only to host a singleton, say).
#[derive(Debug, Clone, Default)]
pub struct Keys {
    keys: Vec<Key>,
}

/// Why a request's credential was refused (401 or 403).
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization: Bearer` header (401).
    Missing,
    /// Not a key of this endpoint (401).
    Unknown,
    /// A key without the scope (403).
    Scope(Scope),
}

impl Keys {
    /// Parse a keys file's text.
    pub fn parse(text: &str) -> Result<Keys> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty());
            let secret = words.next().unwrap_or_default();
            if secret.len() < MIN_KEY_LEN || !secret.bytes().all(|b| b.is_ascii_graphic()) {
                return err(ErrorClass::Arg, format!("keys line {}: a key is at least {MIN_KEY_LEN} visible ASCII characters", n + 1));
            }
            let mut scopes = 0u8;
            let mut relay_names = Vec::new();
            for w in words {
                if let Some(name) = w.strip_prefix("relay=") {
                    // Its form is the relay's to check (`Endpoint::start`: `wire::url::valid_relay_name`).
                    if name.is_empty() {
                        return err(ErrorClass::Arg, format!("keys line {}: relay= names no name", n + 1));
                    }
                    if keys.iter().any(|k: &Key| k.relay_names.iter().any(|x| x == name)) {
                        return err(ErrorClass::Arg, format!("keys line {}: relay name {name:?} is claimed by an earlier key", n + 1));
                    }
                    relay_names.push(name.to_string());
                    scopes |= Scope::Relay.bit();
                    continue;
                }
                let Some(s) = Scope::parse(w) else {
                    return err(
                        ErrorClass::Arg,
                        format!("keys line {}: unknown scope {w:?} (run, jobs, files, admin, relay, relay=NAME, metrics)", n + 1),
                    );
                };
                scopes |= s.bit();
            }
            if scopes == 0 {
                scopes = Scope::ALL.iter().fold(0, |acc, s| acc | s.bit());
            }
            if keys.iter().any(|k: &Key| k.secret == secret.as_bytes()) {
                return err(ErrorClass::Arg, format!("keys line {}: the same key twice", n + 1));
            }
            keys.push(Key { id: KeyId(n as u32 + 1), secret: secret.as_bytes().to_vec(), scopes, relay_names });
        }
        Ok(Keys { keys })
    }

    pub fn load(path: &Path) -> Result<Keys> {
        let text =
            std::fs::read_to_string(path).or_else(|e| err(ErrorClass::Arg, format!("cannot read keys file {}: {e}", path.display())))?;
        let keys = Keys::parse(&text)?;
        if keys.is_empty() {
            return err(ErrorClass::Arg, format!("keys file {} holds no key", path.display()));
        }
        Ok(keys)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Key> {
        self.keys.iter()
    }

    /// The key a bearer string is, if any. Every key is compared, each in
    /// time that depends only on the candidate's length: neither which key
    /// matched nor any key's length shows in the time taken.
    pub fn find(&self, bearer: &str) -> Option<&Key> {
        let mut found = None;
        for k in &self.keys {
            if constant_time_eq(bearer.as_bytes(), &k.secret) {
                found = Some(k);
            }
        }
        found
    }

    /// Every relay name a key claims.
    pub fn relay_names(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().flat_map(|k| k.relay_names.iter().map(String::as_str))
    }

    /// May `key` be relayed under `name`? A name a key claims (`relay=NAME`)
    /// is that key's alone; a key with plain `relay` may take a name no key
    /// claims.
    pub fn may_relay(&self, key: &Key, name: &str) -> bool {
        if !key.allows(Scope::Relay) {
            return false;
        }
        match self.keys.iter().find(|k| k.relay_names.iter().any(|n| n == name)) {
            Some(owner) => owner.id == key.id,
            None => key.relay_names.is_empty(),
        }
    }

    /// The key of a request that needs `scope`.
    pub fn check(&self, bearer: Option<&str>, scope: Scope) -> std::result::Result<&Key, Denied> {
        let key = self.find(bearer.ok_or(Denied::Missing)?).ok_or(Denied::Unknown)?;
        if key.allows(scope) {
            Ok(key)
        } else {
            Err(Denied::Scope(scope))
        }
    }
}

/// Equality in time that depends only on `given`'s length (the attacker's
/// own), never on where the two differ or on `secret`'s length.
pub fn constant_time_eq(given: &[u8], secret: &[u8]) -> bool {
    if secret.is_empty() {
        return given.is_empty();
    }
    let mut diff = (given.len() != secret.len()) as u8;
    for (i, g) in given.iter().enumerate() {
        diff |= g ^ secret[i % secret.len()];
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn a_key_without_scopes_has_all_and_scopes_limit() {
        let keys = Keys::parse(&format!("# comment\n{A}\n\n{B} run, files  # trailing\n")).unwrap();
        let a = keys.check(Some(A), Scope::Admin).unwrap();
        assert_eq!((a.id, a.scopes()), (KeyId(2), vec!["run", "jobs", "files", "admin", "relay", "metrics"]));
        assert_eq!(keys.check(Some(B), Scope::Files).unwrap().id, KeyId(4));
        assert_eq!(keys.check(Some(B), Scope::Jobs).unwrap_err(), Denied::Scope(Scope::Jobs));
        assert_eq!(keys.check(None, Scope::Run).unwrap_err(), Denied::Missing);
        assert_eq!(keys.check(Some("aaaaaaaaaaaaaaaaaaa"), Scope::Run).unwrap_err(), Denied::Unknown);
        assert_eq!(keys.check(Some(&format!("{A}a")), Scope::Run).unwrap_err(), Denied::Unknown);
        assert_eq!(keys.check(Some(""), Scope::Run).unwrap_err(), Denied::Unknown);
    }

    #[test]
    fn bad_keys_files_say_why() {
        for (text, why) in [("short", "at least 16"), (&format!("{A} root") as &str, "unknown scope"), (&format!("{A}\n{A} run"), "twice")]
        {
            let e = Keys::parse(text).unwrap_err();
            assert!(e.message.contains(why), "{text:?}: {}", e.message);
        }
        assert!(Keys::parse("").unwrap().is_empty());
        assert!(Keys::default().check(Some(A), Scope::Run).is_err());
    }

    #[test]
    fn a_claimed_relay_name_is_its_keys_alone() {
        const C: &str = "cccccccccccccccccccc";
        let keys = Keys::parse(&format!("{A} relay=lab relay=lab2\n{B} relay\n{C} run")).unwrap();
        let (a, b, c) = (keys.find(A).unwrap(), keys.find(B).unwrap(), keys.find(C).unwrap());
        assert_eq!(a.scopes(), vec!["relay"]);
        assert!(keys.may_relay(a, "lab") && keys.may_relay(a, "lab2"));
        assert!(!keys.may_relay(a, "other"), "a key with names takes only those");
        assert!(!keys.may_relay(b, "lab"), "plain relay cannot take a claimed name");
        assert!(keys.may_relay(b, "other"));
        assert!(!keys.may_relay(c, "other"), "no relay scope");
        for (text, why) in
            [(format!("{A} relay=lab\n{B} relay=lab"), "claimed by an earlier key"), (format!("{A} relay="), "names no name")]
        {
            assert!(Keys::parse(&text).unwrap_err().message.contains(why), "{text}");
        }
    }

    #[test]
    fn comparison_is_exact() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abcabc", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"", b"abc"));
        assert!(constant_time_eq(b"", b""));
    }
}
