//! A client's job object checked against the tool's inputs (at spawn, on
//! the wire): each value of its type, defaults filled in, nothing the tool
//! does not name. A File is `{"class": "File", "location": URL}` (pulled,
//! or linked when the URL is this endpoint's), `{"class": "File",
//! "contents": TEXT}` or `{"base64": ...}`, with an optional `basename`; a
//! Directory is `{"class": "Directory", "basename", "listing": [...]}`.
//! Each File or Directory is staged at `in/K/BASENAME` in the job's
//! directory; the job object then holds where, and [`resolve`] makes that
//! the CWL File object a program's command line is built from.

use std::path::Path;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::tool::{Tool, Type};

/// Marks a Directory the client gave as a literal (`Checker::any`; see `delegate::as_the_runner_reads`).
pub(super) const LITERAL: &str = "mpiws:literal";

/// Most files and directories one job stages.
pub const MAX_STAGED: usize = 10_000;
/// Most elements all of one job's lists hold together.
pub const MAX_ELEMENTS: usize = 100_000;

/// Where a staged file's bytes come from.
#[derive(Debug, Clone, PartialEq)]
pub enum From {
    Location(String),
    Bytes(Vec<u8>),
    /// An empty directory to make (a Directory, before its listing).
    Dir,
}

/// One file or directory to bring into the job's directory, at `rel`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub what: String,
    pub rel: String,
    pub from: From,
}

#[derive(Default)]
pub(super) struct Checker {
    pub(super) stages: Vec<Stage>,
    /// Whether Directories given as a listing are marked literals (`LITERAL`; for the runner only).
    pub(super) literals: bool,
    elements: usize,
    slots: usize,
}

/// The job object with defaults, each File and Directory replaced by
/// `{"class", "basename", "path": REL}`, and what to stage.
pub fn check(tool: &Tool, mut given: Map<String, Value>) -> Result<(Map<String, Value>, Vec<Stage>), String> {
    let mut c = Checker::default();
    let mut job = Map::new();
    for input in &tool.inputs {
        let v = match given.remove(&input.name) {
            Some(Value::Null) | None => input.default.clone().unwrap_or(Value::Null),
            Some(v) => v,
        };
        if v.is_null() && !accepts_null(&input.typ) {
            return Err(format!("missing input '{}' ({})", input.name, usage(tool)));
        }
        let v = c.value(&input.typ, v, &format!("input '{}'", input.name))?;
        job.insert(input.name.clone(), v);
    }
    if let Some(extra) = given.keys().next() {
        return Err(format!("no input '{extra}' ({})", usage(tool)));
    }
    Ok((job, c.stages))
}

pub fn usage(tool: &Tool) -> String {
    let names: Vec<&str> = tool.inputs.iter().map(|i| i.name.as_str()).collect();
    if names.is_empty() {
        "it takes no inputs".into()
    } else {
        format!("inputs: {}", names.join(", "))
    }
}

fn accepts_null(t: &Type) -> bool {
    match t {
        Type::Null => true,
        Type::Union(m) => m.iter().any(accepts_null),
        _ => false,
    }
}

impl Checker {
    fn value(&mut self, t: &Type, v: Value, what: &str) -> Result<Value, String> {
        let bad = |v: &Value| Err(format!("{what} must be {}, not {}", describe(t), excerpt(v)));
        match (t, v) {
            (Type::Null, Value::Null) => Ok(Value::Null),
            (Type::Boolean, v @ Value::Bool(_)) => Ok(v),
            (Type::Int, Value::Number(n)) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => Ok(Value::Number(n)),
            (Type::Long, Value::Number(n)) if n.is_i64() => Ok(Value::Number(n)),
            (Type::Float | Type::Double, Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => Ok(Value::Number(n)),
            (Type::String, v @ Value::String(_)) => Ok(v),
            (Type::Enum(symbols), Value::String(s)) if symbols.contains(&s) => Ok(Value::String(s)),
            (Type::Any, v) if !v.is_null() && !has_class(&v) => {
                // Its lists count toward the job's bound like any other's.
                self.elements += elements_in(&v);
                if self.elements > MAX_ELEMENTS {
                    return Err(format!("a job's lists hold at most {MAX_ELEMENTS} elements"));
                }
                Ok(v)
            }
            (Type::File, v @ Value::Object(_)) => self.file(v, what),
            (Type::Directory, Value::Object(o)) if o.get("class").and_then(Value::as_str) == Some("Directory") => {
                self.directory(o, what, None)
            }
            (Type::Array(items, _), Value::Array(a)) => {
                self.elements += a.len();
                if self.elements > MAX_ELEMENTS {
                    return Err(format!("a job's lists hold at most {MAX_ELEMENTS} elements"));
                }
                a.into_iter()
                    .enumerate()
                    .map(|(i, x)| self.value(items, x, &format!("{what}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array)
            }
            (Type::Union(members), v) => {
                // `T?` given a value: T's own reason, which says more than "must be T?".
                if let ([Type::Null, one] | [one, Type::Null], false) = (&members[..], v.is_null()) {
                    return self.value(one, v, what);
                }
                for m in members {
                    let before = (self.stages.len(), self.elements, self.slots);
                    match self.value(m, v.clone(), what) {
                        Ok(x) => return Ok(x),
                        Err(_) => {
                            self.stages.truncate(before.0);
                            (self.elements, self.slots) = (before.1, before.2);
                        }
                    }
                }
                bad(&v)
            }
            (_, v) => bad(&v),
        }
    }

    /// Any value, checked by shape only (`delegate`): each File and Directory
    /// staged, a File's `secondaryFiles` beside it; records and lists walked.
    pub(super) fn any(&mut self, v: Value, what: &str) -> Result<Value, String> {
        match v {
            Value::Object(mut o) if o.get("class").and_then(Value::as_str) == Some("File") => {
                let secondary = match o.remove("secondaryFiles") {
                    None => vec![],
                    Some(Value::Array(a)) => a,
                    Some(_) => return Err(format!("{what}: secondaryFiles is a list")),
                };
                let mut f = self.file(Value::Object(o), what)?;
                if !secondary.is_empty() {
                    let slot = f["path"].as_str().and_then(|p| p.rsplit_once('/')).map(|(dir, _)| dir.to_string()).unwrap_or_default();
                    let mut staged = vec![];
                    for (i, x) in secondary.into_iter().enumerate() {
                        let w = format!("{what}'s secondaryFiles[{i}]");
                        staged.push(match x {
                            Value::Object(d) if d.get("class").and_then(Value::as_str) == Some("Directory") => {
                                self.directory(d, &w, Some(&slot))?
                            }
                            x @ Value::Object(_) => self.file_in(x, &w, Some(&slot))?,
                            _ => return Err(format!("{w} is a File or a Directory")),
                        });
                    }
                    f["secondaryFiles"] = Value::Array(staged);
                }
                Ok(f)
            }
            Value::Object(o) if o.get("class").and_then(Value::as_str) == Some("Directory") => self.directory(o, what, None),
            Value::Object(o) => o
                .into_iter()
                .map(|(k, x)| Ok((k.clone(), self.any(x, &format!("{what}.{k}"))?)))
                .collect::<Result<_, String>>()
                .map(Value::Object),
            Value::Array(a) => {
                self.elements += a.len();
                if self.elements > MAX_ELEMENTS {
                    return Err(format!("a job's lists hold at most {MAX_ELEMENTS} elements"));
                }
                a.into_iter().enumerate().map(|(i, x)| self.any(x, &format!("{what}[{i}]"))).collect::<Result<_, _>>().map(Value::Array)
            }
            scalar => Ok(scalar),
        }
    }

    fn slot(&mut self) -> Result<String, String> {
        self.slots += 1;
        if self.stages.len() >= MAX_STAGED {
            return Err(format!("a job stages at most {MAX_STAGED} files and directories"));
        }
        Ok(format!("in/{}", self.slots - 1))
    }

    /// A File: where it comes from, staged at `in/K/BASENAME` (or inside its Directory's `parent`).
    fn file(&mut self, v: Value, what: &str) -> Result<Value, String> {
        self.file_in(v, what, None)
    }

    fn file_in(&mut self, v: Value, what: &str, parent: Option<&str>) -> Result<Value, String> {
        let Value::Object(o) = v else { unreachable!("checked by the caller") };
        let class = o.get("class").and_then(Value::as_str);
        if class.is_some_and(|c| c != "File") || (class.is_none() && !o.contains_key("base64")) {
            return Err(format!("{what} is a File: {{\"class\": \"File\", \"location\": URL}}, {{\"class\": \"File\", \"contents\": TEXT}} or {{\"base64\": ...}}"));
        }
        for k in o.keys() {
            if !matches!(
                k.as_str(),
                "class"
                    | "location"
                    | "contents"
                    | "base64"
                    | "basename"
                    | "size"
                    | "checksum"
                    | "nameroot"
                    | "nameext"
                    | "path"
                    | "format"
            ) {
                return Err(format!("{what}: a File's {k:?} is not supported"));
            }
        }
        let from = match (o.get("location"), o.get("contents"), o.get("base64")) {
            (Some(Value::String(u)), None, None) => From::Location(u.clone()),
            (None, Some(Value::String(t)), None) => From::Bytes(t.clone().into_bytes()),
            (None, None, Some(Value::String(b))) => {
                From::Bytes(base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| format!("{what}: bad base64: {e}"))?)
            }
            _ => return Err(format!("{what}: a File has one of location (an http:// or https:// URL), contents or base64")),
        };
        let basename = match (o.get("basename"), &from) {
            (Some(Value::String(b)), _) => b.clone(),
            (Some(_), _) => return Err(format!("{what}: basename is a string")),
            (None, From::Location(u)) => u.rsplit('/').next().unwrap_or_default().to_string(),
            (None, _) => what.trim_start_matches("input '").split(['\'', '[']).next().unwrap_or("input").to_string(),
        };
        check_basename(&basename, what)?;
        let rel = match parent {
            Some(p) => format!("{p}/{basename}"),
            None => format!("{}/{basename}", self.slot()?),
        };
        self.stages.push(Stage { what: what.to_string(), rel: rel.clone(), from });
        let mut f = json!({"class": "File", "basename": basename, "path": rel});
        if let Some(Value::String(format)) = o.get("format") {
            f["format"] = json!(format);
        }
        Ok(f)
    }

    fn directory(&mut self, o: Map<String, Value>, what: &str, parent: Option<&str>) -> Result<Value, String> {
        let Some(Value::String(basename)) = o.get("basename") else {
            return Err(format!("{what}: a Directory has a basename and its listing (a Directory by location alone is not supported)"));
        };
        check_basename(basename, what)?;
        if o.contains_key("location") && !o.contains_key("listing") {
            return Err(format!("{what}: a Directory is given by its listing, not by location"));
        }
        let rel = match parent {
            Some(p) => format!("{p}/{basename}"),
            None => format!("{}/{basename}", self.slot()?),
        };
        self.stages.push(Stage { what: what.to_string(), rel: rel.clone(), from: From::Dir });
        let mut names: Vec<String> = vec![];
        let listing = match o.get("listing") {
            None => vec![],
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(format!("{what}: listing is a list")),
        };
        let mut out = vec![];
        for (i, entry) in listing.into_iter().enumerate() {
            let w = format!("{what}/{i}");
            let v = match entry {
                Value::Object(e) if e.get("class").and_then(Value::as_str) == Some("Directory") => self.directory(e, &w, Some(&rel))?,
                e @ Value::Object(_) => self.file_in(e, &w, Some(&rel))?,
                _ => return Err(format!("{w}: a listing holds Files and Directories")),
            };
            let name = v["basename"].as_str().unwrap_or_default().to_string();
            if names.contains(&name) {
                return Err(format!("{what}: {name:?} twice in one listing"));
            }
            if self.stages.len() > MAX_STAGED {
                return Err(format!("a job stages at most {MAX_STAGED} files and directories"));
            }
            names.push(name);
            out.push(v);
        }
        let mut d = json!({"class": "Directory", "basename": basename, "path": rel, "listing": out});
        // A listing with no location is a literal (`any`: for the runner, which makes it from its listing).
        if self.literals && !o.contains_key("location") {
            d[LITERAL] = Value::Bool(true);
        }
        Ok(d)
    }
}

/// A basename is one plain path component: it never leads out of its directory.
pub(super) fn check_basename(b: &str, what: &str) -> Result<(), String> {
    // No control characters either: a name with a newline would forge lines
    // in anything that lists files one per line.
    if b.is_empty() || b == "." || b == ".." || b.contains('/') || b.chars().any(char::is_control) || b.len() > 255 {
        return Err(format!("{what}: basename {:?} is not a plain file name", excerpt(&Value::String(b.into()))));
    }
    Ok(())
}

/// The elements of every list in `v`, nested ones included.
fn elements_in(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len() + a.iter().map(elements_in).sum::<usize>(),
        Value::Object(o) => o.values().map(elements_in).sum(),
        _ => 0,
    }
}

fn has_class(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key("class") || o.values().any(has_class),
        Value::Array(a) => a.iter().any(has_class),
        _ => false,
    }
}

fn describe(t: &Type) -> String {
    super::tool::type_name(t).to_string()
}

fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

/// Each staged File and Directory of the job object made a full CWL object
/// for the job in `dir`: absolute `path`, `location`, `nameroot`, `nameext`,
/// and a File's `size` (as staged).
pub fn resolve(v: &Value, dir: &Path) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|x| resolve(x, dir)).collect()),
        Value::Object(o) if !o.contains_key("class") => Value::Object(o.iter().map(|(k, x)| (k.clone(), resolve(x, dir))).collect()),
        Value::Object(o) if matches!(o.get("class").and_then(Value::as_str), Some("File" | "Directory")) => {
            let mut o = o.clone();
            let path = dir.join(o["path"].as_str().unwrap_or_default());
            let basename = o["basename"].as_str().unwrap_or_default().to_string();
            let (root, ext) = split_ext(&basename);
            o.insert("path".into(), json!(path.to_string_lossy()));
            // A URI: a name with `#` or `%` must not read as a fragment or an escape.
            let encoded: Vec<String> = path.to_string_lossy().split('/').map(crate::wire::url::percent_encode).collect();
            o.insert("location".into(), json!(format!("file://{}", encoded.join("/"))));
            o.insert("nameroot".into(), json!(root));
            o.insert("nameext".into(), json!(ext));
            if o["class"] == "File" {
                o.insert("size".into(), json!(std::fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0)));
            }
            for k in ["listing", "secondaryFiles"] {
                if let Some(Value::Array(l)) = o.get(k) {
                    let l = l.iter().map(|x| resolve(x, dir)).collect();
                    o.insert(k.into(), Value::Array(l));
                }
            }
            Value::Object(o)
        }
        other => other.clone(),
    }
}

/// `nameroot` and `nameext` as CWL splits a basename: at its last '.', unless that is its first character.
pub fn split_ext(basename: &str) -> (String, String) {
    match basename.rfind('.') {
        Some(i) if i > 0 => (basename[..i].to_string(), basename[i..].to_string()),
        _ => (basename.to_string(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> Tool {
        Tool::parse(&json!({
            "cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "cat",
            "inputs": {"f": "File", "n": {"type": "int", "default": 2}, "tag": "string?", "many": "File[]?", "d": "Directory?",
                       "kind": {"type": {"type": "enum", "symbols": ["a", "b"]}, "default": "a"}},
            "outputs": {}
        }))
        .unwrap()
    }

    #[test]
    fn files_are_staged_each_in_a_slot_of_its_own() {
        let (job, stages) = check(
            &tool(),
            json!({"f": {"class": "File", "location": "http://h/files/abc", "basename": "r.txt"},
                   "many": [{"class": "File", "contents": "x"}, {"base64": "eQ==", "basename": "y"}],
                   "d": {"class": "Directory", "basename": "dd", "listing": [{"class": "File", "contents": "z", "basename": "z.txt"}]}})
            .as_object()
            .unwrap()
            .clone(),
        )
        .unwrap();
        // the tool's inputs in name order: d, f, kind, many, n, tag
        assert_eq!(job["f"], json!({"class": "File", "basename": "r.txt", "path": "in/1/r.txt"}));
        assert_eq!(job["n"], json!(2));
        assert_eq!(job["tag"], json!(null));
        assert_eq!(job["kind"], json!("a"));
        assert_eq!(job["many"][0]["basename"], json!("many"));
        assert_eq!(job["d"]["listing"][0]["path"], json!("in/0/dd/z.txt"));
        let rels: Vec<&str> = stages.iter().map(|s| s.rel.as_str()).collect();
        assert_eq!(rels, ["in/0/dd", "in/0/dd/z.txt", "in/1/r.txt", "in/2/many", "in/3/y"]);
        assert_eq!(stages[2].from, From::Location("http://h/files/abc".into()));
        assert_eq!(stages[4].from, From::Bytes(b"y".to_vec()));
        assert_eq!(stages[0].from, From::Dir);
    }

    #[test]
    fn wrong_missing_and_unknown_inputs_are_refused() {
        let f = json!({"class": "File", "contents": "x"});
        for (given, why) in [
            (json!({}), "missing input 'f'"),
            (json!({"f": f, "zz": 1}), "no input 'zz'"),
            (json!({"f": f, "n": "2"}), "input 'n' must be \"int\""),
            (json!({"f": f, "n": 4294967296u64}), "must be \"int\""),
            (json!({"f": f, "kind": "c"}), "input 'kind' must be"),
            (json!({"f": "/etc/passwd"}), "input 'f' must be \"File\""),
            (json!({"f": {"class": "File", "path": "/etc/passwd"}}), "location"),
            (json!({"f": {"class": "File", "contents": "x", "basename": "../x"}}), "not a plain file name"),
            (json!({"f": {"class": "File", "contents": "x", "basename": "a\nb"}}), "not a plain file name"),
            (json!({"f": {"class": "File", "contents": "x", "secondaryFiles": []}}), "secondaryFiles"),
            (json!({"f": f, "d": {"class": "Directory", "location": "http://h/d", "basename": "d"}}), "by its listing"),
            (json!({"f": f, "d": {"class": "Directory", "basename": "d", "listing": [f, f]}}), "twice"),
        ] {
            let e = check(&tool(), given.as_object().unwrap().clone()).unwrap_err();
            assert!(e.contains(why), "{given}: {e}");
        }
    }

    #[test]
    fn lists_under_any_count_toward_the_bound() {
        let t = Tool::parse(&json!({"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "true",
            "inputs": {"a": "Any"}, "outputs": {}}))
        .unwrap();
        let within = json!({"a": {"x": vec![1; MAX_ELEMENTS - 1]}});
        assert!(check(&t, within.as_object().unwrap().clone()).is_ok());
        let over = json!({"a": [vec![0; MAX_ELEMENTS / 2], vec![0; MAX_ELEMENTS / 2]]});
        let e = check(&t, over.as_object().unwrap().clone()).unwrap_err();
        assert!(e.contains("at most 100000 elements"), "{e}");
    }

    #[test]
    fn resolve_gives_the_cwl_file_object() {
        let v = resolve(&json!({"class": "File", "basename": "r.tar.gz", "path": "in/0/r.tar.gz"}), Path::new("/w/j"));
        assert_eq!(v["path"], json!("/w/j/in/0/r.tar.gz"));
        assert_eq!(v["location"], json!("file:///w/j/in/0/r.tar.gz"));
        assert_eq!((v["nameroot"].as_str().unwrap(), v["nameext"].as_str().unwrap()), ("r.tar", ".gz"));
        assert_eq!(split_ext(".bashrc"), (".bashrc".to_string(), String::new()));
    }
}
