//! A CWL v1.2 `CommandLineTool` document (as JSON) parsed into the typed
//! rule its jobs follow. What the parser does not know is refused, naming
//! it, rather than ignored: a requirement it does not meet, a JavaScript
//! expression, a record type. Inputs, outputs and requirements may each be
//! a list or a map, as CWL allows; ids may be `#name` or `file.cwl#name`.

use serde_json::{json, Map, Value};

use super::params::{self, Mode};

/// A CWL type (records are not supported).
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    String,
    File,
    Directory,
    Any,
    Enum(Vec<String>),
    /// Items, and the binding each item gets (an array type's own `inputBinding`).
    Array(Box<Type>, Option<Box<Binding>>),
    Union(Vec<Type>),
}

impl Type {
    /// Whether `v` is a value of this type (an enum's: one of its symbols).
    pub fn admits(&self, v: &Value) -> bool {
        match (self, v) {
            (Type::Any, v) => !v.is_null(),
            (Type::Null, Value::Null) | (Type::Boolean, Value::Bool(_)) | (Type::String, Value::String(_)) => true,
            (Type::Enum(s), Value::String(x)) => s.contains(x),
            (Type::Int | Type::Long, Value::Number(n)) => n.is_i64(),
            (Type::Float | Type::Double, Value::Number(_)) => true,
            (Type::File, Value::Object(o)) => o.get("class") == Some(&json!("File")),
            (Type::Directory, Value::Object(o)) => o.get("class") == Some(&json!("Directory")),
            (Type::Array(items, _), Value::Array(a)) => a.iter().all(|x| items.admits(x)),
            (Type::Union(m), v) => m.iter().any(|t| t.admits(v)),
            _ => false,
        }
    }
}

/// An `inputBinding` (or an argument's binding).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Binding {
    pub position: i64,
    pub prefix: Option<String>,
    pub separate: bool,
    pub item_separator: Option<String>,
    pub value_from: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: String,
    pub typ: Type,
    pub default: Option<Value>,
    pub binding: Option<Binding>,
    /// `mpiws:dashOk: true`: a value of it placed on its own may start with '-'.
    pub dash_ok: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub name: String,
    pub typ: Type,
    pub glob: Vec<String>,
    pub load_contents: bool,
    pub output_eval: Option<String>,
    /// `type: stdout` / `stderr`: the file the job's stream went to.
    pub std: Option<Std>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Std {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Argument {
    /// A word as written.
    Literal(String),
    Bound(Binding),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub base_command: Vec<String>,
    pub arguments: Vec<Argument>,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub stdin: Option<String>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub success_codes: Vec<i32>,
    /// `EnvVarRequirement`: name, value (may hold references).
    pub env: Vec<(String, String)>,
    /// Input and output names and types as written, for `GET /programs/{name}`.
    pub interface: Value,
}

/// Requirements a tool may state and mpiws meets; any other is refused.
const MET: &[&str] = &["EnvVarRequirement", "ResourceRequirement", "NetworkAccess", "WorkReuse", "StepInputExpressionRequirement"];

/// Most inputs, outputs, arguments a document declares.
const MAX_ITEMS: usize = 1000;

/// A name as an id gives it: after the last `#` and `/`.
pub fn short_id(id: &str) -> &str {
    let id = id.rsplit('#').next().unwrap_or(id);
    id.rsplit('/').next().unwrap_or(id)
}

/// A plain CWL identifier: letters, digits, '_', '-', '.'.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 200 && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl Tool {
    pub fn parse(doc: &Value) -> Result<Tool, String> {
        let Value::Object(d) = doc else { return Err("a CWL document is a map".into()) };
        match d.get("class").and_then(Value::as_str) {
            Some("CommandLineTool") => {}
            Some(other) => return Err(format!("class {other}: only a CommandLineTool is deployed as a program")),
            None => return Err("the document has no class (a CommandLineTool)".into()),
        }
        match d.get("cwlVersion").and_then(Value::as_str) {
            Some("v1.2") => {}
            v => return Err(format!("cwlVersion {}: mpiws reads CWL v1.2", v.unwrap_or("missing"))),
        }
        // runtime.cores, ram and sizes here are cwltool's defaults: a tool that asks for others
        // and reads them would see the wrong ones.
        let resources = |v: Option<&Value>| v.is_some_and(|r| r.to_string().contains("ResourceRequirement"));
        if (resources(d.get("requirements")) || resources(d.get("hints"))) && doc.to_string().contains("runtime.") {
            return Err("ResourceRequirement with $(runtime...) is not supported (runtime.cores, ram and sizes are fixed here)".into());
        }
        for key in d.keys() {
            let known = matches!(
                key.as_str(),
                "class"
                    | "cwlVersion"
                    | "id"
                    | "label"
                    | "doc"
                    | "intent"
                    | "baseCommand"
                    | "arguments"
                    | "inputs"
                    | "outputs"
                    | "stdin"
                    | "stdout"
                    | "stderr"
                    | "requirements"
                    | "hints"
                    | "successCodes"
                    | "temporaryFailCodes"
                    | "permanentFailCodes"
                    | "$namespaces"
                    | "$schemas"
            );
            if !known && !key.contains(':') {
                return Err(format!("{key}: not a field of a CommandLineTool that mpiws supports"));
            }
        }
        let env = requirements(d.get("requirements"))?;
        let base_command = match d.get("baseCommand") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => {
                a.iter().map(|w| w.as_str().map(str::to_string).ok_or("baseCommand holds strings")).collect::<Result<_, _>>()?
            }
            _ => return Err("baseCommand is needed: the program to run (a name on PATH, or an absolute path)".into()),
        };
        match base_command.first() {
            None => return Err("baseCommand is empty".into()),
            Some(p) if p.contains('/') && !p.starts_with('/') => {
                return Err(format!("baseCommand {p:?}: a name on PATH, or an absolute path (a job runs in a directory of its own)"))
            }
            Some(_) => {}
        }
        let mut arguments = Vec::new();
        for a in d.get("arguments").map(list).transpose()?.unwrap_or_default() {
            arguments.push(match a {
                Value::String(s) if params::has_reference(&s) || s.contains("${") => {
                    params::check(&s, Mode::Reference)?;
                    Argument::Bound(Binding { separate: true, value_from: Some(s), ..Binding::default() })
                }
                Value::String(s) => Argument::Literal(s),
                Value::Object(o) => {
                    let b = binding(&Value::Object(o))?;
                    if b.value_from.is_none() {
                        return Err("an argument's binding needs valueFrom".into());
                    }
                    Argument::Bound(b)
                }
                other => return Err(format!("argument {other}: a string or a binding")),
            });
        }
        let inputs = entries(d.get("inputs"), "inputs")?.into_iter().map(|(n, v)| input(n, v)).collect::<Result<Vec<_>, _>>()?;
        let stdout = stream_name(d, "stdout")?;
        let stderr = stream_name(d, "stderr")?;
        let stdin = stream_name(d, "stdin")?;
        let outputs = entries(d.get("outputs"), "outputs")?.into_iter().map(|(n, v)| output(n, v)).collect::<Result<Vec<_>, _>>()?;
        if arguments.len() > MAX_ITEMS || inputs.len() > MAX_ITEMS || outputs.len() > MAX_ITEMS {
            return Err(format!("at most {MAX_ITEMS} inputs, outputs and arguments"));
        }
        let success_codes = match d.get("successCodes") {
            None => vec![0],
            Some(v) => list(v)?
                .iter()
                .map(|c| c.as_i64().and_then(|c| i32::try_from(c).ok()).ok_or("successCodes are ints"))
                .collect::<Result<_, _>>()?,
        };
        let interface = json!({
            "inputs": inputs.iter().map(|i| {
                let mut m = json!({"name": i.name, "type": type_name(&i.typ)});
                if let Some(d) = &i.default { m["default"] = d.clone(); }
                m
            }).collect::<Vec<_>>(),
            "outputs": outputs.iter().map(|o| json!({"name": o.name, "type": type_name(&o.typ)})).collect::<Vec<_>>(),
            "baseCommand": base_command,
        });
        Ok(Tool { base_command, arguments, inputs, outputs, stdin, stdout, stderr, success_codes, env, interface })
    }

    pub fn input(&self, name: &str) -> Option<&Input> {
        self.inputs.iter().find(|i| i.name == name)
    }
}

/// A field that is a list, or a map of id -> entry (CWL's two forms).
fn entries(v: Option<&Value>, what: &str) -> Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    match v {
        None => {}
        Some(Value::Array(a)) => {
            for e in a {
                let id = e.get("id").and_then(Value::as_str).ok_or(format!("each of {what} has an id"))?;
                out.push((short_id(id).to_string(), e.clone()));
            }
        }
        Some(Value::Object(o)) => {
            for (k, e) in o {
                let e = match e {
                    Value::Object(_) => e.clone(),
                    t => json!({"type": t}), // `name: type`
                };
                out.push((short_id(k).to_string(), e));
            }
        }
        Some(_) => return Err(format!("{what} is a list or a map")),
    }
    for (i, (n, _)) in out.iter().enumerate() {
        if !plain_name(n) {
            return Err(format!("{what}: {n:?} is not a plain name (letters, digits, '_', '-', '.')"));
        }
        if out[..i].iter().any(|(m, _)| m == n) {
            return Err(format!("{what}: {n} twice"));
        }
    }
    Ok(out)
}

fn list(v: &Value) -> Result<Vec<Value>, String> {
    match v {
        Value::Array(a) => Ok(a.clone()),
        other => Ok(vec![other.clone()]),
    }
}

/// The requirements met (their env variables), or the first one refused.
fn requirements(v: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let reqs: Vec<(String, Value)> = match v {
        None => vec![],
        Some(Value::Array(a)) => a
            .iter()
            .map(|r| Ok((r.get("class").and_then(Value::as_str).ok_or("a requirement has a class")?.to_string(), r.clone())))
            .collect::<Result<_, String>>()?,
        Some(Value::Object(o)) => o.iter().map(|(k, r)| (k.clone(), r.clone())).collect(),
        Some(_) => return Err("requirements is a list or a map".into()),
    };
    let mut env = Vec::new();
    for (class, r) in reqs {
        let class = short_id(&class).to_string();
        if !MET.contains(&class.as_str()) {
            let why = match class.as_str() {
                "InlineJavascriptRequirement" => ": mpiws evaluates parameter references only, no JavaScript",
                "ShellCommandRequirement" => ": a job's command line is never given to a shell",
                "DockerRequirement" | "SoftwareRequirement" => {
                    ": the program runs on the endpoint as deployed (give it under hints to have it ignored)"
                }
                _ => "",
            };
            return Err(format!("requirement {class} is not supported{why} (supported: {})", MET.join(", ")));
        }
        if class == "EnvVarRequirement" {
            let defs = match r.get("envDef") {
                Some(Value::Object(o)) => o.iter().map(|(k, v)| json!({"envName": k, "envValue": v})).collect(),
                Some(Value::Array(a)) => a.clone(),
                _ => return Err("EnvVarRequirement has envDef".into()),
            };
            for e in defs {
                let (Some(name), Some(value)) = (e.get("envName").and_then(Value::as_str), e.get("envValue").and_then(Value::as_str))
                else {
                    return Err("an envDef has envName and envValue (strings)".into());
                };
                if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.is_empty() {
                    return Err(format!("envName {name:?}: letters, digits and '_'"));
                }
                params::check(value, Mode::Reference)?;
                env.push((name.to_string(), value.to_string()));
            }
        }
    }
    Ok(env)
}

/// `stdout`/`stderr`/`stdin`: a file name, or a reference giving one.
fn stream_name(d: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match d.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => {
            params::check(s, Mode::Reference)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(format!("{key} is a string")),
    }
}

fn binding(v: &Value) -> Result<Binding, String> {
    let Value::Object(o) = v else { return Err("an inputBinding is a map".into()) };
    let mut b = Binding { separate: true, ..Binding::default() };
    for (k, v) in o {
        match (k.as_str(), v) {
            ("position", Value::Number(n)) => b.position = n.as_i64().ok_or("position is an int")?,
            ("position", _) => return Err("position is an int (expressions are not supported there)".into()),
            ("prefix", Value::String(s)) => b.prefix = Some(s.clone()),
            ("separate", Value::Bool(s)) => b.separate = *s,
            ("itemSeparator", Value::String(s)) => b.item_separator = Some(s.clone()),
            ("valueFrom", Value::String(s)) => {
                params::check(s, Mode::Reference)?;
                b.value_from = Some(s.clone());
            }
            ("shellQuote", _) => {} // no shell: nothing to quote
            ("loadContents", _) => return Err("inputBinding.loadContents is not supported".into()),
            (k, _) => return Err(format!("inputBinding.{k} is not supported (position, prefix, separate, itemSeparator, valueFrom)")),
        }
    }
    if b.prefix.is_none() && !b.separate {
        return Err("'separate: false' needs a prefix".into());
    }
    Ok(b)
}

/// A type as CWL writes it: `string`, `File?`, `int[]`, `["null", "File"]`,
/// `{type: array, items: ..., inputBinding: ...}`, `{type: enum, symbols: [...]}`.
pub fn parse_type(v: &Value) -> Result<Type, String> {
    match v {
        Value::String(s) => {
            if let Some(inner) = s.strip_suffix('?') {
                return Ok(Type::Union(vec![Type::Null, parse_type(&Value::String(inner.into()))?]));
            }
            if let Some(inner) = s.strip_suffix("[]") {
                return Ok(Type::Array(Box::new(parse_type(&Value::String(inner.into()))?), None));
            }
            Ok(match s.as_str() {
                "null" => Type::Null,
                "boolean" => Type::Boolean,
                "int" => Type::Int,
                "long" => Type::Long,
                "float" => Type::Float,
                "double" => Type::Double,
                "string" => Type::String,
                "File" => Type::File,
                "Directory" => Type::Directory,
                "Any" => Type::Any,
                "record" => return Err("record types are not supported".into()),
                other => {
                    return Err(format!(
                    "type {other:?} is not supported (null, boolean, int, long, float, double, string, File, Directory, Any, enum, arrays)"
                ))
                }
            })
        }
        Value::Array(members) => {
            if members.is_empty() {
                return Err("an empty union of types".into());
            }
            Ok(Type::Union(members.iter().map(parse_type).collect::<Result<_, _>>()?))
        }
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("array") => {
                let items = parse_type(o.get("items").ok_or("an array type has items")?)?;
                let b = o.get("inputBinding").map(binding).transpose()?.map(Box::new);
                Ok(Type::Array(Box::new(items), b))
            }
            Some("enum") => {
                let symbols = o.get("symbols").and_then(Value::as_array).ok_or("an enum type has symbols")?;
                let symbols: Vec<String> = symbols
                    .iter()
                    .map(|s| s.as_str().map(|s| short_id(s).to_string()).ok_or("enum symbols are strings"))
                    .collect::<Result<_, _>>()?;
                if symbols.is_empty() {
                    return Err("an enum has at least one symbol".into());
                }
                Ok(Type::Enum(symbols))
            }
            Some("record") => Err("record types are not supported".into()),
            _ => Err(format!("type {v}: array, enum or a type name")),
        },
        _ => Err(format!("type {v}: array, enum or a type name")),
    }
}

/// A type written back, for the interface clients read.
pub fn type_name(t: &Type) -> Value {
    match t {
        Type::Null => json!("null"),
        Type::Boolean => json!("boolean"),
        Type::Int => json!("int"),
        Type::Long => json!("long"),
        Type::Float => json!("float"),
        Type::Double => json!("double"),
        Type::String => json!("string"),
        Type::File => json!("File"),
        Type::Directory => json!("Directory"),
        Type::Any => json!("Any"),
        Type::Enum(s) => json!({"type": "enum", "symbols": s}),
        Type::Array(items, _) => match type_name(items) {
            Value::String(s) => json!(format!("{s}[]")),
            other => json!({"type": "array", "items": other}),
        },
        Type::Union(members) => match &members[..] {
            [Type::Null, one] => match type_name(one) {
                Value::String(s) => json!(format!("{s}?")),
                other => json!(["null", other]),
            },
            _ => Value::Array(members.iter().map(type_name).collect()),
        },
    }
}

fn input(name: String, v: Value) -> Result<Input, String> {
    let fail = |e: String| format!("input {name}: {e}");
    let typ = parse_type(v.get("type").ok_or_else(|| fail("no type".into()))?).map_err(fail)?;
    let binding = v.get("inputBinding").map(binding).transpose().map_err(fail)?;
    let default = v.get("default").cloned();
    if let Some(d) = &default {
        if has_file(d) {
            return Err(fail("a File or Directory default is not supported (the client gives files)".into()));
        }
    }
    if v.get("secondaryFiles").is_some() {
        return Err(fail("secondaryFiles are not supported".into()));
    }
    if v.get("loadContents").and_then(Value::as_bool) == Some(true) {
        return Err(fail("loadContents on inputs is not supported".into()));
    }
    let dash_ok = ["mpiws:dashOk", "https://mpiws.org/cwl#dashOk"].iter().any(|k| v.get(*k).and_then(Value::as_bool) == Some(true));
    Ok(Input { name, typ, default, binding, dash_ok })
}

fn has_file(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key("class") || o.values().any(has_file),
        Value::Array(a) => a.iter().any(has_file),
        _ => false,
    }
}

fn output(name: String, v: Value) -> Result<Output, String> {
    let fail = |e: String| format!("output {name}: {e}");
    let t = v.get("type").ok_or_else(|| fail("no type".into()))?;
    if let Some(stream @ ("stdout" | "stderr")) = t.as_str() {
        let std = if stream == "stdout" { Std::Stdout } else { Std::Stderr };
        return Ok(Output { name, typ: Type::File, glob: vec![], load_contents: false, output_eval: None, std: Some(std) });
    }
    let typ = parse_type(t).map_err(fail)?;
    let ob = v.get("outputBinding");
    if ob.is_none() {
        return Err(fail("an output without outputBinding (its value from cwl.output.json) is not supported".into()));
    }
    if v.get("format").is_some() {
        return Err(fail("format on outputs is not supported".into()));
    }
    let glob = match ob.and_then(|b| b.get("glob")) {
        None => vec![],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|g| g.as_str().map(str::to_string).ok_or("glob patterns are strings"))
            .collect::<Result<_, _>>()
            .map_err(|e| fail(e.into()))?,
        Some(_) => return Err(fail("glob is a string or a list of strings".into())),
    };
    for g in &glob {
        params::check(g, Mode::Reference).map_err(fail)?;
        if matches!(g.trim_end_matches('/'), "." | "./" | "$(runtime.outdir)") {
            return Err(fail("a glob naming the output directory itself is not supported".into()));
        }
    }
    let load_contents = ob.and_then(|b| b.get("loadContents")).and_then(Value::as_bool).unwrap_or(false);
    let output_eval = match ob.and_then(|b| b.get("outputEval")) {
        None => None,
        Some(Value::String(s)) => {
            params::check(s, Mode::Reference).map_err(fail)?;
            Some(s.clone())
        }
        Some(_) => return Err(fail("outputEval is a string".into())),
    };
    if let Some(Value::Object(o)) = ob {
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "glob" | "loadContents" | "outputEval" | "loadListing")) {
            return Err(fail(format!("outputBinding.{k} is not supported")));
        }
    }
    if v.get("secondaryFiles").is_some() {
        return Err(fail("secondaryFiles are not supported".into()));
    }
    if output_eval.is_none() && !files_only(&typ) {
        return Err(fail("an output that is not a File or Directory takes its value from outputEval".into()));
    }
    Ok(Output { name, typ, glob, load_contents, output_eval, std: None })
}

/// File, Directory, arrays of them, optional or not.
fn files_only(t: &Type) -> bool {
    match t {
        Type::File | Type::Directory | Type::Null => true,
        Type::Array(items, _) => files_only(items),
        Type::Union(m) => m.iter().all(files_only),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn doc(extra: Value) -> Value {
        let mut d = json!({"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "echo", "inputs": {}, "outputs": {}});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    }

    #[test]
    fn both_forms_and_the_common_types_parse() {
        let t = Tool::parse(&doc(json!({
            "inputs": [
                {"id": "#main/msg", "type": "string", "inputBinding": {"position": 1}},
                {"id": "n", "type": "int?", "default": 3},
                {"id": "xs", "type": {"type": "array", "items": "string", "inputBinding": {"prefix": "-x"}}},
                {"id": "mode", "type": {"type": "enum", "symbols": ["#main/mode/fast", "slow"]}},
                {"id": "f", "type": "File"},
            ],
            "outputs": {"out": "stdout", "all": {"type": "File[]", "outputBinding": {"glob": "*.txt"}}},
            "stdout": "out.txt",
        })))
        .unwrap();
        assert_eq!(t.inputs[0].name, "msg");
        assert_eq!(t.inputs[0].binding.as_ref().unwrap().position, 1);
        assert_eq!(t.inputs[1].typ, Type::Union(vec![Type::Null, Type::Int]));
        assert_eq!(t.inputs[1].default, Some(json!(3)));
        assert!(matches!(&t.inputs[2].typ, Type::Array(items, Some(b)) if **items == Type::String && b.prefix.as_deref() == Some("-x")));
        assert_eq!(t.inputs[3].typ, Type::Enum(vec!["fast".into(), "slow".into()]));
        assert_eq!(t.outputs[1].name, "out"); // a map's entries in name order
        assert_eq!(t.outputs[1].std, Some(Std::Stdout));
        assert_eq!(t.outputs[0].typ, Type::Array(Box::new(Type::File), None));
        assert_eq!(t.interface["inputs"][1], json!({"name": "n", "type": "int?", "default": 3}));
        assert_eq!(t.interface["outputs"][0]["type"], json!("File[]"));
    }

    #[test]
    fn what_is_not_supported_is_refused_by_name() {
        for (extra, why) in [
            (json!({"requirements": [{"class": "InlineJavascriptRequirement"}]}), "InlineJavascriptRequirement is not supported"),
            (json!({"requirements": {"ShellCommandRequirement": {}}}), "ShellCommandRequirement"),
            (json!({"requirements": [{"class": "InitialWorkDirRequirement", "listing": []}]}), "InitialWorkDirRequirement"),
            (json!({"arguments": ["${return 1}"]}), "JavaScript"),
            (json!({"arguments": ["$(inputs.x + 1)"]}), "JavaScript is not supported"),
            (json!({"inputs": {"r": {"type": "record", "fields": []}}}), "record"),
            (json!({"inputs": {"r": {"type": "string", "inputBinding": {"position": "$(1)"}}}}), "position is an int"),
            (json!({"outputs": {"s": {"type": "string", "outputBinding": {"glob": "x"}}}}), "outputEval"),
            (json!({"inputs": {"f": {"type": "File", "default": {"class": "File", "path": "/etc/passwd"}}}}), "default"),
            (json!({"baseCommand": "./run.sh"}), "absolute path"),
            (json!({"baseCommand": []}), "empty"),
            (json!({"cwlVersion": "v1.0"}), "v1.2"),
            (json!({"class": "Workflow"}), "only a CommandLineTool"),
            (json!({"expression": "x"}), "expression"),
            (json!({"inputs": {"a b": "string"}}), "plain name"),
            (json!({"outputs": {"o": {"type": "File"}}}), "cwl.output.json"),
            (json!({"outputs": {"o": {"type": "File", "format": "x", "outputBinding": {"glob": "o"}}}}), "format on outputs"),
            (json!({"outputs": {"o": {"type": "Directory", "outputBinding": {"glob": "."}}}}), "the output directory itself"),
            (
                json!({"outputs": {"o": {"type": "Directory", "outputBinding": {"glob": "$(runtime.outdir)"}}}}),
                "the output directory itself",
            ),
            (json!({"hints": {"ResourceRequirement": {"coresMin": 2}}, "arguments": ["$(runtime.cores)"]}), "ResourceRequirement with"),
        ] {
            let e = Tool::parse(&doc(extra.clone())).unwrap_err();
            assert!(e.contains(why), "{extra}: {e}");
        }
        // hints are hints: ignored
        assert!(Tool::parse(&doc(json!({"hints": [{"class": "DockerRequirement", "dockerPull": "x"}]}))).is_ok());
        let t = Tool::parse(&doc(json!({"requirements": {"EnvVarRequirement": {"envDef": {"GREETING": "$(inputs.x)"}}}}))).unwrap();
        assert_eq!(t.env, vec![("GREETING".to_string(), "$(inputs.x)".to_string())]);
    }
}
