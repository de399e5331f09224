//! URLs, parsed once, by one parser: every URL and port a user or the wire
//! gives the core (endpoints in a binding or on the command line, a job's
//! input by URL, a relay, a rendezvous) is read here and refused when
//! malformed, so that no URL quietly means another server than it names.
//!
//! The rules:
//! - http:// or https:// only, with a host;
//! - no user name or password (`user@host` hides the host from a reader);
//! - a port, if given, is 1 to 65535 (`:99999` is refused, never taken as 80);
//! - no fragment, but one: `#sha256=PIN` after a relayed URL (`/relay/NAME`,
//!   and anything under it), the pin of the endpoint behind the relay: the
//!   SHA-256 of its tunnel certificate's public key (SubjectPublicKeyInfo),
//!   43 characters of unpadded base64url. A client then reaches that
//!   endpoint through a TLS tunnel it verifies by that pin (`net::tunnel`),
//!   and `Url::tunnel` is the one place that takes such a URL apart; the
//!   fragment is never sent;
//! - an *endpoint* URL is an origin (scheme, host, port) and nothing else,
//!   or an origin and `/relay/NAME` (an endpoint reached through a relay),
//!   pinned or not: no other path, no query, no trailing slash.
//!
//! Paths are added to an endpoint URL with `join`, which keeps a pin last.

use std::fmt;

/// The longest URL taken (bytes).
pub const MAX_URL: usize = 2048;

/// The longest relay name (one path segment).
pub const MAX_RELAY_NAME: usize = 64;

/// What a pin's fragment starts with.
pub const PIN_PREFIX: &str = "sha256=";

/// A pin's length: 32 bytes in unpadded base64url.
pub const PIN_LEN: usize = 43;

/// An http(s) URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// https: TLS.
    pub tls: bool,
    /// The host, lower case, an IPv6 address without its brackets.
    pub host: String,
    /// The port: as given, or the scheme's (80, 443).
    pub port: u16,
    /// The path and query as given (`/` if none).
    pub path: String,
    /// The pin of the endpoint behind a relay (`#sha256=PIN`): PIN, checked.
    pub pin: Option<String>,
}

/// Where a pinned relayed URL leads (`Url::tunnel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// The relay: scheme, host and port (path `/`).
    pub relay: Url,
    /// The endpoint's name there.
    pub name: String,
    /// Its pin (unpadded base64url of 32 bytes).
    pub pin: String,
    /// The path and query at the endpoint itself (without `/relay/NAME`).
    pub path: String,
}

impl Tunnel {
    /// The path of the tunnel's upgrade request at the relay.
    pub fn upgrade_path(&self) -> String {
        format!("/relay/{}/tunnel", self.name)
    }
}

impl Url {
    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// `host:port`, an IPv6 host in brackets.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The relay name of an endpoint reached through a relay (`/relay/NAME`).
    pub fn relay(&self) -> Option<&str> {
        self.path.strip_prefix("/relay/")
    }

    /// A pinned URL taken apart: the relay, the name, the pin, the path
    /// at the endpoint. None without a pin (parse allows one only there).
    pub fn tunnel(&self) -> Option<Tunnel> {
        let pin = self.pin.clone()?;
        let (name, path) = relayed(&self.path)?;
        let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        let relay = Url { path: "/".into(), pin: None, ..self.clone() };
        Some(Tunnel { relay, name: name.to_string(), pin, path })
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme(), self.authority(), self.path)?;
        match &self.pin {
            Some(pin) => write!(f, "#{PIN_PREFIX}{pin}"),
            None => Ok(()),
        }
    }
}

/// `/relay/NAME[/rest|?query]`: the name and the rest.
fn relayed(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/relay/")?;
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (name, after) = rest.split_at(cut);
    valid_relay_name(name).then_some((name, after))
}

/// A pin's text: 43 characters of base64url that decode to 32 bytes
/// (canonically: the last character's unused bits are zero).
pub fn valid_pin(pin: &str) -> bool {
    use base64::Engine;
    pin.len() == PIN_LEN && base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(pin).is_ok_and(|b| b.len() == 32)
}

/// `base` (an endpoint's URL, or one under it) with `suffix` (a path that
/// starts with `/`, maybe a query) added: before the pin, which stays last.
pub fn join(base: &str, suffix: &str) -> String {
    match base.split_once('#') {
        Some((before, pin)) => format!("{}{suffix}#{pin}", before.trim_end_matches('/')),
        None => format!("{}{suffix}", base.trim_end_matches('/')),
    }
}

/// A URL without its pin (`#sha256=...`): the address alone, where a
/// document names where to send requests (the pin is the client's to check).
pub fn without_pin(url: &str) -> &str {
    url.split_once('#').map_or(url, |(before, _)| before)
}

/// A path segment as a URL carries it: all but letters, digits and `-._~` escaped.
pub fn percent_encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// `%XX` escapes decoded; None if one is malformed or the result is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit))?; // from_str_radix takes a '+'
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An http:// or https:// URL (see the module's rules).
pub fn parse(text: &str) -> Result<Url, String> {
    if text.len() > MAX_URL {
        return Err(format!("a URL is at most {MAX_URL} bytes; this one has {}", text.len()));
    }
    let (tls, rest) = if let Some(rest) = text.strip_prefix("http://") {
        (false, rest)
    } else if let Some(rest) = text.strip_prefix("https://") {
        (true, rest)
    } else {
        return Err(format!("{text:?} is not an http:// or https:// URL"));
    };
    let (rest, pin) = match rest.split_once('#') {
        None => (rest, None),
        Some((rest, fragment)) => match fragment.strip_prefix(PIN_PREFIX) {
            Some(pin) if valid_pin(pin) => (rest, Some(pin.to_string())),
            Some(_) => {
                return Err(format!(
                    "{text:?}: a pin is #{PIN_PREFIX} and {PIN_LEN} characters of base64url (the SHA-256 of a public key), as `mpiws serve --via-relay` prints it"
                ))
            }
            None => return Err(format!("{text:?}: a URL here has no fragment (#...) but a relayed endpoint's pin (#{PIN_PREFIX}...)")),
        },
    };
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    if authority.contains('@') {
        return Err(format!("{text:?}: a URL here carries no user name or password"));
    }
    let (host, port) = host_and_port(authority).map_err(|why| format!("{text:?}: {why}"))?;
    if let Some(bad) = path.bytes().find(|b| !b.is_ascii_graphic()) {
        return Err(format!("{text:?}: byte {bad:#04x} in its path (spaces and control characters are %-encoded in a URL)"));
    }
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    if pin.is_some() && relayed(&path).is_none() {
        return Err(format!("{text:?}: a pin (#{PIN_PREFIX}...) follows a relayed URL only (http(s)://HOST:PORT/relay/NAME)"));
    }
    Ok(Url { tls, host, port: port.unwrap_or(if tls { 443 } else { 80 }), path, pin })
}

/// An endpoint's URL: `http(s)://HOST[:PORT]` or
/// `http(s)://HOST[:PORT]/relay/NAME`, that one maybe pinned (`#sha256=PIN`).
pub fn endpoint(text: &str) -> Result<Url, String> {
    let url = parse(text)?;
    let unpinned = text.split_once('#').map_or(text, |(before, _)| before);
    let after_authority = unpinned.split_once("://").map_or("", |(_, r)| r.find(['/', '?']).map_or("", |i| &r[i..]));
    let fits = match after_authority {
        "" => true,
        p => p.strip_prefix("/relay/").is_some_and(valid_relay_name),
    };
    if !fits {
        return Err(format!(
            "{text:?} is not an endpoint URL: http(s)://HOST:PORT, or http(s)://HOST:PORT/relay/NAME[#sha256=PIN] for one behind a relay (no other path, no query, no trailing slash)"
        ));
    }
    Ok(url)
}

/// A relay name: 1 to 64 of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn valid_relay_name(name: &str) -> bool {
    (1..=MAX_RELAY_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && name != "."
        && name != ".."
}

/// A TCP port a user names: 1 to 65535.
pub fn port(text: &str) -> Result<u16, String> {
    match text.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) && text.bytes().all(|b| b.is_ascii_digit()) => Ok(p as u16),
        _ => Err(format!("port {text:?} is not a number from 1 to 65535")),
    }
}

/// `host[:port]` of an authority: a name of letters, digits, `.`, `-`, `_`,
/// an IPv4 address, or an IPv6 address in brackets.
fn host_and_port(authority: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let Some((v6, after)) = inner.split_once(']') else { return Err("an IPv6 host opens '[' and does not close it".into()) };
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("[{v6}] is not an IPv6 address"));
        }
        match after {
            "" => (v6, None),
            p => (v6, Some(p.strip_prefix(':').ok_or_else(|| format!("{p:?} after the IPv6 host"))?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let bracketed = authority.starts_with('[');
    let name_ok = |h: &str| !h.is_empty() && h.len() <= 253 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
    if !bracketed && !name_ok(host) {
        return Err(if host.is_empty() { "it names no host".into() } else { format!("{host:?} is not a host name or address") });
    }
    let port = match port {
        None => None,
        Some(p) => Some(self::port(p)?),
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// URL path segments (percent-encoded) as a relative path of plain names, or None.
pub fn decode_path(segments: &[&str]) -> Option<String> {
    let mut names = Vec::with_capacity(segments.len());
    for seg in segments {
        let name = percent_decode(seg)?;
        if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
            return None;
        }
        names.push(name);
    }
    Some(names.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart() {
        let u = parse("https://Example.org/a/b?c=d").unwrap();
        assert_eq!((u.tls, u.host.as_str(), u.port, u.path.as_str()), (true, "example.org", 443, "/a/b?c=d"));
        let u = parse("http://[::1]:8470").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.authority(), u.path.as_str()), ("::1", 8470, "[::1]:8470".to_string(), "/"));
        assert_eq!(parse("http://h?x=1").unwrap().path, "/?x=1");
        assert_eq!(parse("http://127.0.0.1:8470/x").unwrap().to_string(), "http://127.0.0.1:8470/x");
    }

    #[test]
    fn a_port_out_of_range_is_refused_never_defaulted() {
        for bad in [
            "http://127.0.0.1:99999",
            "http://127.0.0.1:65536",
            "http://127.0.0.1:70000",
            "http://h:0",
            "http://h:-1",
            "http://h:+80",
            "http://h:",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse("http://h:65535").unwrap().port, 65535);
        assert_eq!(port("8470"), Ok(8470));
        for bad in ["0", "65536", "99999", "", "+1", "1.0", "80 "] {
            assert!(port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_urls_say_why() {
        for (bad, why) in [
            ("ftp://x", "not an http"),
            ("http://[::1", "does not close"),
            ("http://[zz]:1", "not an IPv6"),
            ("http://u:p@h/", "user name"),
            ("http:///x", "no host"),
            ("http://h/x#y", "fragment"),
            ("http://h/a b", "byte 0x20"),
            ("http://h%41/", "not a host"),
            ("http://::1:80/", "not a host"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(parse(&format!("http://h/{}", "x".repeat(MAX_URL))).unwrap_err().contains("at most"));
    }

    #[test]
    fn relay_names_are_one_plain_segment() {
        for good in ["lab", "node-01", "a.b_c", &"x".repeat(MAX_RELAY_NAME)] {
            assert!(valid_relay_name(good), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "é", "a%2f", &"x".repeat(MAX_RELAY_NAME + 1)] {
            assert!(!valid_relay_name(bad), "{bad}");
        }
    }

    #[test]
    fn an_endpoint_is_an_origin_or_a_relayed_one() {
        assert_eq!(endpoint("http://127.0.0.1:8470").unwrap().port, 8470);
        assert_eq!(endpoint("https://relay.example:443/relay/laptop").unwrap().relay(), Some("laptop"));
        for bad in [
            "http://127.0.0.1:18700/internal/admin/reset?confirm=yes&x=",
            "http://127.0.0.1:8470/",
            "http://127.0.0.1:8470?x",
            "http://h/relay/",
            "http://h/relay/a/b",
            "http://h/relay/..",
            "http://127.0.0.1:99999",
        ] {
            assert!(endpoint(bad).is_err(), "{bad}");
        }
    }

    const PIN: &str = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";

    #[test]
    fn a_relayed_url_may_carry_its_endpoints_pin() {
        let text = format!("https://relay.example:8443/relay/lab#sha256={PIN}");
        let u = endpoint(&text).unwrap();
        assert_eq!((u.relay(), u.pin.as_deref(), u.path.as_str()), (Some("lab"), Some(PIN), "/relay/lab"));
        assert_eq!(u.to_string(), text);
        let t = u.tunnel().unwrap();
        assert_eq!(
            (t.relay.to_string().as_str(), t.name.as_str(), t.pin.as_str(), t.path.as_str()),
            ("https://relay.example:8443/", "lab", PIN, "/")
        );
        assert_eq!(t.upgrade_path(), "/relay/lab/tunnel");
        // under it: the endpoint's own path, its query
        let deep = parse(&join(&text, "/domains/d/ranks/1?wait=5")).unwrap();
        assert_eq!(deep.to_string(), format!("https://relay.example:8443/relay/lab/domains/d/ranks/1?wait=5#sha256={PIN}"));
        assert_eq!(deep.tunnel().unwrap().path, "/domains/d/ranks/1?wait=5");
        assert_eq!(parse("http://h/relay/lab/x").unwrap().tunnel(), None, "no pin: through the relay as it is");
        assert_eq!(join("http://h:1/", "/run"), "http://h:1/run");
    }

    #[test]
    fn malformed_pins_are_refused() {
        let short = &PIN[..42];
        let padded = format!("{}=", &PIN[..42]);
        // 'V' ends the string with nonzero unused bits: not the canonical text of any 32 bytes.
        let noncanonical = format!("{}V", &PIN[..42]);
        for (bad, why) in [
            (format!("http://h/relay/a#sha256={short}"), "43 characters"),
            (format!("http://h/relay/a#sha256={padded}"), "43 characters"),
            (format!("http://h/relay/a#sha256={PIN}x"), "43 characters"),
            (format!("http://h/relay/a#sha256={}", PIN.replace('-', "+")), "43 characters"),
            (format!("http://h/relay/a#sha256={noncanonical}"), "43 characters"),
            (format!("http://h/relay/a#sha1={PIN}"), "no fragment"),
            (format!("http://h/relay/a#{PIN}"), "no fragment"),
            (format!("http://h:1#sha256={PIN}"), "relayed URL only"),
            (format!("http://h:1/other#sha256={PIN}"), "relayed URL only"),
            (format!("http://h:1/relay/..#sha256={PIN}"), "relayed URL only"),
        ] {
            let e = parse(&bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(endpoint(&format!("http://h/relay/a/b#sha256={PIN}")).is_err());
        assert!(endpoint(&format!("http://h/relay/a/#sha256={PIN}")).is_err());
        assert!(valid_pin(PIN) && !valid_pin(&noncanonical));
    }
}
