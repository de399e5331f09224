//! The command line of a CWL job, from the tool and the (resolved) job
//! object, as CWL v1.2 builds it ("Input binding"): `baseCommand`, then
//! every binding of `arguments` and of inputs, sorted by `position`, then
//! by argument index (arguments first), then by input name; a list's items
//! follow its own binding. A value becomes words by its type: a string or
//! number as it is (after `prefix`, joined to it when `separate: false`), a
//! boolean as its prefix (true) or nothing (false), a File or Directory as
//! its path, a list by `itemSeparator` or item by item; null or absent,
//! nothing.
//!
//! A client's value never becomes an option of the program by accident: a
//! word from a value that stands on its own (not after a prefix) and starts
//! with '-' is refused, unless the input says `mpiws:dashOk: true` (a
//! constant `valueFrom` is the document's word, and not checked).

use serde_json::{json, Value};

use super::params::{self, Mode};
use super::tool::{Argument, Binding, Tool, Type};

/// Most bytes a command line takes (the kernel's limit is near 2 MiB).
pub const MAX_ARGV_BYTES: usize = 1 << 20;

/// The sort key of a binding: position, then arguments (by index) before inputs (by name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Tie {
    Argument(usize),
    Input(String),
}

/// The evaluation context: `{"inputs", "runtime"}` (`self` is added per binding).
pub fn context(inputs: &Value, runtime: &Value) -> Value {
    json!({"inputs": inputs, "runtime": runtime})
}

/// The argv of a job (the program first).
pub fn build(tool: &Tool, inputs: &Value, runtime: &Value) -> Result<Vec<String>, String> {
    let ctx = context(inputs, runtime);
    let mut groups: Vec<((i64, Tie), Vec<String>)> = Vec::new();
    for (i, a) in tool.arguments.iter().enumerate() {
        let words = match a {
            Argument::Literal(s) => vec![s.clone()],
            Argument::Bound(b) => {
                let from = format!("argument {i}");
                emit(Some(b), &Type::Any, &Value::Null, &ctx, &Source { what: &from, dash_ok: false })?
            }
        };
        let position = match a {
            Argument::Literal(_) => 0,
            Argument::Bound(b) => b.position,
        };
        groups.push(((position, Tie::Argument(i)), words));
    }
    for input in &tool.inputs {
        let v = inputs.get(&input.name).unwrap_or(&Value::Null);
        if v.is_null() {
            continue;
        }
        let what = format!("input '{}'", input.name);
        let words = emit(input.binding.as_ref(), &input.typ, v, &ctx, &Source { what: &what, dash_ok: input.dash_ok })?;
        let position = input.binding.as_ref().map_or(0, |b| b.position);
        groups.push(((position, Tie::Input(input.name.clone())), words));
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut argv = tool.base_command.clone();
    argv.extend(groups.into_iter().flat_map(|(_, w)| w));
    let mut total = 0usize;
    for w in &argv {
        if w.contains('\0') {
            return Err(format!("the command line word {w:?} holds a NUL byte, which no command line can carry"));
        }
        total += w.len() + 1;
    }
    if total > MAX_ARGV_BYTES {
        return Err(format!("the command line takes {total} bytes, more than {MAX_ARGV_BYTES}: pass large values in a File"));
    }
    Ok(argv)
}

struct Source<'a> {
    what: &'a str,
    dash_ok: bool,
}

/// The words of `value` (of type `t`) under `binding` (None: only its items' own bindings apply).
fn emit(binding: Option<&Binding>, t: &Type, value: &Value, ctx: &Value, src: &Source) -> Result<Vec<String>, String> {
    if value.is_null() && binding.is_none_or(|b| b.value_from.is_none()) {
        return Ok(vec![]);
    }
    let t = resolve_union(t, value);
    let mut words = Vec::new();
    if let Some(b) = binding {
        let v = match &b.value_from {
            Some(expr) => {
                let mut c = ctx.clone();
                c["self"] = value.clone();
                params::eval(expr, &c, Mode::Reference).map_err(|e| format!("{}: valueFrom: {e}", src.what))?
            }
            None => value.clone(),
        };
        // A constant valueFrom is the document's own word, not a client's value.
        let constant = b.value_from.as_deref().is_some_and(|e| !params::has_reference(e));
        words.extend(generate(b, &v, &Source { what: src.what, dash_ok: src.dash_ok || constant })?);
    }
    if let (Type::Array(items, item_binding), Value::Array(elements)) = (t, value) {
        let own = binding.is_some_and(|b| b.value_from.is_some());
        let each = match (item_binding, binding) {
            _ if own => None,
            (Some(ib), _) => Some((**ib).clone()),
            (None, Some(b)) if b.item_separator.is_none() => Some(Binding { separate: true, ..Binding::default() }),
            _ => None,
        };
        if let Some(ib) = each {
            for (k, x) in elements.iter().enumerate() {
                let what = format!("{}[{k}]", src.what);
                words.extend(emit(Some(&ib), items, x, ctx, &Source { what: &what, dash_ok: src.dash_ok })?);
            }
        }
    }
    Ok(words)
}

/// The member of a union a value is of (the first that admits it), else `t` itself.
fn resolve_union<'a>(t: &'a Type, v: &Value) -> &'a Type {
    match t {
        Type::Union(members) => members.iter().find(|m| m.admits(v)).unwrap_or(t),
        _ => t,
    }
}

/// One binding's words for one value (CWL's rules per kind of value).
fn generate(b: &Binding, v: &Value, src: &Source) -> Result<Vec<String>, String> {
    let prefix = b.prefix.clone();
    let values: Vec<String> = match v {
        Value::Array(a) => {
            if let (Some(sep), false) = (&b.item_separator, a.is_empty()) {
                vec![a.iter().map(text).collect::<Vec<_>>().join(sep)]
            } else if b.value_from.is_some() {
                let mut w: Vec<String> = prefix.into_iter().collect();
                for x in a {
                    w.push(checked(text(x), src)?);
                }
                return Ok(w);
            } else {
                return Ok(if a.is_empty() { vec![] } else { prefix.into_iter().collect() });
            }
        }
        Value::Object(o) if matches!(o.get("class").and_then(Value::as_str), Some("File" | "Directory")) => vec![text(v)],
        Value::Object(_) => return Ok(prefix.into_iter().collect()),
        Value::Bool(true) => return Ok(prefix.into_iter().collect()),
        Value::Bool(false) | Value::Null => return Ok(vec![]),
        other => vec![text(other)],
    };
    let mut words = Vec::new();
    for x in values {
        match (&prefix, b.separate) {
            (Some(p), true) => words.extend([p.clone(), x]), // an option's argument: the prefix says what it is
            (Some(p), false) => words.push(format!("{p}{x}")),
            (None, _) => words.push(checked(x, src)?),
        }
    }
    Ok(words)
}

/// A word standing on its own: not one that starts with '-', unless allowed.
fn checked(word: String, src: &Source) -> Result<String, String> {
    if word.starts_with('-') && !src.dash_ok {
        return Err(format!(
            "{} gives {word:?}, which starts with '-' and the program would read as an option; \
             a tool that wants such values marks the input `mpiws:dashOk: true` (or gives it a prefix)",
            src.what
        ));
    }
    Ok(word)
}

/// A value's text on a command line, as cwltool writes it.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) if o.contains_key("path") => o["path"].as_str().unwrap_or_default().to_string(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(extra: Value) -> Tool {
        let mut d = json!({"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "echo", "inputs": {}, "outputs": {}});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        Tool::parse(&d).unwrap()
    }

    fn argv(t: &Tool, inputs: Value) -> Vec<String> {
        build(t, &inputs, &json!({"outdir": "/w/out"})).unwrap()
    }

    #[test]
    fn the_order_and_forms_cwltool_gives() {
        // The same document and inputs as cwltool 3.3 ran to: lit -N 3 --flag -e b 2.0 3 arg0 -A one two three -C=seven,eight -B=four -B=five
        let t = tool(json!({
            "arguments": [{"valueFrom": "arg0", "position": 1}, "lit", {"valueFrom": "$(inputs.n)", "prefix": "-N"}],
            "inputs": {
                "arrayA": {"type": "string[]", "inputBinding": {"prefix": "-A", "position": 1}},
                "arrayB": {"type": {"type": "array", "items": "string", "inputBinding": {"prefix": "-B=", "separate": false}}, "inputBinding": {"position": 2}},
                "arrayC": {"type": "string[]", "inputBinding": {"position": 1, "itemSeparator": ",", "prefix": "-C=", "separate": false}},
                "b": {"type": "boolean", "inputBinding": {"prefix": "--flag"}},
                "n": {"type": "int", "inputBinding": {"position": 0}},
                "f": {"type": "float", "inputBinding": {"position": 0}},
                "o": {"type": "string?", "inputBinding": {"position": 0}},
                "e": {"type": {"type": "enum", "symbols": ["a", "b"]}, "inputBinding": {"prefix": "-e"}},
            }
        }));
        let got = argv(
            &t,
            json!({"arrayA": ["one", "two", "three"], "arrayB": ["four", "five"], "arrayC": ["seven", "eight"],
                                  "b": true, "n": 3, "f": 2.0, "e": "b", "o": null}),
        );
        assert_eq!(got.join(" "), "echo lit -N 3 --flag -e b 2.0 3 arg0 -A one two three -C=seven,eight -B=four -B=five");
    }

    #[test]
    fn files_false_and_empty_lists() {
        let t = tool(json!({"inputs": {
            "f": {"type": "File", "inputBinding": {"position": 2}},
            "q": {"type": "boolean", "inputBinding": {"prefix": "-q", "position": 1}},
            "xs": {"type": "int[]", "inputBinding": {"prefix": "-x", "position": 3}},
            "unbound": "string",
        }}));
        let got = argv(&t, json!({"f": {"class": "File", "path": "/w/in/0/a.txt"}, "q": false, "xs": [], "unbound": "zz"}));
        assert_eq!(got, ["echo", "/w/in/0/a.txt"]);
    }

    #[test]
    fn value_from_and_runtime() {
        let t = tool(json!({
            "arguments": ["$(runtime.outdir)/result.txt", {"valueFrom": "$(inputs.f.nameroot).out", "prefix": "-o", "separate": false}],
            "inputs": {"f": {"type": "File", "inputBinding": {"valueFrom": "$(self.basename)", "position": 5}}},
        }));
        let f = json!({"class": "File", "path": "/w/in/0/a.txt", "basename": "a.txt", "nameroot": "a"});
        assert_eq!(argv(&t, json!({"f": f})), ["echo", "/w/out/result.txt", "-oa.out", "a.txt"]);
    }

    #[test]
    fn a_value_never_becomes_an_option_by_accident() {
        let t = tool(json!({"inputs": {
            "s": {"type": "string", "inputBinding": {"position": 1}},
            "n": {"type": "int", "inputBinding": {"prefix": "-n"}},
            "ok": {"type": "string?", "inputBinding": {"position": 2}, "mpiws:dashOk": true},
        }}));
        let e = build(&t, &json!({"s": "--help", "n": 1}), &json!({})).unwrap_err();
        assert!(e.contains("input 's'") && e.contains("dashOk"), "{e}");
        assert!(build(&t, &json!({"s": "-5", "n": 1}), &json!({})).is_err());
        assert_eq!(argv(&t, json!({"s": "x", "n": -5, "ok": "--verbose"})), ["echo", "-n", "-5", "x", "--verbose"]);
        assert!(build(&t, &json!({"s": "a\0b", "n": 1}), &json!({})).unwrap_err().contains("NUL"));
        let constant = tool(json!({"arguments": [{"valueFrom": "--", "position": -1}, "-x"]}));
        assert_eq!(argv(&constant, json!({})), ["echo", "--", "-x"]);
    }
}
