//! A `call` or `spawn` element read into the inputs `POST
//! /programs/{name}/jobs` takes, by the program's interface, as its WSDL
//! describes them (pure: unit-tested below).
//!
//! Rules:
//! - Each child is an input, by its XML name (`wsdl::xml_name`); one the
//!   program has not is refused; a list's elements repeat.
//! - A value's text is read as its type: integer (`xsd:long`), number
//!   (`xsd:double`, finite), boolean (`true`, `false`, `1`, `0`), text.
//! - A file is its `value`, its `url`, or (a template's) the name of a
//!   file of the job's session, `session`. A `value` of bytes is base64
//!   text, or an `xop:Include` of an MTOM part; of another type, its text.
//!   A template's file becomes `{"base64"}`, its text, or `{"url"}` (also
//!   an MTOM part written to disk as it came: `receive`); a CWL File
//!   `{"class": "File", "base64" | "location"}`.
//! - What is missing or malformed is left to the spawn's own checks where
//!   they say it as well (a missing input, a value of the wrong type).

use base64::Engine;
use serde_json::{json, Map, Number, Value};

use super::envelope::{included, Attachment, Attachments};
use super::wsdl::xml_name;
use super::xml::Element;
use crate::jobs::interface::{self, is_bytes, Port};
use crate::jobs::{Program, Runs};

pub fn inputs(program: &Program, operation: &Element, attachments: &Attachments) -> Result<Map<String, Value>, String> {
    let (ports, _) = interface::of(program);
    let cwl = !matches!(program.runs, Runs::Template { .. });
    let mut out = Map::new();
    for el in &operation.children {
        let port = ports.iter().find(|p| xml_name(&p.name) == el.name).ok_or_else(|| {
            let names: Vec<String> = ports.iter().map(|p| xml_name(&p.name)).collect();
            format!("{} has no input {} (it takes {})", program.name, el.name, names.join(", "))
        })?;
        let v = if port.file { file(port, el, attachments, cwl)? } else { value(port, &port.schema, &el.text)? };
        let many = port.schema["type"] == "array";
        match out.get_mut(&port.name) {
            Some(Value::Array(items)) if many => items.push(v),
            Some(_) => return Err(format!("input {} is given twice", el.name)),
            None if many => {
                out.insert(port.name.clone(), Value::Array(vec![v]));
            }
            None => {
                out.insert(port.name.clone(), v);
            }
        }
    }
    Ok(out)
}

fn value(port: &Port, schema: &Value, text: &str) -> Result<Value, String> {
    let schema = if schema["type"] == "array" { &schema["items"] } else { schema };
    let bad = |what: &str| format!("input {}: {text:?} is not {what}", xml_name(&port.name));
    let t = text.trim();
    Ok(match schema["type"].as_str() {
        Some("integer") => Value::Number(t.parse::<i64>().map_err(|_| bad("an integer"))?.into()),
        Some("number") => Value::Number(t.parse::<f64>().ok().and_then(Number::from_f64).ok_or_else(|| bad("a finite number"))?),
        Some("boolean") => match t {
            "true" | "1" => Value::Bool(true),
            "false" | "0" => Value::Bool(false),
            _ => return Err(bad("a boolean")),
        },
        _ => Value::String(text.to_string()),
    })
}

fn file(port: &Port, el: &Element, attachments: &Attachments, cwl: bool) -> Result<Value, String> {
    let name = xml_name(&port.name);
    if let Some(file) = el.child("session").filter(|_| !cwl) {
        return Ok(json!({"session": file.text.trim()}));
    }
    if let Some(url) = el.child("url") {
        let url = url.text.trim();
        return Ok(if cwl { json!({"class": "File", "location": url}) } else { json!({"url": url}) });
    }
    let value = el.child("value").ok_or_else(|| format!("input {name} is a file: give its <value> or its <url>"))?;
    if !is_bytes(&port.schema) {
        return self::value(port, &port.schema, &value.text).map(|v| match v {
            Value::String(s) => Value::String(s),
            other => Value::String(other.to_string()), // a file's content is its text
        });
    }
    let b64 = match included(value, attachments).map_err(|e| format!("input {name}: {e}"))? {
        Some(Attachment::Bytes(bytes)) => base64::engine::general_purpose::STANDARD.encode(bytes),
        // A part written to disk as it came: given by its URL, as an upload is.
        Some(Attachment::Upload(url)) => return Ok(if cwl { json!({"class": "File", "location": url}) } else { json!({"url": url}) }),
        None => value.text.chars().filter(|c| !c.is_ascii_whitespace()).collect(),
    };
    Ok(if cwl { json!({"class": "File", "base64": b64}) } else { json!({"base64": b64}) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::soap::envelope::XOP;
    use crate::service::soap::xml;

    fn op(children: &str) -> Element {
        xml::parse(format!(r#"<call xmlns="urn:p" xmlns:xop="{XOP}">{children}</call>"#).as_bytes()).unwrap()
    }

    #[test]
    fn a_templates_values_and_files_become_its_inputs() {
        let add = Program::parse("add", "template", "/bin/echo [in:val:x:int] [in:file:y:int] [in:file:blob:binary]", &[]).unwrap();
        let mut parts = Attachments::new();
        parts.insert("b1".into(), Attachment::Bytes(vec![0, 1, 2]));
        parts.insert("big".into(), Attachment::Upload("http://e/files/f".into()));
        let i = inputs(&add, &op(r#"<x> 7 </x><y><value>41</value></y><blob><value><xop:Include href="cid:b1"/></value></blob>"#), &parts)
            .unwrap();
        assert_eq!(Value::Object(i), json!({"x": 7, "y": "41", "blob": {"base64": "AAEC"}}));
        let i = inputs(&add, &op("<y><url>http://e/y</url></y><blob><value>AA EC</value></blob>"), &parts).unwrap();
        assert_eq!(Value::Object(i), json!({"y": {"url": "http://e/y"}, "blob": {"base64": "AAEC"}}));
        let i = inputs(&add, &op(r#"<blob><value><xop:Include href="cid:big"/></value></blob>"#), &parts).unwrap();
        assert_eq!(Value::Object(i), json!({"blob": {"url": "http://e/files/f"}}), "a part written to disk: by its URL");
        let i = inputs(&add, &op("<y><session> sum.txt </session></y>"), &parts).unwrap();
        assert_eq!(Value::Object(i), json!({"y": {"session": "sum.txt"}}));
        for (children, says) in [
            ("<x>one</x>", "not an integer"),
            ("<z>1</z>", "no input z"),
            ("<x>1</x><x>2</x>", "twice"),
            ("<y>41</y>", "give its <value>"),
            (r#"<blob><value><xop:Include href="cid:nope"/></value></blob>"#, "no part"),
        ] {
            let e = inputs(&add, &op(children), &parts).unwrap_err();
            assert!(e.contains(says), "{children}: {e}");
        }
    }

    #[test]
    fn cwl_lists_repeat_and_files_become_file_objects() {
        let tool = r#"{"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "cat",
            "inputs": {"files": {"type": "File[]", "inputBinding": {}}, "n": "int[]?", "flag": "boolean?", "1st": "double?"},
            "outputs": {"out": {"type": "stdout"}}}"#;
        let cat = Program::parse("cat", "cwl", tool, &[]).unwrap();
        let children =
            "<files><value>eA==</value></files><files><url>http://e/f</url></files><n>1</n><n>2</n><flag>1</flag><_1st>2.5</_1st>";
        let i = inputs(&cat, &op(children), &Attachments::new()).unwrap();
        assert_eq!(
            Value::Object(i),
            json!({"files": [{"class": "File", "base64": "eA=="}, {"class": "File", "location": "http://e/f"}], "n": [1, 2], "flag": true, "1st": 2.5})
        );
    }
}
