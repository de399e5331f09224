//! A SOAP 1.2 request read from its HTTP body (plain, or MTOM: a
//! `multipart/related` package whose root is the envelope and whose other
//! parts are its binary values), and answers and faults written (pure:
//! unit-tested below).
//!
//! Rules:
//! - SOAP 1.2 only: an envelope of SOAP 1.1's namespace is a
//!   `VersionMismatch` fault; a header block marked `mustUnderstand` is a
//!   `MustUnderstand` fault (no header block is understood here).
//! - The body holds exactly one element: the operation.
//! - MTOM/XOP: the root part is the one `start` names, else the first; a
//!   part is found by its `Content-ID`, named in an `xop:Include` as
//!   `cid:ID` (percent-encoded); parts are binary (`binary`, `8bit`, `7bit`
//!   or no `Content-Transfer-Encoding`) or `base64`; two parts of one
//!   Content-ID are refused. At most [`MAX_PARTS`] parts.
//! - A fault's HTTP status is the one the endpoint's JSON routes answer
//!   for the same refusal; its code is `Sender` below 500, `Receiver` from
//!   500, with the status and the error's class in its detail.

use std::collections::HashMap;

use base64::Engine;

use super::wsdl::escape;
use super::xml::{self, Element};
use crate::wire::url::percent_decode;

pub const SOAP12: &str = "http://www.w3.org/2003/05/soap-envelope";
const SOAP11: &str = "http://schemas.xmlsoap.org/soap/envelope/";
pub const XOP: &str = "http://www.w3.org/2004/08/xop/include";
pub const FAULT_NS: &str = "urn:mpiws:fault";
pub const MAX_PARTS: usize = 1000;

/// A package's binary parts, by Content-ID (without `<>`).
pub type Attachments = HashMap<String, Vec<u8>>;

/// What a request is, or why it is refused: a fault code and a message.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn sender(message: impl Into<String>) -> Refusal {
    Refusal { code: "Sender", message: message.into() }
}

/// The operation element of a request, and the package's parts.
#[derive(Debug)]
pub struct Request {
    pub operation: Element,
    pub attachments: Attachments,
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

/// Read a request whose Content-Type is `content_type`.
pub fn read(content_type: &str, body: &[u8]) -> Result<Request, Refusal> {
    let (essence, params) = media_type(content_type);
    let (root, attachments) = match essence.as_str() {
        "application/soap+xml" => (body.to_vec(), Attachments::new()),
        "multipart/related" => package(&params, body)?,
        "text/xml" => {
            return Err(Refusal {
                code: "VersionMismatch",
                message: "text/xml is SOAP 1.1: this endpoint speaks SOAP 1.2 (application/soap+xml)".into(),
            })
        }
        _ => return Err(sender(format!("a SOAP 1.2 request is application/soap+xml, or multipart/related (MTOM), not {content_type:?}"))),
    };
    let envelope = xml::parse(&root).map_err(sender)?;
    if envelope.name != "Envelope" || envelope.ns != SOAP12 {
        if envelope.ns == SOAP11 {
            return Err(Refusal { code: "VersionMismatch", message: "a SOAP 1.1 envelope: this endpoint speaks SOAP 1.2".into() });
        }
        return Err(sender(format!("the document is no SOAP 1.2 Envelope but {{{}}}{}", envelope.ns, envelope.name)));
    }
    if let Some(header) = envelope.children.iter().find(|c| c.name == "Header" && c.ns == SOAP12) {
        let must = |b: &&Element| b.attrs.iter().any(|(ns, n, v)| ns == SOAP12 && n == "mustUnderstand" && (v == "true" || v == "1"));
        if let Some(block) = header.children.iter().find(must) {
            return Err(Refusal {
                code: "MustUnderstand",
                message: format!("header block {{{}}}{} is not understood here", block.ns, block.name),
            });
        }
    }
    let body =
        envelope.children.into_iter().find(|c| c.name == "Body" && c.ns == SOAP12).ok_or_else(|| sender("the envelope has no Body"))?;
    let mut ops = body.children.into_iter();
    match (ops.next(), ops.next()) {
        (Some(operation), None) => Ok(Request { operation, attachments }),
        _ => Err(sender("the Body holds exactly one element: the operation")),
    }
}

/// An MTOM package: its root part's bytes, and the other parts by Content-ID.
fn package(params: &HashMap<String, String>, body: &[u8]) -> Result<(Vec<u8>, Attachments), Refusal> {
    let boundary =
        params.get("boundary").filter(|b| !b.is_empty() && b.len() <= 200).ok_or_else(|| sender("multipart/related without a boundary"))?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    let mut first = true;
    loop {
        let at = find(rest, delimiter.as_bytes()).ok_or_else(|| sender("the package has no closing boundary"))?;
        if !first {
            // the part is what came before "\r\n--boundary"
            let content = rest[..at].strip_suffix(b"\r\n").ok_or_else(|| sender("a part does not end with CRLF before its boundary"))?;
            parts.push(part(content)?);
            if parts.len() > MAX_PARTS {
                return Err(sender(format!("a package of more than {MAX_PARTS} parts")));
            }
        }
        first = false;
        rest = &rest[at + delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").ok_or_else(|| sender("a boundary line does not end with CRLF"))?;
    }
    let start = params.get("start").map(|s| s.trim_matches(|c| c == '<' || c == '>').to_string());
    let index = match &start {
        Some(id) => {
            parts.iter().position(|(cid, _)| cid.as_deref() == Some(id)).ok_or_else(|| sender(format!("no part is the start, <{id}>")))?
        }
        None if !parts.is_empty() => 0,
        None => return Err(sender("an empty package")),
    };
    let (_, root) = parts.remove(index);
    let mut attachments = Attachments::new();
    for (cid, bytes) in parts {
        if let Some(cid) = cid {
            if attachments.insert(cid.clone(), bytes).is_some() {
                return Err(sender(format!("two parts have the Content-ID <{cid}>")));
            }
        }
    }
    Ok((root, attachments))
}

/// A part's Content-ID and decoded bytes.
fn part(content: &[u8]) -> Result<(Option<String>, Vec<u8>), Refusal> {
    let split = find(content, b"\r\n\r\n").ok_or_else(|| sender("a part without its headers' end"))?;
    let head = std::str::from_utf8(&content[..split]).map_err(|_| sender("a part's headers are not text"))?;
    let bytes = &content[split + 4..];
    let mut cid = None;
    let mut encoding = String::new();
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or_else(|| sender(format!("a malformed part header {line:?}")))?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-id" => cid = Some(value.trim().trim_matches(|c| c == '<' || c == '>').to_string()),
            "content-transfer-encoding" => encoding = value.trim().to_ascii_lowercase(),
            _ => {}
        }
    }
    let bytes = match encoding.as_str() {
        "" | "binary" | "8bit" | "7bit" => bytes.to_vec(),
        "base64" => {
            let text: Vec<u8> = bytes.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
            base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| sender(format!("a base64 part: {e}")))?
        }
        other => return Err(sender(format!("Content-Transfer-Encoding {other:?} is not read here"))),
    };
    Ok((cid, bytes))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// The bytes an `xop:Include` in `value` names, if it holds one.
pub fn included<'a>(value: &Element, attachments: &'a Attachments) -> Result<Option<&'a [u8]>, String> {
    let Some(include) = value.children.iter().find(|c| c.name == "Include" && c.ns == XOP) else { return Ok(None) };
    let href = include.attr("href").ok_or("an xop:Include without href")?;
    let id = href.strip_prefix("cid:").ok_or_else(|| format!("xop:Include href {href:?} is not a cid: URL"))?;
    let id = percent_decode(id).ok_or_else(|| format!("xop:Include href {href:?}: a malformed escape"))?;
    attachments.get(&id).map(|b| Some(b.as_slice())).ok_or_else(|| format!("no part has Content-ID <{id}>"))
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
        assert_eq!(included(value, &r.attachments).unwrap(), Some(&b"\x00\x01--not-a-boundary"[..]));
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
