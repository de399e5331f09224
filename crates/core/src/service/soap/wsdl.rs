//! WSDL 1.1 (document/literal, SOAP 1.2 binding) generated from what is
//! deployed, never written by hand (pure: unit-tested below; validated
//! against the WSDL and XML Schema schemas, and loaded by zeep, in
//! `tests/test_soap.py`).
//!
//! A program's (`GET /programs/{name}?wsdl`), from its interface
//! (`jobs::interface`): operations `call` (run and answer the results),
//! `spawn` (start a job: its id), `running` (its state), `results` and
//! `kill`. A value input is an element of its type; a file input a choice
//! of `value` (its content: bytes as `xsd:base64Binary`, sent as an
//! MTOM/XOP attachment where the client does so, or of its type) or `url`
//! (pulled by the job), or (a template's, for a job in a session) `session`,
//! the name of a file of the session. A template's `call` and `spawn` take
//! an optional header block, `session` of `urn:mpiws:session`, the id of
//! the caller's session the job runs in (or the HTTP header
//! `Mpiws-Session`). Each output likewise: its `value` or its `url`.
//!
//! Rules:
//! - Namespaces: `urn:mpiws:program:NAME`; element names are the
//!   parameters' names, a name that is no XML name (it starts with a digit,
//!   `-` or `.`) prefixed with `_` ([`xml_name`]).
//! - JSON Schema types: integer is `xsd:long`, number `xsd:double`, boolean
//!   `xsd:boolean`, string `xsd:string`, a file's bytes `xsd:base64Binary`,
//!   anything else `xsd:anyType`; a list is `maxOccurs="unbounded"`; an
//!   optional input `minOccurs="0"`.

use std::fmt::Write;

use serde_json::Value;

use crate::jobs::interface::{self, Port as Param};
use crate::jobs::Program;
use crate::wire::url;

/// The namespace of the `session` header block (read by `envelope`).
pub const SESSION_NS: &str = "urn:mpiws:session";
const HEAD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>"#;
const NS: &str = r#"xmlns:wsdl="http://schemas.xmlsoap.org/wsdl/" xmlns:soap12="http://schemas.xmlsoap.org/wsdl/soap12/" xmlns:xsd="http://www.w3.org/2001/XMLSchema""#;

/// The program operations, with their request and answer elements.
pub const PROGRAM_OPERATIONS: [&str; 5] = ["call", "spawn", "running", "results", "kill"];

/// A parameter's name as an XML element name.
pub fn xml_name(name: &str) -> String {
    match name.chars().next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => name.to_string(),
        _ => format!("_{name}"),
    }
}

/// Whether XML 1.0 allows the character in a document at all (its `Char`
/// production: not even a character reference may carry the others).
pub fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Text for XML content and attribute values; a character XML cannot
/// carry (a control character a program printed, say) becomes U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if !xml_char(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The XML Schema type of a JSON Schema (a list: its items', with `many`).
fn xsd_type(schema: &Value) -> (&'static str, bool) {
    if schema["type"] == "array" {
        return (xsd_type(&schema["items"]).0, true);
    }
    if interface::is_bytes(schema) {
        return ("xsd:base64Binary", false);
    }
    let t = match schema["type"].as_str() {
        Some("integer") => "xsd:long",
        Some("number") => "xsd:double",
        Some("boolean") => "xsd:boolean",
        Some("string") => "xsd:string",
        _ => "xsd:anyType",
    };
    (t, false)
}

/// An element for `port`: its value's type, or (a file) the choice of its
/// value or its URL (`in_session`: or the name of a file of the job's session).
fn element(out: &mut String, port: &Param, required: bool, in_session: bool) {
    let (t, many) = xsd_type(&port.schema);
    let min = if required && !port.optional { "" } else { r#" minOccurs="0""# };
    let max = if many { r#" maxOccurs="unbounded""# } else { "" };
    let name = xml_name(&port.name);
    if port.file {
        let session = if in_session { r#"<xsd:element name="session" type="xsd:string"/>"# } else { "" };
        let _ = write!(
            out,
            r#"<xsd:element name="{name}"{min}{max}><xsd:complexType><xsd:choice><xsd:element name="value" type="{t}"/><xsd:element name="url" type="xsd:anyURI"/>{session}</xsd:choice></xsd:complexType></xsd:element>"#
        );
    } else {
        let _ = write!(out, r#"<xsd:element name="{name}" type="{t}"{min}{max}/>"#);
    }
}

/// The WSDL of `program`, reached at `address` (its `/programs/{name}` URL).
pub fn program(program: &Program, address: &str) -> String {
    let tns = format!("urn:mpiws:program:{}", program.name);
    let (ins, outs) = interface::of(program);
    let mut types = String::new();
    let _ = write!(types, r#"<xsd:schema targetNamespace="{tns}" xmlns:tns="{tns}" elementFormDefault="qualified">"#);
    types.push_str(r#"<xsd:complexType name="Inputs"><xsd:sequence>"#);
    // Only a template's jobs run in a session (`Mpiws-Session`), where a file may name one of its files.
    let templated = program.template().is_some();
    for p in &ins {
        element(&mut types, p, true, templated);
    }
    types.push_str("</xsd:sequence></xsd:complexType>");
    types.push_str(r#"<xsd:complexType name="Outputs"><xsd:sequence>"#);
    for p in &outs {
        element(&mut types, p, false, false);
    }
    types.push_str("</xsd:sequence></xsd:complexType>");
    types.push_str(concat!(
        r#"<xsd:complexType name="Stream"><xsd:choice><xsd:element name="value" type="xsd:string"/><xsd:element name="url" type="xsd:anyURI"/></xsd:choice></xsd:complexType>"#,
        r#"<xsd:complexType name="State"><xsd:sequence><xsd:element name="jobId" type="xsd:string"/><xsd:element name="state" type="xsd:string"/>"#,
        r#"<xsd:element name="running" type="xsd:boolean"/><xsd:element name="exitCode" type="xsd:int" minOccurs="0"/><xsd:element name="error" type="xsd:string" minOccurs="0"/></xsd:sequence></xsd:complexType>"#,
        r#"<xsd:complexType name="Results"><xsd:sequence><xsd:element name="jobId" type="xsd:string"/><xsd:element name="state" type="xsd:string"/>"#,
        r#"<xsd:element name="exitCode" type="xsd:int" minOccurs="0"/><xsd:element name="error" type="xsd:string" minOccurs="0"/>"#,
        r#"<xsd:element name="outputs" type="tns:Outputs"/><xsd:element name="stdout" type="tns:Stream" minOccurs="0"/><xsd:element name="stderr" type="tns:Stream" minOccurs="0"/></xsd:sequence></xsd:complexType>"#,
        r#"<xsd:complexType name="JobId"><xsd:sequence><xsd:element name="jobId" type="xsd:string"/></xsd:sequence></xsd:complexType>"#,
        r#"<xsd:element name="call" type="tns:Inputs"/><xsd:element name="callResponse" type="tns:Results"/>"#,
        r#"<xsd:element name="spawn" type="tns:Inputs"/>"#,
        r#"<xsd:element name="spawnResponse"><xsd:complexType><xsd:sequence><xsd:element name="jobId" type="xsd:string"/><xsd:element name="url" type="xsd:anyURI"/></xsd:sequence></xsd:complexType></xsd:element>"#,
        r#"<xsd:element name="running" type="tns:JobId"/><xsd:element name="runningResponse" type="tns:State"/>"#,
        r#"<xsd:element name="results"><xsd:complexType><xsd:sequence><xsd:element name="jobId" type="xsd:string"/><xsd:element name="byReference" type="xsd:boolean" minOccurs="0"/></xsd:sequence></xsd:complexType></xsd:element>"#,
        r#"<xsd:element name="resultsResponse" type="tns:Results"/>"#,
        r#"<xsd:element name="kill" type="tns:JobId"/><xsd:element name="killResponse" type="tns:State"/>"#,
        "</xsd:schema>"
    ));
    if templated {
        let _ = write!(
            types,
            r#"<xsd:schema targetNamespace="{SESSION_NS}" elementFormDefault="qualified"><xsd:element name="session" type="xsd:string"/></xsd:schema>"#
        );
    }
    let about = format!(
        "The command-line program {} on an mpiws endpoint: call runs it and answers its results; spawn starts a job and answers its id; \
         running, results and kill act on a job. A file is its value (bytes: base64Binary, as an MTOM/XOP attachment where the client sends one) \
         or a URL the job pulls (or, for a job in a session, the name of a session file: the header block session, or the HTTP header \
         Mpiws-Session, names the session). \
         Every request carries the endpoint key (Authorization: Bearer KEY, scope jobs).",
        program.name
    );
    let headed: &[&str] = if templated { &["call", "spawn"] } else { &[] };
    document(&tns, &about, &types, &[("Program", &PROGRAM_OPERATIONS, address, headed)])
}

/// The service interface's operations.
pub const SERVICE_OPERATIONS: [&str; 3] = ["run", "status", "cancel"];
/// A running rank's operations.
pub const RANK_OPERATIONS: [&str; 2] = ["store", "bStore"];

/// The WSDL of the endpoint's service interface (`GET /?wsdl`), reached
/// at `address` (the endpoint's URL): `run` (an instance of one of
/// `services`, as `POST /run`), `status` and `cancel` (as
/// `GET`/`DELETE /domains/{domain}/ranks/{rank}`). Parameters and results
/// are JSON texts: a service takes and returns any JSON. And a running
/// rank's `store` and `bStore` (a message, its payload base64Binary: an
/// MTOM attachment where the client sends one), a port of its own whose
/// address a client sets to the rank's URL (`.../domains/D/ranks/R`).
pub fn services(services: &[String], address: &str) -> String {
    let tns = "urn:mpiws:services";
    let mut names = String::new();
    for s in services {
        let _ = write!(names, r#"<xsd:enumeration value="{}"/>"#, escape(s));
    }
    let service_type = if services.is_empty() { "xsd:string".to_string() } else { "tns:ServiceName".to_string() };
    let mut types = format!(r#"<xsd:schema targetNamespace="{tns}" xmlns:tns="{tns}" elementFormDefault="qualified">"#);
    if !services.is_empty() {
        let _ = write!(
            types,
            r#"<xsd:simpleType name="ServiceName"><xsd:restriction base="xsd:string">{names}</xsd:restriction></xsd:simpleType>"#
        );
    }
    let _ = write!(
        types,
        concat!(
            r#"<xsd:complexType name="Rank"><xsd:sequence><xsd:element name="domain" type="xsd:string"/><xsd:element name="rank" type="xsd:unsignedInt"/></xsd:sequence></xsd:complexType>"#,
            r#"<xsd:complexType name="Error"><xsd:sequence><xsd:element name="name" type="xsd:string"/><xsd:element name="message" type="xsd:string"/></xsd:sequence></xsd:complexType>"#,
            r#"<xsd:complexType name="Status"><xsd:sequence><xsd:element name="domain" type="xsd:string"/><xsd:element name="rank" type="xsd:unsignedInt"/>"#,
            r#"<xsd:element name="service" type="xsd:string"/><xsd:element name="state" type="xsd:string"/>"#,
            r#"<xsd:element name="result" type="xsd:string" minOccurs="0"/><xsd:element name="error" type="tns:Error" minOccurs="0"/></xsd:sequence></xsd:complexType>"#,
            r#"<xsd:element name="run"><xsd:complexType><xsd:sequence><xsd:element name="domain" type="xsd:string"/><xsd:element name="rank" type="xsd:unsignedInt"/>"#,
            r#"<xsd:element name="endpoints" type="xsd:anyURI" maxOccurs="unbounded"/><xsd:element name="token" type="xsd:string"/>"#,
            r#"<xsd:element name="service" type="{service_type}"/><xsd:element name="params" type="xsd:string" minOccurs="0"/></xsd:sequence></xsd:complexType></xsd:element>"#,
            r#"<xsd:element name="runResponse" type="tns:Status"/>"#,
            r#"<xsd:element name="status" type="tns:Rank"/><xsd:element name="statusResponse" type="tns:Status"/>"#,
            r#"<xsd:element name="cancel" type="tns:Rank"/><xsd:element name="cancelResponse" type="tns:Status"/>"#,
            r#"<xsd:complexType name="Message"><xsd:sequence><xsd:element name="source" type="xsd:unsignedInt"/>"#,
            r#"<xsd:element name="tag" type="xsd:int" minOccurs="0"/><xsd:element name="context" type="xsd:unsignedLong" minOccurs="0"/>"#,
            r#"<xsd:element name="seq" type="xsd:unsignedLong" minOccurs="0"/><xsd:element name="sync" type="xsd:boolean" minOccurs="0"/>"#,
            r#"<xsd:element name="forward" type="xsd:unsignedInt" minOccurs="0" maxOccurs="unbounded"/>"#,
            r#"<xsd:element name="payload" type="xsd:base64Binary"/></xsd:sequence></xsd:complexType>"#,
            r#"<xsd:complexType name="Stored"><xsd:sequence><xsd:element name="duplicate" type="xsd:boolean"/></xsd:sequence></xsd:complexType>"#,
            r#"<xsd:element name="store" type="tns:Message"/><xsd:element name="storeResponse" type="tns:Stored"/>"#,
            r#"<xsd:element name="bStore" type="tns:Message"/><xsd:element name="bStoreResponse" type="tns:Stored"/>"#,
            "</xsd:schema>"
        ),
        service_type = service_type
    );
    let about = format!(
        "The service interface of an mpiws endpoint (services deployed: {}): run starts an instance (a rank of a domain), with the          endpoint key (Authorization: Bearer KEY, scope run); status and cancel act on one, with the domain's token. params and          result are JSON texts.",
        if services.is_empty() { "none".to_string() } else { services.join(", ") }
    );
    let rank = url::join(address, "/domains/DOMAIN/ranks/RANK");
    document(tns, &about, &types, &[("Services", &SERVICE_OPERATIONS, address, &[]), ("Rank", &RANK_OPERATIONS, &rank, &[])])
}

/// A port of the document: its name, operations, address, and the
/// operations that take the `session` header block.
type Port<'a> = (&'a str, &'a [&'a str], &'a str, &'a [&'a str]);

/// The whole document: `types`, then a message per operation, and for each
/// port its operations, SOAP 1.2 binding and address.
fn document(tns: &str, about: &str, types: &str, ports: &[Port]) -> String {
    let mut d = String::new();
    let _ = write!(
        d,
        r#"{HEAD}<wsdl:definitions targetNamespace="{tns}" xmlns:tns="{tns}" {NS}><wsdl:documentation>{}</wsdl:documentation><wsdl:types>{types}</wsdl:types>"#,
        escape(about)
    );
    if ports.iter().any(|(.., headed)| !headed.is_empty()) {
        let _ = write!(
            d,
            r#"<wsdl:message name="SessionHeader" xmlns:ms="{SESSION_NS}"><wsdl:part name="session" element="ms:session"/></wsdl:message>"#
        );
    }
    for op in ports.iter().flat_map(|(_, ops, ..)| ops.iter()) {
        let _ = write!(
            d,
            r#"<wsdl:message name="{op}Request"><wsdl:part name="parameters" element="tns:{op}"/></wsdl:message><wsdl:message name="{op}Response"><wsdl:part name="parameters" element="tns:{op}Response"/></wsdl:message>"#
        );
    }
    for (name, ops, ..) in ports {
        let _ = write!(d, r#"<wsdl:portType name="{name}PortType">"#);
        for op in ops.iter() {
            let _ = write!(
                d,
                r#"<wsdl:operation name="{op}"><wsdl:input message="tns:{op}Request"/><wsdl:output message="tns:{op}Response"/></wsdl:operation>"#
            );
        }
        d.push_str("</wsdl:portType>");
    }
    for (name, ops, _, headed) in ports {
        let _ = write!(
            d,
            r#"<wsdl:binding name="{name}Soap12Binding" type="tns:{name}PortType"><soap12:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>"#
        );
        for op in ops.iter() {
            let header =
                if headed.contains(op) { r#"<soap12:header message="tns:SessionHeader" part="session" use="literal"/>"# } else { "" };
            let _ = write!(
                d,
                r#"<wsdl:operation name="{op}"><soap12:operation soapAction="{tns}#{op}" style="document"/><wsdl:input><soap12:body use="literal" parts="parameters"/>{header}</wsdl:input><wsdl:output><soap12:body use="literal"/></wsdl:output></wsdl:operation>"#
            );
        }
        d.push_str("</wsdl:binding>");
    }
    for (name, _, address, _) in ports {
        let _ = write!(
            d,
            r#"<wsdl:service name="{name}Service"><wsdl:port name="{name}Soap12Port" binding="tns:{name}Soap12Binding"><soap12:address location="{}"/></wsdl:port></wsdl:service>"#,
            escape(address)
        );
    }
    d.push_str("</wsdl:definitions>\n");
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add() -> Program {
        Program::parse("add", "template", "/bin/echo [in:val:x:int] [in:file:y:int] [in:file:blob:binary] [out:file:result:int]", &[])
            .unwrap()
    }

    #[test]
    fn a_programs_wsdl_has_its_inputs_outputs_and_five_operations() {
        let w = program(&add(), "http://h:1/programs/add");
        assert!(w.starts_with(HEAD) && w.contains(r#"targetNamespace="urn:mpiws:program:add""#));
        assert!(w.contains(r#"<xsd:complexType name="Inputs"><xsd:sequence><xsd:element name="x" type="xsd:long"/><xsd:element name="y"><xsd:complexType><xsd:choice><xsd:element name="value" type="xsd:long"/><xsd:element name="url" type="xsd:anyURI"/>"#), "{w}");
        assert!(w.contains(r#"<xsd:element name="blob"><xsd:complexType><xsd:choice><xsd:element name="value" type="xsd:base64Binary"/>"#));
        assert!(w.contains(r#"<xsd:complexType name="Outputs"><xsd:sequence><xsd:element name="result" minOccurs="0"><xsd:complexType><xsd:choice><xsd:element name="value" type="xsd:long"/>"#));
        for op in PROGRAM_OPERATIONS {
            assert!(
                w.contains(&format!(
                    r#"<wsdl:operation name="{op}"><soap12:operation soapAction="urn:mpiws:program:add#{op}" style="document"/>"#
                )),
                "{op}"
            );
        }
        assert!(w.contains(r#"<soap12:address location="http://h:1/programs/add"/>"#));
    }

    #[test]
    fn the_service_interfaces_wsdl_names_what_is_deployed() {
        let w = services(&["sum".into(), "a<b".into()], "http://h:1");
        assert!(w.contains(r#"<xsd:enumeration value="sum"/><xsd:enumeration value="a&lt;b"/>"#));
        assert!(w.contains(r#"<xsd:element name="service" type="tns:ServiceName"/>"#));
        for op in SERVICE_OPERATIONS.iter().chain(&RANK_OPERATIONS) {
            assert!(w.contains(&format!(r#"<wsdl:operation name="{op}"><soap12:operation soapAction="urn:mpiws:services#{op}""#)), "{op}");
        }
        assert!(w.contains(r#"<soap12:address location="http://h:1/domains/DOMAIN/ranks/RANK"/>"#));
        assert!(services(&[], "http://h:1").contains(r#"<xsd:element name="service" type="xsd:string"/>"#));
    }

    #[test]
    fn names_and_text_are_made_safe_for_xml() {
        assert_eq!(
            (xml_name("x1"), xml_name("1x"), xml_name("-a"), xml_name("_b")),
            ("x1".into(), "_1x".into(), "_-a".into(), "_b".into())
        );
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("\u{1b}[31m red\u{1}\tok\u{FFFE}"), "\u{FFFD}[31m red\u{FFFD}\tok\u{FFFD}", "what XML cannot carry");
        let w = program(&add(), "http://h:1/programs/add?x=1&y=2");
        assert!(w.contains(r#"location="http://h:1/programs/add?x=1&amp;y=2""#));
    }

    #[test]
    fn cwl_lists_and_optional_inputs_have_their_occurrences() {
        let tool = r#"{"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "cat",
            "inputs": {"files": {"type": "File[]", "inputBinding": {}}, "n": "int?", "flag": "boolean"},
            "outputs": {"out": {"type": "stdout"}}}"#;
        let w = program(&Program::parse("cat", "cwl", tool, &[]).unwrap(), "http://h/programs/cat");
        assert!(w.contains(r#"<xsd:element name="files" maxOccurs="unbounded"><xsd:complexType><xsd:choice><xsd:element name="value" type="xsd:base64Binary"/>"#), "{w}");
        assert!(w.contains(r#"<xsd:element name="n" type="xsd:long" minOccurs="0"/>"#));
        assert!(w.contains(r#"<xsd:element name="flag" type="xsd:boolean"/>"#));
    }
}
