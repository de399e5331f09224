//! The binding of an instance to its domain: what a *run* request carries.

use serde::{Deserialize, Serialize};

use crate::error::{err, ErrorClass, Result};
use crate::wire::url;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Binding {
    /// Domain id: any non-empty string of `[A-Za-z0-9._-]`.
    pub domain: String,
    /// This instance's rank.
    pub rank: u32,
    /// Endpoint URL of every rank, in rank order (rank i at `endpoints[i]`).
    pub endpoints: Vec<String>,
    /// Shared secret of the domain: every store and status request must carry it.
    pub token: String,
    /// The deployed service to run.
    #[serde(default)]
    pub service: String,
    /// Application parameters, handed to the service as they are.
    #[serde(default)]
    pub params: serde_json::Value,
}

/// A domain id names a path segment (and may one day name a file): no
/// `.`/`..`, nothing but `[A-Za-z0-9._-]`, at most 128 characters.
pub fn valid_domain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// The shortest and longest domain token taken: a token is the domain's
/// only secret, so one a peer could guess is refused.
pub const MIN_TOKEN: usize = 16;
pub const MAX_TOKEN: usize = 256;

/// A domain token: 16-256 characters that an `Authorization: Bearer` header carries as they are.
pub fn valid_token(token: &str) -> bool {
    (MIN_TOKEN..=MAX_TOKEN).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
}

impl Binding {
    pub fn size(&self) -> u32 {
        self.endpoints.len() as u32
    }

    pub fn validate(&self) -> Result<()> {
        if !valid_domain_id(&self.domain) {
            return err(ErrorClass::Arg, "domain id must be 1-128 characters of [A-Za-z0-9._-], not '.' or '..'");
        }
        if self.endpoints.is_empty() {
            return err(ErrorClass::Arg, "endpoints must list at least one URL");
        }
        // An origin (or one behind a relay) and nothing else: a rank POSTs
        // to these with the domain's token, so a path or query there would
        // point its requests at whatever the binding's author chose.
        for (rank, u) in self.endpoints.iter().enumerate() {
            url::endpoint(u.trim_end_matches('/')).or_else(|why| err(ErrorClass::Arg, format!("endpoint of rank {rank}: {why}")))?;
        }
        if self.rank >= self.size() {
            return err(ErrorClass::Rank, format!("rank {} out of range for {} endpoints", self.rank, self.size()));
        }
        if !valid_token(&self.token) {
            return err(
                ErrorClass::Arg,
                format!("token must be {MIN_TOKEN}-{MAX_TOKEN} characters of [A-Za-z0-9-._~+/=] (a random secret: mpiws makes 32)"),
            );
        }
        Ok(())
    }

    /// How many ranks (this one included) have their endpoint on this rank's host.
    pub fn local_ranks(&self) -> usize {
        let host = |u: &str| {
            let rest = u.split_once("://").map_or(u, |(_, r)| r).trim_end_matches('/');
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            if !path.is_empty() {
                // Behind a relay (`/relay/NAME`): on a host of its own, not the relay's.
                return rest.to_string();
            }
            authority.rsplit_once(':').map_or(authority, |(h, _)| h).to_string()
        };
        let mine = host(&self.endpoints[self.rank as usize]);
        self.endpoints.iter().filter(|u| host(u) == mine).count()
    }

    /// Endpoint URL of `rank`, without a trailing slash.
    pub fn url_of(&self, rank: u32) -> &str {
        self.endpoints[rank as usize].trim_end_matches('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(rank: u32, endpoints: &[&str]) -> Binding {
        serde_json::from_value(serde_json::json!({
            "domain": "d", "rank": rank, "token": "t".repeat(16), "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn ranks_behind_a_relay_are_on_hosts_of_their_own() {
        let urls = [
            "http://10.0.0.1:7070",
            "http://10.0.0.1:7071/",
            "http://10.0.0.1:7070/relay/a",
            "http://10.0.0.1:7070/relay/b",
            "http://10.0.0.2:1",
        ];
        assert_eq!(binding(0, &urls).local_ranks(), 2);
        assert_eq!(binding(2, &urls).local_ranks(), 1);
        assert_eq!(binding(4, &urls).local_ranks(), 1);
    }

    #[test]
    fn bindings_name_origins_and_a_secret_token() {
        let pinned = "https://h:2/relay/y#sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";
        assert!(binding(0, &["http://127.0.0.1:1", "https://h:2/relay/x", "http://[::1]:3/", pinned]).validate().is_ok());
        for bad in [
            "http://127.0.0.1:18700/internal/admin/reset?confirm=yes&x=",
            "http://127.0.0.1:99999",
            "http://[::1",
            "ftp://x",
            "https://h:2/relay/y#sha256=short",
            "https://h:2/relay/y#other",
            "http://127.0.0.1:1#sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU",
        ] {
            let e = binding(0, &["http://127.0.0.1:1", bad]).validate().unwrap_err();
            assert!(e.message.contains("endpoint of rank 1"), "{bad}: {}", e.message);
        }
        for token in ["", "t", &"t".repeat(15), &"t".repeat(257), "tttttttttttttttt\r\nX: y", "tttttttttttttttt tt"] {
            let mut b = binding(0, &["http://127.0.0.1:1"]);
            b.token = token.to_string();
            assert!(b.validate().unwrap_err().message.contains("token must be"), "{token:?}");
        }
    }
}
