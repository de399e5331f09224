//! A program's interface as its faces describe it: each input and output
//! with a JSON Schema of its value, whether it is optional and whether it
//! is a file, made from the template or the CWL document alone (pure:
//! unit-tested below). The OGC face's process descriptions and the SOAP
//! face's WSDL are both made from it.
//!
//! Rules:
//! - A template parameter's schema is its type's (`int`: integer, `float`:
//!   number, `string`: string, `xml`: a string of `application/xml`,
//!   `binary`: a string of bytes, `contentEncoding: binary`); each input
//!   occurs exactly once; a `file` parameter is a file (its content of
//!   that type), and so is every output.
//! - A CWL type maps to JSON Schema the same way (a File to a string of
//!   bytes, an array to `type: array`, an enum to `enum`, a union to
//!   `oneOf`); a File (or a list of them) is a file. An optional input
//!   (`T?`, or one with a default) is optional; a default that is no
//!   object is the schema's `default`. Schemas use only the keywords OGC's
//!   process description allows (no `const`, no lists of types, no `$ref`).

use serde_json::{json, Value};

use crate::jobs::cwl::tool::short_id;
use crate::jobs::template::{Kind, Param, Placement};
use crate::jobs::{Program, Runs};

/// One input or output.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    pub name: String,
    pub schema: Value,
    pub optional: bool,
    pub file: bool,
}

/// A program's inputs and outputs, in its order.
pub fn of(program: &Program) -> (Vec<Port>, Vec<Port>) {
    match &program.runs {
        Runs::Template { template, .. } => {
            let port = |p: &Param, file: bool| Port { name: p.name.clone(), schema: param_schema(p), optional: false, file };
            (
                template.params.iter().filter(|p| p.is_input()).map(|p| port(p, p.placement == Placement::File)).collect(),
                template.params.iter().filter(|p| p.is_output()).map(|p| port(p, true)).collect(),
            )
        }
        Runs::Cwl(tool) => cwl_ports(&tool.interface["inputs"], &tool.interface["outputs"]),
        Runs::CwlRunner { document, .. } => {
            // A packed document's process is its `#main`.
            let main = document["$graph"].as_array().and_then(|g| g.iter().find(|p| p["id"] == "#main")).unwrap_or(document);
            cwl_ports(&main["inputs"], &main["outputs"])
        }
    }
}

/// Whether a schema is a file's bytes (or a list of them).
pub fn is_bytes(schema: &Value) -> bool {
    let bytes = |s: &Value| s["contentEncoding"] == "binary";
    bytes(schema) || bytes(&schema["items"])
}

fn cwl_ports(inputs: &Value, outputs: &Value) -> (Vec<Port>, Vec<Port>) {
    let ins = entries(inputs)
        .map(|(name, e)| {
            let (mut schema, optional) = cwl_schema(&e["type"]);
            if let Some(d) = e.get("default").filter(|d| !d.is_object()) {
                schema["default"] = d.clone();
            }
            let file = is_bytes(&schema);
            Port { name, schema, optional: optional || e.get("default").is_some(), file }
        })
        .collect();
    let outs = entries(outputs)
        .map(|(name, e)| {
            let schema = cwl_schema(&e["type"]).0;
            Port { name, file: is_bytes(&schema), schema, optional: false }
        })
        .collect();
    (ins, outs)
}

/// What a template parameter's value is.
fn param_schema(p: &Param) -> Value {
    match p.kind {
        Kind::Int => json!({"type": "integer"}),
        Kind::Float => json!({"type": "number"}),
        Kind::String => json!({"type": "string"}),
        Kind::Xml => json!({"type": "string", "contentMediaType": "application/xml"}),
        Kind::Binary => bytes_schema(),
    }
}

fn bytes_schema() -> Value {
    json!({"type": "string", "contentEncoding": "binary", "contentMediaType": "application/octet-stream"})
}

/// Each entry of a CWL list or map of parameters, with its name.
fn entries(v: &Value) -> impl Iterator<Item = (String, Value)> + '_ {
    let name = |e: &Value| e["name"].as_str().or(e["id"].as_str()).map(|n| short_id(n).to_string());
    let listed = v.as_array().into_iter().flatten().filter_map(move |e| Some((name(e)?, e.clone())));
    let mapped = v.as_object().into_iter().flatten().map(|(k, e)| {
        let e = if e.is_object() { e.clone() } else { json!({"type": e}) }; // `name: type` shorthand
        (k.clone(), e)
    });
    listed.chain(mapped)
}

/// A CWL type as a JSON Schema, and whether it admits null (optional).
pub fn cwl_schema(t: &Value) -> (Value, bool) {
    match t {
        Value::String(s) if s.ends_with('?') => (cwl_schema(&json!(&s[..s.len() - 1])).0, true),
        Value::String(s) if s.ends_with("[]") => (json!({"type": "array", "items": cwl_schema(&json!(&s[..s.len() - 2])).0}), false),
        Value::String(s) => (
            match s.as_str() {
                "boolean" => json!({"type": "boolean"}),
                "int" | "long" => json!({"type": "integer"}),
                "float" | "double" => json!({"type": "number"}),
                "string" => json!({"type": "string"}),
                "File" | "stdout" | "stderr" => bytes_schema(),
                "Directory" => json!({"type": "object", "description": "a CWL Directory object"}),
                _ => json!({}), // Any
            },
            s == "null",
        ),
        Value::Array(members) => {
            let optional = members.iter().any(|m| m == "null");
            let rest: Vec<Value> = members.iter().filter(|m| *m != "null").map(|m| cwl_schema(m).0).collect();
            match &rest[..] {
                [one] => (one.clone(), optional),
                _ => (json!({"oneOf": rest}), optional),
            }
        }
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("array") => (json!({"type": "array", "items": cwl_schema(&o["items"]).0}), false),
            Some("enum") => {
                let symbols: Vec<Value> =
                    o["symbols"].as_array().into_iter().flatten().filter_map(|s| s.as_str()).map(|s| json!(short_id(s))).collect();
                (json!({"type": "string", "enum": symbols}), false)
            }
            _ => (json!({"type": "object"}), false), // a record
        },
        _ => (json!({}), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(kind: &str, source: &str) -> Program {
        Program::parse("p", kind, source, &[]).expect("a program")
    }

    #[test]
    fn a_templates_ports_are_its_parameters() {
        let (ins, outs) = of(&program("template", "/bin/echo [in:val:x:int] [in:file:data:binary] [in_out:file:n:int] [out:file:y:float]"));
        let names = |ports: &[Port]| ports.iter().map(|p| (p.name.clone(), p.file)).collect::<Vec<_>>();
        assert_eq!(names(&ins), [("x".into(), false), ("data".into(), true), ("n".into(), true)]);
        assert_eq!(names(&outs), [("n".into(), true), ("y".into(), true)]);
        assert_eq!((ins[0].schema.clone(), ins[2].schema.clone()), (json!({"type": "integer"}), json!({"type": "integer"})));
        assert_eq!(ins[1].schema, bytes_schema());
        assert_eq!(outs[1].schema, json!({"type": "number"}));
    }

    #[test]
    fn cwl_types_map_to_json_schema_and_optional_ones_are_optional() {
        assert_eq!(cwl_schema(&json!("int?")), (json!({"type": "integer"}), true));
        assert_eq!(cwl_schema(&json!("File[]")).0, json!({"type": "array", "items": bytes_schema()}));
        assert_eq!(cwl_schema(&json!(["null", "string", "int"])), (json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}), true));
        assert_eq!(cwl_schema(&json!({"type": "enum", "symbols": ["#m/a", "#m/b"]})).0, json!({"type": "string", "enum": ["a", "b"]}));
        let tool = r#"{"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "echo",
            "inputs": {"msg": {"type": "string", "inputBinding": {}}, "n": {"type": "int", "default": 3}, "f": "File?", "fs": "File[]"},
            "outputs": {"out": {"type": "stdout"}, "count": {"type": "string", "outputBinding": {"glob": "n", "loadContents": true, "outputEval": "$(self[0].contents)"}}}}"#;
        let (ins, outs) = of(&program("cwl", tool));
        let by = |name: &str| ins.iter().find(|p| p.name == name).unwrap().clone();
        assert!(!by("msg").optional && !by("msg").file);
        assert_eq!((by("n").optional, by("n").schema), (true, json!({"type": "integer", "default": 3})));
        assert!(by("f").optional && by("f").file && by("fs").file && !by("fs").optional);
        let out = |name: &str| outs.iter().find(|p| p.name == name).unwrap().clone();
        assert_eq!((out("out").file, out("out").schema, out("count").file), (true, bytes_schema(), false));
    }
}
