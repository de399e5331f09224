//! The one XML parser of the SOAP face: a document read into a small tree
//! of elements with their namespaces, under rules that keep XML's known
//! attacks out (pure: unit-tested below).
//!
//! Rules:
//! - No DTD (`<!DOCTYPE`): refused, so no entity is ever declared; a
//!   reference to any entity but the five predefined ones and character
//!   references is refused (no expansion, no external fetch: quick-xml
//!   reads nothing but the given bytes).
//! - No processing instruction but the XML declaration, which may declare
//!   no encoding but UTF-8 (bytes that are no UTF-8 are refused too).
//! - At most [`MAX_DEPTH`] levels and [`MAX_ELEMENTS`] elements; the bytes
//!   themselves are bounded by the request's body limit.
//! - Text is kept only in elements without child elements (whitespace
//!   between elements is dropped); CDATA is text.
//! - A character XML 1.0 does not allow (a control character, U+FFFE,
//!   U+FFFF), raw or by reference, is refused: what is read here can be
//!   quoted back in an answer.

use super::wsdl::xml_char;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

pub const MAX_DEPTH: usize = 64;
pub const MAX_ELEMENTS: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Element {
    /// The namespace URI ("" if none).
    pub ns: String,
    pub name: String,
    /// Attributes: namespace URI ("" if none), local name, value.
    pub attrs: Vec<(String, String, String)>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child named `name` (any namespace).
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The attribute `name` (any namespace).
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(_, n, _)| n == name).map(|(_, _, v)| v.as_str())
    }
}

fn namespace(r: ResolveResult) -> Result<String, String> {
    match r {
        ResolveResult::Bound(ns) => allowed(&String::from_utf8_lossy(ns.as_ref())).map(str::to_string),
        ResolveResult::Unbound => Ok(String::new()),
        ResolveResult::Unknown(p) => Err(format!("undeclared namespace prefix {:?}", String::from_utf8_lossy(&p))),
    }
}

/// `bytes` as a tree; an error says what is wrong, and where.
pub fn parse(bytes: &[u8]) -> Result<Element, String> {
    let mut reader = NsReader::from_reader(bytes);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut count = 0usize;
    loop {
        let at = reader.buffer_position();
        let (ns, event) = reader.read_resolved_event().map_err(|e| format!("malformed XML at byte {at}: {e}"))?;
        let ns = match &event {
            Event::Start(_) | Event::Empty(_) => Some(namespace(ns)?),
            _ => None,
        };
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                count += 1;
                if count > MAX_ELEMENTS || stack.len() >= MAX_DEPTH {
                    return Err(format!("the XML has more than {MAX_ELEMENTS} elements or {MAX_DEPTH} levels"));
                }
                if root.is_some() {
                    return Err("the XML has more than one root element".into());
                }
                let mut el = Element {
                    ns: ns.unwrap_or_default(),
                    name: allowed(&String::from_utf8_lossy(e.local_name().as_ref()))?.to_string(),
                    ..Element::default()
                };
                for a in e.attributes() {
                    let a = a.map_err(|e| format!("malformed attribute at byte {at}: {e}"))?;
                    let key = a.key;
                    if key.as_ref() == b"xmlns" || key.as_ref().starts_with(b"xmlns:") {
                        continue;
                    }
                    let (ans, local) = reader.resolve_attribute(key);
                    let ans = match ans {
                        ResolveResult::Unbound => String::new(),
                        other => namespace(other)?,
                    };
                    let value = a.unescape_value().map_err(|e| format!("attribute at byte {at}: {e}"))?;
                    allowed(&value)?;
                    el.attrs.push((ans, String::from_utf8_lossy(local.as_ref()).into_owned(), value.into_owned()));
                }
                if matches!(event, Event::Empty(_)) {
                    close(&mut stack, &mut root, el);
                } else {
                    stack.push(el);
                }
            }
            Event::End(_) => {
                let el = stack.pop().ok_or("an end tag without its start")?;
                close(&mut stack, &mut root, el);
            }
            Event::Text(t) => {
                let text = t.decode().map_err(|e| format!("text at byte {at}: {e}"))?;
                push_text(&mut stack, &text)?;
            }
            Event::CData(t) => {
                let text = t.decode().map_err(|e| format!("CDATA at byte {at}: {e}"))?;
                push_text(&mut stack, &text)?;
            }
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref().map_err(|e| format!("character reference at byte {at}: {e}"))? {
                    Some(c) => c,
                    None => match r.as_ref() {
                        b"amp" => '&',
                        b"lt" => '<',
                        b"gt" => '>',
                        b"quot" => '"',
                        b"apos" => '\'',
                        other => {
                            return Err(format!(
                                "entity &{}; at byte {at}: only the five predefined entities are read",
                                String::from_utf8_lossy(other)
                            ))
                        }
                    },
                };
                push_text(&mut stack, c.encode_utf8(&mut [0; 4]))?;
            }
            Event::DocType(_) => return Err("a DTD (<!DOCTYPE ...>) is not accepted".into()),
            Event::PI(_) => return Err("processing instructions are not accepted".into()),
            Event::Decl(d) => {
                if let Some(encoding) = d.encoding() {
                    let encoding = encoding.map_err(|e| format!("XML declaration at byte {at}: {e}"))?;
                    if !encoding.eq_ignore_ascii_case(b"utf-8") {
                        let encoding = String::from_utf8_lossy(&encoding);
                        return Err(format!("the document declares encoding {encoding:?}: this endpoint reads UTF-8 only"));
                    }
                }
            }
            Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err("the XML ends inside an element".into());
    }
    root.ok_or_else(|| "no root element".into())
}

fn close(stack: &mut [Element], root: &mut Option<Element>, mut el: Element) {
    if !el.children.is_empty() {
        el.text.clear(); // whitespace between elements
    }
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

/// `text`, if XML allows every character of it.
fn allowed(text: &str) -> Result<&str, String> {
    match text.chars().find(|c| !xml_char(*c)) {
        Some(c) => Err(format!("the character U+{:04X} is not allowed in XML", c as u32)),
        None => Ok(text),
    }
}

fn push_text(stack: &mut [Element], text: &str) -> Result<(), String> {
    let text = allowed(text)?;
    match stack.last_mut() {
        Some(el) => {
            el.text.push_str(text);
            Ok(())
        }
        None if text.trim().is_empty() => Ok(()),
        None => Err("text outside the root element".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_namespaces_attributes_and_text_are_read() {
        let doc = br#"<?xml version="1.0"?><e:Envelope xmlns:e="urn:e" xmlns="urn:d"><e:Body a="1 &amp; 2"><x>4 &lt; 5&#33;</x><y><![CDATA[<raw>]]></y><z/></e:Body></e:Envelope>"#;
        let root = parse(doc).unwrap();
        assert_eq!((root.ns.as_str(), root.name.as_str()), ("urn:e", "Envelope"));
        let body = root.child("Body").unwrap();
        assert_eq!(body.attr("a"), Some("1 & 2"));
        assert_eq!(
            body.children.iter().map(|c| (c.ns.as_str(), c.name.as_str(), c.text.as_str())).collect::<Vec<_>>(),
            [("urn:d", "x", "4 < 5!"), ("urn:d", "y", "<raw>"), ("urn:d", "z", "")]
        );
    }

    #[test]
    fn dtds_entities_and_instructions_are_refused() {
        let billion = br#"<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]><l>&b;</l>"#;
        assert!(parse(billion).unwrap_err().contains("DTD"));
        let external = br#"<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>"#;
        assert!(parse(external).unwrap_err().contains("DTD"));
        assert!(parse(b"<x>&e;</x>").unwrap_err().contains("only the five predefined"));
        assert!(parse(b"<?xml-stylesheet href='x'?><x/>").unwrap_err().contains("processing instructions"));
        for doc in [&b"<x>&#1;</x>"[..], b"<x>\x02</x>", b"<x a='&#x1F;'/>", b"<x>&#xFFFE;</x>", b"<h:x xmlns:h='urn:\x1b'/>", b"<s\x01t/>"]
        {
            assert!(parse(doc).unwrap_err().contains("not allowed in XML"), "{}", String::from_utf8_lossy(doc));
        }
        assert_eq!(parse(b"<x>&#9;&#x10000;</x>").unwrap().text, "\t\u{10000}");
        assert_eq!(parse("<?xml version='1.0' encoding='utf-8'?><x>\u{e9}</x>".as_bytes()).unwrap().text, "\u{e9}");
        assert!(parse(b"<?xml version='1.0' encoding='windows-1252'?><x/>").unwrap_err().contains("UTF-8 only"));
        assert!(parse(b"<x>\xe9</x>").is_err(), "no UTF-8");
    }

    #[test]
    fn malformed_and_oversized_documents_are_refused() {
        for (doc, says) in [
            (&b"<a><b></a>"[..], "malformed"),
            (b"<a>", "ends inside"),
            (b"", "no root"),
            (b"<a/><b/>", "more than one root"),
            (b"<p:a/>", "undeclared"),
            (b"text<a/>", "outside the root"),
        ] {
            let e = parse(doc).unwrap_err();
            assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(doc));
        }
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).unwrap_err().contains("levels"));
    }
}
