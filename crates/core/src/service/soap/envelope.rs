//! A SOAP 1.2 request read from its HTTP body (plain, or MTOM: a
//! `multipart/related` package whose root is the envelope and whose other
//! parts are its binary values), and answers and faults written (pure:
//! unit-tested below).
//!
//! Rules:
//! - SOAP 1.2 only: an envelope of SOAP 1.1's namespace is a
//!   `VersionMismatch` fault; a header block marked `mustUnderstand` is a
//!   `MustUnderstand` fault, but the one understood here: `session` of
//!   `urn:mpiws:session`, the id of the caller's session a program's job runs
//!   in (as the HTTP header `Mpiws-Session`); an operation that runs in no
//!   session (the service interface's, a rank's) refuses it.
//! - The document is UTF-8 (its declaration and the Content-Type's
//!   `charset` may say so, or nothing): another encoding is refused,
//!   never read as if it were UTF-8.
//! - The body holds exactly one element: the operation.
//! - MTOM/XOP (`mtom` reads the package): the root part is the one `start`
//!   names, else the first; a part is found by its `Content-ID`, named in
//!   an `xop:Include` as `cid:ID` (percent-encoded); parts are binary
//!   (`binary`, `8bit`, `7bit` or no `Content-Transfer-Encoding`) or
//!   `base64`; two parts of one Content-ID are refused. A program's request
//!   is read as it arrives instead (`receive`), by the same rules.
//! - A fault's HTTP status is the one the endpoint's JSON routes answer
//!   for the same refusal; its code is `Sender` below 500, `Receiver` from
//!   500, with the status and the error's class in its detail.

use std::collections::HashMap;

use super::mtom::{self, Event, Head};
use super::wsdl::{escape, SESSION_NS};
use super::xml::{self, Element};
use crate::wire::url::percent_decode;

pub const SOAP12: &str = "http://www.w3.org/2003/05/soap-envelope";
const SOAP11: &str = "http://schemas.xmlsoap.org/soap/envelope/";
pub const XOP: &str = "http://www.w3.org/2004/08/xop/include";
pub const FAULT_NS: &str = "urn:mpiws:fault";

/// A package's binary parts, by Content-ID (without `<>`).
pub type Attachments = HashMap<String, Attachment>;

/// A binary part: its bytes, or (a program's request, read as it arrived)
/// the URL of the file it was written to, which a job is given as an upload's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attachment {
    Bytes(Vec<u8>),
    Upload(String),
}

/// What a request is, or why it is refused: a fault code and a message.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

/// A request that is not what SOAP 1.2 (or MTOM) says it is.
pub fn sender(message: impl Into<String>) -> Refusal {
    Refusal { code: "Sender", message: message.into() }
}

/// The operation element of a request, the package's parts, and the
/// session its `session` header block names.
#[derive(Debug)]
pub struct Request {
    pub operation: Element,
    pub attachments: Attachments,
    pub session: Option<String>,
}

/// A Content-Type header's media type and parameters (names lower-cased).
pub fn media_type(value: &str) -> (String, HashMap<String, String>) {
    let mut pieces = value.split(';');
    let essence = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
    let params = pieces
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"').to_string()))
        .collect();
    (essence, params)
}

/// Whether a request of Content-Type `content_type` is an MTOM package
/// (its parameters), a plain envelope (None), or no SOAP 1.2 request.
pub fn kind(content_type: &str) -> Result<Option<HashMap<String, String>>, Refusal> {
    let (essence, params) = media_type(content_type);
    if let Some(charset) = params.get("charset").filter(|c| !c.eq_ignore_ascii_case("utf-8")) {
        return Err(sender(format!("the request's charset is {charset:?}: this endpoint reads UTF-8 only")));
    }
    match essence.as_str() {
        "application/soap+xml" => Ok(None),
        "multipart/related" => Ok(Some(params)),
        "text/xml" => Err(Refusal {
            code: "VersionMismatch",
            message: "text/xml is SOAP 1.1: this endpoint speaks SOAP 1.2 (application/soap+xml)".into(),
        }),
        _ => Err(sender(format!("a SOAP 1.2 request is application/soap+xml, or multipart/related (MTOM), not {content_type:?}"))),
    }
}

/// Read a request whose Content-Type is `content_type`, its body whole.
pub fn read(content_type: &str, body: &[u8]) -> Result<Request, Refusal> {
    match kind(content_type)? {
        None => operation(body, Attachments::new()),
        Some(params) => {
            let (root, attachments) = package(&params, body)?;
            operation(&root, attachments)
        }
    }
}

/// As [`read`], for an operation that runs in no session (the service
/// interface's, a rank's): one whose envelope names a session is refused.
pub fn read_sessionless(content_type: &str, body: &[u8]) -> Result<Request, Refusal> {
    let request = read(content_type, body)?;
    match request.session {
        Some(_) => Err(sender("the session header block places a program's job: this operation runs in no session")),
        None => Ok(request),
    }
}

/// The operation of the envelope `root`, whose package's other parts are `attachments`.
pub fn operation(root: &[u8], attachments: Attachments) -> Result<Request, Refusal> {
    let envelope = xml::parse(root).map_err(sender)?;
    if envelope.name != "Envelope" || envelope.ns != SOAP12 {
        if envelope.ns == SOAP11 {
            return Err(Refusal { code: "VersionMismatch", message: "a SOAP 1.1 envelope: this endpoint speaks SOAP 1.2".into() });
        }
        return Err(sender(format!("the document is no SOAP 1.2 Envelope but {{{}}}{}", envelope.ns, envelope.name)));
    }
    let mut session = None;
    if let Some(header) = envelope.children.iter().find(|c| c.name == "Header" && c.ns == SOAP12) {
        for block in &header.children {
            if block.ns == SESSION_NS && block.name == "session" {
                let id = block.text.trim();
                if id.is_empty() || session.is_some() {
                    return Err(sender("the session header block is one session's id"));
                }
                session = Some(id.to_string());
                continue;
            }
            let must = block.attrs.iter().any(|(ns, n, v)| ns == SOAP12 && n == "mustUnderstand" && (v == "true" || v == "1"));
            if must {
                return Err(Refusal {
                    code: "MustUnderstand",
                    message: format!("header block {{{}}}{} is not understood here", block.ns, block.name),
                });
            }
        }
    }
    let body =
        envelope.children.into_iter().find(|c| c.name == "Body" && c.ns == SOAP12).ok_or_else(|| sender("the envelope has no Body"))?;
    let mut ops = body.children.into_iter();
    match (ops.next(), ops.next()) {
        (Some(operation), None) => Ok(Request { operation, attachments, session }),
        _ => Err(sender("the Body holds exactly one element: the operation")),
    }
}

/// An MTOM package read whole: its root part's bytes, and the other parts by Content-ID.
fn package(params: &HashMap<String, String>, body: &[u8]) -> Result<(Vec<u8>, Attachments), Refusal> {
    let mut reader = mtom::Reader::new(params.get("boundary").map_or("", String::as_str)).map_err(sender)?;
    let mut events = Vec::new();
    reader.feed(body, &mut events).map_err(sender)?;
    reader.finish().map_err(sender)?;
    let mut parts = Parts::new(params);
    let mut current: Option<(Head, bool, Vec<u8>)> = None;
    for event in events {
        match (event, current.as_mut()) {
            (Event::Start(head), _) => {
                let root = parts.is_root(&head);
                current = Some((head, root, Vec::new()));
            }
            (Event::Data(d), Some((_, _, bytes))) => bytes.extend_from_slice(&d),
            (Event::End, Some(_)) => {
                let (head, root, bytes) = current.take().expect("matched above");
                let bytes = mtom::decode(&head.encoding, bytes).map_err(sender)?;
                match root {
                    true => parts.root(bytes)?,
                    false => parts.attachment(head.content_id, Attachment::Bytes(bytes))?,
                }
            }
            _ => unreachable!("the reader starts a part before its data and its end"),
        }
    }
    parts.whole()
}

/// A package's parts as they come: its root, and the others by Content-ID.
pub struct Parts {
    start: Option<String>,
    seen: usize,
    root: Option<Vec<u8>>,
    attachments: Attachments,
}

impl Parts {
    pub fn new(params: &HashMap<String, String>) -> Parts {
        let start = params.get("start").map(|s| s.trim_matches(|c| c == '<' || c == '>').to_string());
        Parts { start, seen: 0, root: None, attachments: Attachments::new() }
    }

    /// Whether the part that starts with `head` is the root: the one `start` names, else the first.
    pub fn is_root(&mut self, head: &Head) -> bool {
        self.seen += 1;
        match &self.start {
            Some(id) => head.content_id.as_deref() == Some(id.as_str()),
            None => self.seen == 1,
        }
    }

    pub fn root(&mut self, bytes: Vec<u8>) -> Result<(), Refusal> {
        match self.root.replace(bytes) {
            None => Ok(()),
            Some(_) => Err(sender("two parts are the package's start")),
        }
    }

    /// Another part (one without a Content-ID cannot be named: it is left out).
    pub fn attachment(&mut self, content_id: Option<String>, part: Attachment) -> Result<(), Refusal> {
        let Some(cid) = content_id else { return Ok(()) };
        match self.attachments.insert(cid.clone(), part) {
            None => Ok(()),
            Some(_) => Err(sender(format!("two parts have the Content-ID <{cid}>"))),
        }
    }

    /// The root and the attachments, once the package has ended.
    pub fn whole(self) -> Result<(Vec<u8>, Attachments), Refusal> {
        let root = self.root.ok_or_else(|| match &self.start {
            Some(id) => sender(format!("no part is the start, <{id}>")),
            None => sender("an empty package"),
        })?;
        Ok((root, self.attachments))
    }
}

/// The part an `xop:Include` in `value` names, if it holds one.
pub fn included<'a>(value: &Element, attachments: &'a Attachments) -> Result<Option<&'a Attachment>, String> {
    let Some(include) = value.children.iter().find(|c| c.name == "Include" && c.ns == XOP) else { return Ok(None) };
    let href = include.attr("href").ok_or("an xop:Include without href")?;
    let id = href.strip_prefix("cid:").ok_or_else(|| format!("xop:Include href {href:?} is not a cid: URL"))?;
    let id = percent_decode(id).ok_or_else(|| format!("xop:Include href {href:?}: a malformed escape"))?;
    attachments.get(&id).map(Some).ok_or_else(|| format!("no part has Content-ID <{id}>"))
}

/// A SOAP 1.2 envelope around `body` (elements, already XML).
pub fn envelope(body: &str) -> String {
    format!(r#"<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="{SOAP12}"><soap:Body>{body}</soap:Body></soap:Envelope>"#)
}

/// A fault: its code (`Sender`, `Receiver`, `VersionMismatch`,
/// `MustUnderstand`), its reason, and the HTTP status and error class it
/// stands for.
pub fn fault(code: &str, reason: &str, status: u16, class: Option<(i32, &str)>) -> String {
    let class = class.map_or(String::new(), |(c, name)| format!("<m:class>{c}</m:class><m:name>{}</m:name>", escape(name)));
    envelope(&format!(
        r#"<soap:Fault><soap:Code><soap:Value>soap:{code}</soap:Value></soap:Code><soap:Reason><soap:Text xml:lang="en">{}</soap:Text></soap:Reason><soap:Detail><m:error xmlns:m="{FAULT_NS}"><m:status>{status}</m:status>{class}</m:error></soap:Detail></soap:Fault>"#,
        escape(reason)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soap(body: &str) -> String {
        format!(r#"<s:Envelope xmlns:s="{SOAP12}"><s:Body>{body}</s:Body></s:Envelope>"#)
    }

    #[test]
    fn a_plain_request_is_its_one_operation() {
        let r =
            read("application/soap+xml; charset=utf-8; action=\"x\"", soap(r#"<call xmlns="urn:p"><x>1</x></call>"#).as_bytes()).unwrap();
        assert_eq!((r.operation.ns.as_str(), r.operation.name.as_str()), ("urn:p", "call"));
        assert_eq!(r.operation.child("x").unwrap().text, "1");
    }

    #[test]
    fn an_mtom_package_gives_its_parts_by_content_id() {
        let root = soap(
            r#"<call xmlns="urn:p"><f><value><xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:a%40b"/></value></f></call>"#,
        );
        let body = format!(
            "--B\r\nContent-Type: application/xop+xml\r\nContent-ID: <root>\r\n\r\n{root}\r\n--B\r\nContent-ID: <a@b>\r\nContent-Transfer-Encoding: binary\r\n\r\n\x00\x01--not-a-boundary\r\n--B--\r\n"
        );
        let r = read(r#"multipart/related; type="application/xop+xml"; start="<root>"; boundary="B""#, body.as_bytes()).unwrap();
        let value = r.operation.child("f").unwrap().child("value").unwrap();
        assert_eq!(included(value, &r.attachments).unwrap(), Some(&Attachment::Bytes(b"\x00\x01--not-a-boundary".to_vec())));
        let missing = Element {
            children: vec![Element {
                ns: XOP.into(),
                name: "Include".into(),
                attrs: vec![(String::new(), "href".into(), "cid:zz".into())],
                ..Element::default()
            }],
            ..Element::default()
        };
        assert!(included(&missing, &r.attachments).unwrap_err().contains("no part"));
    }

    #[test]
    fn what_is_no_soap_12_request_is_refused_with_its_fault_code() {
        let v11 = r#"<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body/></e:Envelope>"#;
        assert_eq!(read("application/soap+xml", v11.as_bytes()).unwrap_err().code, "VersionMismatch");
        assert_eq!(read("text/xml", b"<x/>").unwrap_err().code, "VersionMismatch");
        let must = format!(
            r#"<s:Envelope xmlns:s="{SOAP12}"><s:Header><h:session xmlns:h="urn:h" s:mustUnderstand="true">1</h:session></s:Header><s:Body><op/></s:Body></s:Envelope>"#
        );
        assert_eq!(read("application/soap+xml", must.as_bytes()).unwrap_err().code, "MustUnderstand");
        let session = |blocks: &str| {
            let doc = format!(
                r#"<s:Envelope xmlns:s="{SOAP12}" xmlns:m="{SESSION_NS}"><s:Header>{blocks}</s:Header><s:Body><op/></s:Body></s:Envelope>"#
            );
            read("application/soap+xml; charset=UTF-8", doc.as_bytes()).map(|r| r.session)
        };
        assert_eq!(session(r#"<m:session s:mustUnderstand="true"> s1 </m:session>"#).unwrap(), Some("s1".to_string()));
        assert_eq!(session("").unwrap(), None);
        let placed = format!(
            r#"<s:Envelope xmlns:s="{SOAP12}"><s:Header><m:session xmlns:m="{SESSION_NS}">s1</m:session></s:Header><s:Body><op/></s:Body></s:Envelope>"#
        );
        assert!(read_sessionless("application/soap+xml", placed.as_bytes()).unwrap_err().message.contains("no session"));
        for twice in ["<m:session>a</m:session><m:session>b</m:session>", "<m:session/>"] {
            assert!(session(twice).unwrap_err().message.contains("one session's id"), "{twice}");
        }
        let latin = b"<?xml version='1.0' encoding='ISO-8859-1'?><x>\xe9</x>";
        assert!(read("application/soap+xml", latin).unwrap_err().message.contains("UTF-8 only"));
        assert!(read("application/soap+xml; charset=iso-8859-1", soap("<op/>").as_bytes()).unwrap_err().message.contains("UTF-8 only"));
        for (ct, body, says) in [
            ("application/json", soap("<op/>"), "application/soap+xml"),
            ("application/soap+xml", soap("<a/><b/>"), "exactly one"),
            ("application/soap+xml", "<x/>".to_string(), "no SOAP 1.2 Envelope"),
            ("multipart/related", soap("<op/>"), "boundary"),
            ("multipart/related; boundary=B", "--B\r\n\r\n".to_string(), "closing boundary"),
        ] {
            let e = read(ct, body.as_bytes()).unwrap_err();
            assert!(e.code == "Sender" && e.message.contains(says), "{ct}: {e:?}");
        }
    }

    #[test]
    fn a_fault_says_its_code_reason_status_and_class() {
        let f = fault("Sender", "no <job>", 404, Some((12, "MPI_ERR_ARG")));
        let doc = xml::parse(f.as_bytes()).unwrap();
        let fault = doc.child("Body").unwrap().child("Fault").unwrap();
        assert_eq!(fault.child("Code").unwrap().child("Value").unwrap().text, "soap:Sender");
        assert_eq!(fault.child("Reason").unwrap().child("Text").unwrap().text, "no <job>");
        let detail = fault.child("Detail").unwrap().child("error").unwrap();
        assert_eq!((detail.child("status").unwrap().text.as_str(), detail.child("name").unwrap().text.as_str()), ("404", "MPI_ERR_ARG"));
    }
}
