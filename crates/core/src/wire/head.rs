//! The head of an HTTP answer read off a raw connection, where an upgrade
//! (a stream, a relay's turned-around connection) leaves no HTTP client to
//! read it: its status, the body length it announces, whether it says when
//! to try again. Read byte by byte by the caller, since what follows the
//! head is no longer HTTP.

use http::StatusCode;

pub struct Head {
    /// BAD_GATEWAY where the status line is unreadable.
    pub status: StatusCode,
    /// The announced body length (0 if none or unreadable), at most `max_body`.
    pub content_length: usize,
    pub retry_after: bool,
    /// An upgrade's answer took the same-host channel (`mpiws-local: 1`, `net::local`).
    pub local: bool,
}

impl Head {
    pub fn parse(head: &[u8], max_body: usize) -> Head {
        let text = String::from_utf8_lossy(head);
        let code: u16 = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let field = |name: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        Head {
            status: StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY),
            content_length: field("content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0).min(max_body),
            retry_after: field("retry-after").is_some(),
            local: field("mpiws-local").is_some_and(|v| v == "1"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_gives_status_length_and_retry() {
        let h = Head::parse(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 42\r\nRetry-After: 1\r\n\r\n", 1 << 20);
        assert_eq!((h.status, h.content_length, h.retry_after), (StatusCode::SERVICE_UNAVAILABLE, 42, true));
        let h = Head::parse(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", 10);
        assert_eq!((h.status, h.content_length, h.retry_after), (StatusCode::SWITCHING_PROTOCOLS, 0, false));
        let h = Head::parse(b"garbage\r\nContent-Length: 999999\r\n\r\n", 4096);
        assert_eq!((h.status, h.content_length), (StatusCode::BAD_GATEWAY, 4096));
    }
}
