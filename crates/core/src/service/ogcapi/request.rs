//! An execute request (`POST /processes/{id}/execution`) read into what
//! the endpoint's own spawn takes, and how the results are wanted (pure:
//! unit-tested below).
//!
//! Rules:
//! - An input is a plain value, a qualified value (`{"value", "mediaType",
//!   "encoding"}`, or `"format": {...}` holding the last two) or a link
//!   (`{"href"}`). A link becomes the file's URL input (fetched under the
//!   endpoint's fetch rules); `encoding: base64` makes the value a file's
//!   bytes; any other value is the value, or a file's text.
//! - A template's `val` parameter takes a value only; a CWL File (or a
//!   list of them) takes any of the three, and a CWL client's own File
//!   object passes as it is. A service's parameters are values (any JSON;
//!   an object is a qualified value only if it has nothing else).
//! - `outputs` names which outputs to give and how (`transmissionMode`
//!   `value` or `reference`); none named means all, by value. A name the
//!   process has not is refused.
//! - `response` is `raw` (the standard's default) or `document`; the
//!   drafts' `mode: async` asks what `Prefer: respond-async` asks.
//! - Callbacks (`subscriber`) are not offered: refused, not ignored.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::Process;
use crate::jobs::interface;
use crate::jobs::template::Placement;
use crate::jobs::Runs;
pub use crate::service::jobs::outputs::Transmission;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Response {
    Raw,
    Document,
}

/// How the results are wanted: kept with the job, so that its results
/// answer later as the execution would have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wanted {
    /// The outputs, in the process's order, and how.
    pub outputs: Vec<(String, Transmission)>,
    pub response: Response,
}

#[derive(Debug, PartialEq)]
pub struct Execute {
    /// The inputs as `POST /programs/{name}/jobs` takes them.
    pub inputs: Map<String, Value>,
    pub wanted: Wanted,
    /// The body asked to run asynchronously (`mode: async`).
    pub asks_async: bool,
}

/// `body` read for `process`; an error says what is wrong with it.
pub fn read(process: &Process, body: &Value) -> Result<Execute, String> {
    let Value::Object(body) = body else { return Err("an execute request is a JSON object: {\"inputs\": {...}}".into()) };
    if body.contains_key("subscriber") {
        return Err("callbacks (subscriber) are not offered here: poll the job's status instead".into());
    }
    let given = match body.get("inputs") {
        None => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => return Err("'inputs' is an object of input id: value".into()),
    };
    let mut inputs = Map::new();
    for (name, v) in given {
        let what = format!("input '{name}'");
        let v = match process {
            Process::Service(_) => service_value(&what, v)?,
            Process::Program(program) => match &program.runs {
                Runs::Template { template, .. } => match template.params.iter().find(|p| p.name == name && p.is_input()) {
                    Some(p) if p.placement == Placement::Val => value_only(&what, v)?,
                    Some(_) => template_file(&what, v)?,
                    None => v, // the spawn refuses it, naming what the program takes
                },
                Runs::Cwl(_) | Runs::CwlRunner { .. } => cwl_value(&what, v, is_file(program, &name))?,
            },
        };
        inputs.insert(name, v);
    }
    let declared: Vec<String> = match process {
        Process::Program(p) => interface::of(p).1.into_iter().map(|port| port.name).collect(),
        Process::Service(_) => vec!["result".to_string()],
    };
    let outputs = match body.get("outputs") {
        None => declared.iter().map(|n| (n.clone(), Transmission::Value)).collect(),
        Some(Value::Object(o)) if o.is_empty() => declared.iter().map(|n| (n.clone(), Transmission::Value)).collect(),
        Some(Value::Object(o)) => {
            if let Some(unknown) = o.keys().find(|k| !declared.contains(k)) {
                return Err(format!("the process has no output '{unknown}' (it has {})", declared.join(", ")));
            }
            let mut wanted = Vec::new();
            for name in declared.iter().filter(|n| o.contains_key(*n)) {
                let mode = match o[name].get("transmissionMode").and_then(Value::as_str) {
                    None | Some("value") => Transmission::Value,
                    Some("reference") => Transmission::Reference,
                    Some(other) => return Err(format!("output '{name}': transmissionMode {other:?} is value or reference")),
                };
                wanted.push((name.clone(), mode));
            }
            wanted
        }
        Some(_) => return Err("'outputs' is an object of output id: {\"transmissionMode\": ...}".into()),
    };
    let response = match body.get("response").map(|r| r.as_str()) {
        None | Some(Some("raw")) => Response::Raw,
        Some(Some("document")) => Response::Document,
        Some(other) => {
            return Err(format!("'response' is \"raw\" or \"document\", not {}", other.map_or("a non-string".into(), |o| format!("{o:?}"))))
        }
    };
    let asks_async = match body.get("mode").map(|m| m.as_str()) {
        None | Some(Some("sync" | "auto")) => false,
        Some(Some("async")) => true,
        Some(_) => return Err("'mode' is \"sync\", \"async\" or \"auto\"".into()),
    };
    Ok(Execute { inputs, wanted: Wanted { outputs, response }, asks_async })
}

/// Whether a CWL program's input `name` is a File (or list of them).
fn is_file(program: &crate::jobs::Program, name: &str) -> bool {
    interface::of(program).0.iter().any(|p| p.name == name && p.file)
}

/// A qualified value's parts: the value, and whether it is base64.
fn qualified(o: &Map<String, Value>) -> Option<(&Value, bool)> {
    const PARTS: [&str; 5] = ["value", "mediaType", "encoding", "schema", "format"];
    if !o.keys().all(|k| PARTS.contains(&k.as_str())) {
        return None;
    }
    let value = o.get("value")?;
    let encoding = o.get("encoding").or_else(|| o.get("format").and_then(|f| f.get("encoding")));
    Some((value, encoding.and_then(Value::as_str).is_some_and(|e| e.eq_ignore_ascii_case("base64"))))
}

fn href(o: &Map<String, Value>) -> Option<&str> {
    o.get("href").and_then(Value::as_str)
}

fn value_only(what: &str, v: Value) -> Result<Value, String> {
    match &v {
        Value::Object(o) if href(o).is_some() => Err(format!("{what} is a value, not a file: give it inline")),
        Value::Object(o) => match qualified(o) {
            Some((value, false)) => Ok(value.clone()),
            _ => Err(format!("{what}: give a value, or {{\"value\": ...}}")),
        },
        Value::Array(_) => Err(format!("{what} takes one value")),
        _ => Ok(v),
    }
}

fn service_value(what: &str, v: Value) -> Result<Value, String> {
    match &v {
        Value::Object(o) if href(o).is_some() => Err(format!("{what}: a service takes values, not files: give it inline")),
        Value::Object(o) => match qualified(o) {
            Some((_, true)) => Err(format!("{what}: a service's parameters are JSON, not base64")),
            Some((value, false)) => Ok(value.clone()),
            None => Ok(v),
        },
        _ => Ok(v),
    }
}

fn template_file(what: &str, v: Value) -> Result<Value, String> {
    match &v {
        Value::String(_) | Value::Number(_) => Ok(v),
        Value::Object(o) => {
            if let Some(url) = href(o) {
                return Ok(json!({"url": url}));
            }
            match qualified(o) {
                Some((Value::String(b), true)) => Ok(json!({"base64": b})),
                Some((Value::String(_) | Value::Number(_), false)) => Ok(qualified(o).expect("a value").0.clone()),
                Some((other, false)) => Ok(Value::String(other.to_string())), // JSON given for a file: its text
                _ => Err(format!("{what} is a file: give its text, {{\"value\": ..., \"encoding\": \"base64\"}} or {{\"href\": URL}}")),
            }
        }
        _ => Err(format!("{what} is a file: give its text, {{\"value\": ..., \"encoding\": \"base64\"}} or {{\"href\": URL}}")),
    }
}

fn cwl_value(what: &str, v: Value, file: bool) -> Result<Value, String> {
    match v {
        Value::Array(items) if file => items.into_iter().map(|i| cwl_value(what, i, true)).collect::<Result<Vec<_>, _>>().map(Value::Array),
        Value::Object(o) if o.contains_key("class") => Ok(Value::Object(o)), // a CWL File or Directory object
        Value::Object(o) => match (href(&o), qualified(&o)) {
            (Some(url), _) if file => Ok(json!({"class": "File", "location": url})),
            (Some(_), _) => Err(format!("{what} is a value, not a file: give it inline")),
            (None, Some((Value::String(b), true))) if file => Ok(json!({"class": "File", "base64": b})),
            (None, Some((Value::String(text), false))) if file => Ok(json!({"class": "File", "contents": text})),
            (None, Some((value, false))) if !file => Ok(value.clone()),
            (None, Some(_)) => Err(format!("{what}: a file's value is its text, or base64 with \"encoding\": \"base64\"")),
            (None, None) if file => {
                Err(format!("{what} is a file: give its text, {{\"value\": ..., \"encoding\": \"base64\"}} or {{\"href\": URL}}"))
            }
            (None, None) => Ok(Value::Object(o)), // a record
        },
        Value::String(text) if file => Ok(json!({"class": "File", "contents": text})),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(name: &str, kind: &str, source: &str) -> Process {
        Process::Program(std::sync::Arc::new(crate::jobs::Program::parse(name, kind, source, &[]).unwrap()))
    }

    fn template() -> Process {
        program("p", "template", "/bin/echo [in:val:x:int] [in:file:data:binary] [out:file:y:float] [out:file:z:string]")
    }

    fn cwl() -> Process {
        let tool = r#"{"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "cat",
            "inputs": {"f": {"type": "File", "inputBinding": {}}, "many": "File[]?", "n": "int?"},
            "outputs": {"out": {"type": "stdout"}}}"#;
        program("c", "cwl", tool)
    }

    #[test]
    fn template_inputs_become_the_spawns_values_files_and_urls() {
        let body =
            json!({"inputs": {"x": {"value": 3}, "data": {"value": "aGk=", "format": {"mediaType": "image/tiff", "encoding": "base64"}}}});
        let e = read(&template(), &body).unwrap();
        assert_eq!(Value::Object(e.inputs), json!({"x": 3, "data": {"base64": "aGk="}}));
        assert_eq!((e.wanted.response, e.asks_async), (Response::Raw, false));
        assert_eq!(e.wanted.outputs, vec![("y".into(), Transmission::Value), ("z".into(), Transmission::Value)]);
        let e = read(&template(), &json!({"inputs": {"x": "4", "data": {"href": "https://example.org/d"}}})).unwrap();
        assert_eq!(e.inputs["data"], json!({"url": "https://example.org/d"}));
        assert_eq!(read(&template(), &json!({"inputs": {"data": "text"}})).unwrap().inputs["data"], json!("text"));
    }

    #[test]
    fn cwl_files_are_made_file_objects() {
        let body = json!({"inputs": {"f": {"href": "https://example.org/a"}, "many": ["one", {"value": "dHdv", "encoding": "base64"}], "n": {"value": 2}}});
        let e = read(&cwl(), &body).unwrap();
        assert_eq!(e.inputs["f"], json!({"class": "File", "location": "https://example.org/a"}));
        assert_eq!(e.inputs["many"], json!([{"class": "File", "contents": "one"}, {"class": "File", "base64": "dHdv"}]));
        assert_eq!(e.inputs["n"], json!(2));
        let own = json!({"class": "File", "location": "https://example.org/b", "basename": "b.txt"});
        assert_eq!(read(&cwl(), &json!({"inputs": {"f": own.clone()}})).unwrap().inputs["f"], own);
    }

    #[test]
    fn outputs_and_response_say_what_to_answer() {
        let body = json!({"inputs": {}, "outputs": {"z": {"transmissionMode": "reference"}}, "response": "document", "mode": "async"});
        let e = read(&template(), &body).unwrap();
        assert_eq!(
            (e.wanted.outputs.clone(), e.wanted.response, e.asks_async),
            (vec![("z".into(), Transmission::Reference)], Response::Document, true)
        );
        assert_eq!(read(&template(), &json!({"outputs": {}})).unwrap().wanted.outputs.len(), 2, "none named: all");
        let kept = serde_json::to_value(&e.wanted).unwrap();
        assert_eq!(kept, json!({"outputs": [["z", "reference"]], "response": "document"}));
        assert_eq!(serde_json::from_value::<Wanted>(kept).unwrap(), e.wanted);
    }

    #[test]
    fn what_does_not_fit_is_refused_saying_why() {
        for (body, says) in [
            (json!([1]), "JSON object"),
            (json!({"inputs": [1]}), "'inputs' is an object"),
            (json!({"inputs": {"x": {"href": "https://e/x"}}}), "a value, not a file"),
            (json!({"inputs": {"x": [1, 2]}}), "takes one value"),
            (json!({"inputs": {"data": {"type": "wrong/type"}}}), "is a file"),
            (json!({"outputs": {"nope": {}}}), "no output 'nope'"),
            (json!({"outputs": {"y": {"transmissionMode": "carrier-pigeon"}}}), "value or reference"),
            (json!({"response": "both"}), "'response'"),
            (json!({"subscriber": {"successUri": "https://e/"}}), "callbacks"),
        ] {
            let e = read(&template(), &body).unwrap_err();
            assert!(e.contains(says), "{body}: {e}");
        }
        assert!(read(&cwl(), &json!({"inputs": {"n": {"href": "https://e/n"}}})).unwrap_err().contains("not a file"));
    }

    #[test]
    fn a_services_inputs_are_its_parameters_and_result_its_output() {
        let service = Process::Service("s".into());
        let body = json!({"inputs": {"n": {"value": 3}, "opts": {"value": 1, "depth": 2}, "list": [1, 2]}, "outputs": {"result": {}}});
        let e = read(&service, &body).unwrap();
        assert_eq!(Value::Object(e.inputs), json!({"n": 3, "opts": {"value": 1, "depth": 2}, "list": [1, 2]}));
        assert_eq!(e.wanted.outputs, vec![("result".into(), Transmission::Value)]);
        assert!(read(&service, &json!({"inputs": {"f": {"href": "https://e/f"}}})).unwrap_err().contains("not files"));
        assert!(read(&service, &json!({"outputs": {"other": {}}})).unwrap_err().contains("no output 'other'"));
    }
}
