//! A deployed program as an OGC process: its summary (in `/processes`)
//! and its description (`/processes/{id}`), made from its template or
//! its CWL document alone (pure: unit-tested below).
//!
//! Rules:
//! - A process's id is the program's name; its version is `1.0.0` (a
//!   program deployed here has no version of its own).
//! - Every process runs synchronously or asynchronously, can be dismissed,
//!   and gives its outputs by value or by reference.
//! - Each input and output's schema is the program's interface's
//!   (`jobs::interface`); an input occurs once, an optional one at least
//!   zero times.

use serde_json::{json, Map, Value};

use super::{service_runs, Process};
use crate::jobs::{interface, Program, Runs};
use crate::wire::url;

pub const VERSION: &str = "1.0.0";
pub const JOB_CONTROL: [&str; 3] = ["sync-execute", "async-execute", "dismiss"];
pub const TRANSMISSION: [&str; 2] = ["value", "reference"];

/// A process's summary; `base` is the face's root URL (`.../ogcapi`).
pub fn summary(process: &Process, base: &str) -> Value {
    let description = match process {
        Process::Program(p) => about(p),
        Process::Service(name) => service_runs::about(name),
    };
    let id = process.id();
    json!({
        "id": id, "version": VERSION, "title": id, "description": description,
        "jobControlOptions": JOB_CONTROL, "outputTransmission": TRANSMISSION,
        "links": [{"href": url::join(base, &format!("/processes/{id}")), "rel": "self", "type": "application/json", "title": "process description"}],
    })
}

/// A process's description: its summary with its inputs and outputs (a
/// service's: none declared, any taken; `result`, any JSON).
pub fn describe(process: &Process, base: &str) -> Value {
    let mut d = summary(process, base);
    let (inputs, outputs) = match process {
        Process::Program(p) => interface(p),
        Process::Service(_) => (Map::new(), [("result".to_string(), json!({"title": "result", "schema": {}}))].into_iter().collect()),
    };
    d["inputs"] = Value::Object(inputs);
    d["outputs"] = Value::Object(outputs);
    d["links"].as_array_mut().expect("links").push(json!({
        "href": url::join(base, &format!("/processes/{}/execution", process.id())), "rel": "http://www.opengis.net/def/rel/ogc/1.0/execute",
        "type": "application/json", "title": "execute the process",
    }));
    d
}

/// A program's inputs and outputs, by name.
fn interface(program: &Program) -> (Map<String, Value>, Map<String, Value>) {
    let (ins, outs) = interface::of(program);
    let ins = ins
        .into_iter()
        .map(|p| {
            (p.name.clone(), json!({"title": p.name, "schema": p.schema, "minOccurs": if p.optional { 0 } else { 1 }, "maxOccurs": 1}))
        })
        .collect();
    (ins, outs.into_iter().map(|p| (p.name.clone(), json!({"title": p.name, "schema": p.schema}))).collect())
}

/// One line on what the program runs.
fn about(program: &Program) -> String {
    match &program.runs {
        Runs::Template { template, .. } => format!("the command-line program {}", template.text),
        Runs::Cwl(_) | Runs::CwlRunner { .. } => {
            let doc: Value = serde_json::from_str(&program.source).unwrap_or(Value::Null);
            let said = [&doc["doc"], &doc["label"]].into_iter().find_map(|v| v.as_str().map(str::to_string));
            said.unwrap_or_else(|| "a CWL tool".to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(kind: &str, source: &str) -> Process {
        Process::Program(std::sync::Arc::new(Program::parse("p", kind, source, &[]).expect("a program")))
    }

    #[test]
    fn a_template_is_described_by_its_parameters() {
        let d = describe(&program("template", "/bin/echo [in:val:x:int] [in:file:data:binary] [out:file:y:float]"), "http://h/ogcapi");
        assert_eq!((d["id"].as_str(), d["version"].as_str()), (Some("p"), Some(VERSION)));
        assert_eq!(d["inputs"]["x"], json!({"title": "x", "schema": {"type": "integer"}, "minOccurs": 1, "maxOccurs": 1}));
        assert_eq!(d["inputs"]["data"]["schema"]["contentEncoding"], "binary");
        assert_eq!(d["outputs"]["y"]["schema"], json!({"type": "number"}));
        assert!(d["inputs"].get("y").is_none() && d["outputs"].get("x").is_none());
        assert_eq!(d["jobControlOptions"], json!(["sync-execute", "async-execute", "dismiss"]));
        let rels: Vec<&str> = d["links"].as_array().unwrap().iter().map(|l| l["rel"].as_str().unwrap()).collect();
        assert_eq!(rels, ["self", "http://www.opengis.net/def/rel/ogc/1.0/execute"]);
        assert_eq!(d["links"][1]["href"], "http://h/ogcapi/processes/p/execution");
        let pinned = describe(&program("template", "/bin/echo"), "https://r/relay/lab/ogcapi#sha256=PIN");
        assert_eq!(pinned["links"][1]["href"], "https://r/relay/lab/ogcapi/processes/p/execution#sha256=PIN", "a pin stays last");
    }

    #[test]
    fn cwl_types_map_to_json_schema_and_optional_ones_to_min_occurs_zero() {
        let tool = r#"{"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "echo", "label": "says it",
            "inputs": {"msg": {"type": "string", "inputBinding": {}}, "n": {"type": "int", "default": 3}, "f": "File?"},
            "outputs": {"out": {"type": "stdout"}}}"#;
        let d = describe(&program("cwl", tool), "http://h/ogcapi");
        assert_eq!(d["description"], "says it");
        assert_eq!(d["inputs"]["msg"]["minOccurs"], 1);
        assert_eq!(
            (d["inputs"]["n"]["minOccurs"].clone(), d["inputs"]["n"]["schema"].clone()),
            (json!(0), json!({"type": "integer", "default": 3}))
        );
        assert_eq!(d["inputs"]["f"]["minOccurs"], 0);
        assert_eq!(d["outputs"]["out"]["schema"]["contentEncoding"], "binary");
    }

    #[test]
    fn a_service_takes_any_inputs_and_gives_its_result() {
        let d = describe(&Process::Service("hello".into()), "http://h/ogcapi");
        assert_eq!((d["id"].as_str(), d["inputs"].clone()), (Some("hello"), json!({})));
        assert_eq!(d["outputs"], json!({"result": {"title": "result", "schema": {}}}));
        assert!(d["description"].as_str().unwrap().contains("domain of one rank"));
    }
}
