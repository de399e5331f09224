//! A `multipart/related` package (MTOM/XOP) read as it arrives, and one
//! written (pure: no I/O; unit-tested below). The reader is fed the body's
//! pieces as they come and says what it found: a part's start (its
//! headers), its bytes, its end; it holds back no more than a boundary's
//! length of what it was given, so a part of any size passes through in
//! bounded memory (its caller decides where the bytes go).
//!
//! Rules (RFC 2046, 2387):
//! - The body is a preamble, then parts each after a line `--BOUNDARY`,
//!   then `--BOUNDARY--`; a part ends at the CRLF before its next boundary
//!   line. What follows the closing boundary is ignored.
//! - A part's headers end at an empty line and are at most [`MAX_HEAD`]
//!   bytes; its Content-ID (without `<>`) and Content-Transfer-Encoding
//!   are read, the rest ignored.
//! - At most [`MAX_PARTS`] parts; a body that ends before the closing
//!   boundary is refused.

/// Most parts in one package.
pub const MAX_PARTS: usize = 1000;
/// Largest head of one part.
pub const MAX_HEAD: usize = 16 << 10;

/// A part's headers, as far as they matter here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Head {
    pub content_id: Option<String>,
    /// Content-Transfer-Encoding, lower-cased ("" if none).
    pub encoding: String,
}

/// What the reader found in what it was given.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    Start(Head),
    Data(Vec<u8>),
    End,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Before the first boundary line.
    Preamble,
    /// Just after a boundary: `--` closes, CRLF starts a part.
    AfterBoundary,
    Head,
    Body,
    Done,
}

pub struct Reader {
    /// `\r\n--BOUNDARY`: what ends a part (the body is read as if it began with a CRLF).
    delimiter: Vec<u8>,
    state: State,
    held: Vec<u8>,
    parts: usize,
}

impl Reader {
    /// A reader of a package whose boundary is `boundary` (1 to 200 characters).
    pub fn new(boundary: &str) -> Result<Reader, String> {
        if boundary.is_empty() || boundary.len() > 200 {
            return Err("multipart/related without a boundary of 1 to 200 characters".into());
        }
        Ok(Reader { delimiter: format!("\r\n--{boundary}").into_bytes(), state: State::Preamble, held: b"\r\n".to_vec(), parts: 0 })
    }

    /// Read `piece`, saying what it completes into `out`.
    pub fn feed(&mut self, piece: &[u8], out: &mut Vec<Event>) -> Result<(), String> {
        self.held.extend_from_slice(piece);
        loop {
            match self.state {
                State::Done => {
                    self.held.clear(); // the epilogue
                    return Ok(());
                }
                State::Preamble => match find(&self.held, &self.delimiter) {
                    Some(at) => {
                        self.held.drain(..at + self.delimiter.len());
                        self.state = State::AfterBoundary;
                    }
                    None => {
                        self.keep_tail();
                        return Ok(());
                    }
                },
                State::AfterBoundary => {
                    if self.held.len() < 2 {
                        return Ok(());
                    }
                    if self.held.starts_with(b"--") {
                        self.state = State::Done;
                        continue;
                    }
                    // Linear white space may pad a boundary line (RFC 2046).
                    let Some(eol) = find(&self.held, b"\r\n") else {
                        if self.held.len() > 256 {
                            return Err("a boundary line does not end with CRLF".into());
                        }
                        return Ok(());
                    };
                    if !self.held[..eol].iter().all(|b| *b == b' ' || *b == b'\t') {
                        return Err("a boundary line does not end with CRLF".into());
                    }
                    self.held.drain(..eol + 2);
                    self.parts += 1;
                    if self.parts > MAX_PARTS {
                        return Err(format!("a package of more than {MAX_PARTS} parts"));
                    }
                    self.state = State::Head;
                }
                State::Head => {
                    let end = if self.held.starts_with(b"\r\n") { Some(0) } else { find(&self.held, b"\r\n\r\n").map(|e| e + 2) };
                    let Some(end) = end else {
                        if self.held.len() > MAX_HEAD {
                            return Err(format!("a part's headers are over {MAX_HEAD} bytes"));
                        }
                        return Ok(());
                    };
                    if end > MAX_HEAD {
                        return Err(format!("a part's headers are over {MAX_HEAD} bytes"));
                    }
                    let head = head(&self.held[..end])?;
                    self.held.drain(..end + 2);
                    out.push(Event::Start(head));
                    self.state = State::Body;
                }
                State::Body => match find(&self.held, &self.delimiter) {
                    Some(at) => {
                        if at > 0 {
                            out.push(Event::Data(self.held[..at].to_vec()));
                        }
                        out.push(Event::End);
                        self.held.drain(..at + self.delimiter.len());
                        self.state = State::AfterBoundary;
                    }
                    None => {
                        // All but what may be the start of a delimiter.
                        let safe = self.held.len().saturating_sub(self.delimiter.len() - 1);
                        if safe > 0 {
                            out.push(Event::Data(self.held.drain(..safe).collect()));
                        }
                        return Ok(());
                    }
                },
            }
        }
    }

    /// The body has ended: whether the package was whole.
    pub fn finish(&self) -> Result<(), String> {
        match self.state {
            State::Done => Ok(()),
            _ => Err("the package has no closing boundary".into()),
        }
    }

    /// In the preamble, only what may be the start of the first delimiter matters.
    fn keep_tail(&mut self) {
        let keep = self.delimiter.len() - 1;
        if self.held.len() > keep {
            self.held.drain(..self.held.len() - keep);
        }
    }
}

fn head(bytes: &[u8]) -> Result<Head, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "a part's headers are not text".to_string())?;
    let mut head = Head::default();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or_else(|| format!("a malformed part header {line:?}"))?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-id" => head.content_id = Some(value.trim().trim_matches(|c| c == '<' || c == '>').to_string()),
            "content-transfer-encoding" => head.encoding = value.trim().to_ascii_lowercase(),
            _ => {}
        }
    }
    Ok(head)
}

/// A part's bytes as sent with Content-Transfer-Encoding `encoding`, decoded.
pub fn decode(encoding: &str, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    use base64::Engine;
    match encoding {
        "" | "binary" | "8bit" | "7bit" => Ok(bytes),
        "base64" => {
            let text: Vec<u8> = bytes.into_iter().filter(|b| !b.is_ascii_whitespace()).collect();
            base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("a base64 part: {e}"))
        }
        other => Err(format!("Content-Transfer-Encoding {other:?} is not read here")),
    }
}

/// Whether a part of Content-Transfer-Encoding `encoding` is its bytes as they are.
pub fn is_binary(encoding: &str) -> bool {
    matches!(encoding, "" | "binary" | "8bit" | "7bit")
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// A boundary for a package whose parts are `parts` (none of them holds it).
pub fn boundary_for(random: &str) -> String {
    format!("mpiws-mtom-{random}")
}

/// A part's header lines, before its bytes: the boundary line, its media
/// type and Content-ID, and the empty line (`first`: no CRLF before it).
pub fn part_head(boundary: &str, media: &str, content_id: &str, first: bool) -> String {
    let crlf = if first { "" } else { "\r\n" };
    format!("{crlf}--{boundary}\r\nContent-Type: {media}\r\nContent-Transfer-Encoding: binary\r\nContent-ID: <{content_id}>\r\n\r\n")
}

/// The closing boundary line.
pub fn closing(boundary: &str) -> String {
    format!("\r\n--{boundary}--\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the reader says of `body` fed in pieces of `n` bytes, each part's data joined.
    fn read(body: &[u8], n: usize) -> Result<Vec<(Head, Vec<u8>)>, String> {
        let mut r = Reader::new("B")?;
        let mut events = Vec::new();
        for piece in body.chunks(n.max(1)) {
            r.feed(piece, &mut events)?;
        }
        r.finish()?;
        let mut parts: Vec<(Head, Vec<u8>)> = Vec::new();
        for e in events {
            match e {
                Event::Start(h) => parts.push((h, Vec::new())),
                Event::Data(d) => parts.last_mut().expect("a part").1.extend(d),
                Event::End => {}
            }
        }
        Ok(parts)
    }

    #[test]
    fn parts_come_whole_however_the_body_is_cut() {
        let body = b"preamble\r\n--B\r\nContent-ID: <root>\r\n\r\n<x/>\r\n--B  \r\nContent-ID: <a@b>\r\nContent-Transfer-Encoding: Binary\r\n\r\n\x00\r\n--not\r\n-B\r\n\r\n--B\r\n\r\nno head\r\n--B--\r\nepilogue --B\r\n";
        for n in [1, 2, 3, 5, 7, 64, body.len()] {
            let parts = read(body, n).unwrap();
            assert_eq!(parts.len(), 3, "pieces of {n}");
            assert_eq!(parts[0], (Head { content_id: Some("root".into()), encoding: String::new() }, b"<x/>".to_vec()));
            assert_eq!(parts[1].0, Head { content_id: Some("a@b".into()), encoding: "binary".into() });
            assert_eq!(parts[1].1, b"\x00\r\n--not\r\n-B\r\n".to_vec(), "a boundary's look-alikes are data");
            assert_eq!(parts[2], (Head::default(), b"no head".to_vec()));
        }
    }

    #[test]
    fn a_large_part_passes_through_holding_back_no_more_than_a_boundary() {
        let mut r = Reader::new("B").unwrap();
        let mut events = Vec::new();
        r.feed(b"--B\r\nContent-ID: <p>\r\n\r\n", &mut events).unwrap();
        let piece = vec![7u8; 1 << 20];
        for _ in 0..64 {
            r.feed(&piece, &mut events).unwrap();
            assert!(r.held.len() < 8, "held back {}", r.held.len());
            events.clear();
        }
        r.feed(b"\r\n--B--", &mut events).unwrap();
        r.finish().unwrap();
        assert_eq!(events.last(), Some(&Event::End));
    }

    #[test]
    fn what_is_no_whole_package_is_refused() {
        assert!(read(b"--B\r\n\r\nx\r\n--B", 3).unwrap_err().contains("closing boundary"));
        assert!(read(b"--Bxx\r\n\r\n", 3).unwrap_err().contains("CRLF"));
        assert!(read(b"no boundary at all", 3).unwrap_err().contains("closing boundary"));
        let long = format!("--B\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(read(long.as_bytes(), 100).unwrap_err().contains("headers are over"));
        let many = "\r\n--B\r\n\r\nx".repeat(MAX_PARTS + 1) + "\r\n--B--";
        assert!(read(many.as_bytes(), 4096).unwrap_err().contains("more than"));
        assert!(Reader::new("").is_err() && Reader::new(&"b".repeat(201)).is_err());
    }

    #[test]
    fn what_is_written_is_read_back() {
        let b = boundary_for("0123");
        let mut body = part_head(&b, "application/xop+xml", "root", true).into_bytes();
        body.extend_from_slice(b"<e/>");
        body.extend_from_slice(part_head(&b, "application/octet-stream", "out@1", false).as_bytes());
        body.extend_from_slice(&[1, 2, 3]);
        body.extend_from_slice(closing(&b).as_bytes());
        let mut r = Reader::new(&b).unwrap();
        let mut events = Vec::new();
        r.feed(&body, &mut events).unwrap();
        r.finish().unwrap();
        let data: Vec<&Event> = events.iter().filter(|e| matches!(e, Event::Data(_))).collect();
        assert_eq!(data, [&Event::Data(b"<e/>".to_vec()), &Event::Data(vec![1, 2, 3])]);
    }
}
