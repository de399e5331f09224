//! CWL parameter references, `$(inputs.x.basename)`, evaluated without a
//! JavaScript engine: a reference is a name (`inputs`, `self`, `runtime`)
//! followed by `.field`, `['field']` or `[index]` (and `.length` of a list
//! or a string). A string that is one reference is its value; references
//! inside a longer string are replaced by their text (`\$(` is a literal
//! `$(`). `${...}` (a JavaScript body) is refused.
//!
//! [`Mode::Condition`] adds what a workflow's `when` needs beyond that: `!`
//! before a reference, and one comparison with a literal (`==`, `!=`, `===`,
//! `!==`, `<`, `<=`, `>`, `>=` against a number, a quoted string, `true`,
//! `false` or `null`). Nothing else of JavaScript is evaluated.

use serde_json::{Number, Value};

/// What an expression may hold beyond references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// CWL parameter references only (tools, `valueFrom`).
    Reference,
    /// References, `!`, and one comparison with a literal (a step's `when`).
    Condition,
}

/// Longest expression text evaluated (a deployed document's, or a workflow's).
const MAX_TEXT: usize = 64 * 1024;

/// `text` with each `$(...)` evaluated against `ctx` (`{"inputs", "self", "runtime"}`).
pub fn eval(text: &str, ctx: &Value, mode: Mode) -> Result<Value, String> {
    let parts = parse(text, mode)?;
    if let [Part::Expr(e)] = &parts[..] {
        return e.eval(ctx);
    }
    let mut out = String::new();
    for part in &parts {
        match part {
            Part::Text(t) => out.push_str(t),
            Part::Expr(e) => match e.eval(ctx)? {
                Value::String(s) => out.push_str(&s),
                v => out.push_str(&v.to_string()),
            },
        }
    }
    Ok(Value::String(out))
}

/// Whether `text` holds any `$(...)`: a plain string needs no evaluation.
pub fn has_reference(text: &str) -> bool {
    text.contains("$(")
}

/// Check `text`'s syntax (at deploy time: a document with a bad reference is refused then, not at each job).
pub fn check(text: &str, mode: Mode) -> Result<(), String> {
    parse(text, mode).map(|_| ())
}

/// JavaScript's truthiness of a JSON value (a `when`'s result).
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Field(String),
    Index(usize),
}

#[derive(Debug, Clone, PartialEq)]
struct Reference {
    root: String,
    path: Vec<Seg>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Ref(Reference),
    Not(Reference),
    Compare(Reference, Op, Value),
}

fn parse(text: &str, mode: Mode) -> Result<Vec<Part>, String> {
    if text.len() > MAX_TEXT {
        return Err(format!("an expression is at most {MAX_TEXT} bytes"));
    }
    if text.contains("${") && !text.contains("\\${") {
        return Err(format!("{text:?}: JavaScript expressions (${{...}}) are not supported, only parameter references $(...)"));
    }
    let mut parts = Vec::new();
    let mut literal = String::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'$') {
            literal.push('$');
            i += 2;
        } else if b[i] == b'$' && b.get(i + 1) == Some(&b'(') {
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            let mut p = Parser { b, i: i + 2, text };
            let e = p.expr(mode)?;
            p.ws();
            if p.b.get(p.i) != Some(&b')') {
                return Err(format!(
                    "{text:?}: a parameter reference is $(inputs.NAME...), $(self...) or $(runtime.NAME); \
                                    JavaScript is not supported"
                ));
            }
            i = p.i + 1;
            parts.push(Part::Expr(e));
        } else {
            let c = text[i..].chars().next().expect("inside the text");
            literal.push(c);
            i += c.len_utf8();
        }
    }
    if !literal.is_empty() || parts.is_empty() {
        parts.push(Part::Text(literal));
    }
    Ok(parts)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| *c == b' ') {
            self.i += 1;
        }
    }

    fn bad<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{:?}: {what} at byte {} (parameter references only: no JavaScript)", self.text, self.i))
    }

    fn expr(&mut self, mode: Mode) -> Result<Expr, String> {
        self.ws();
        if mode == Mode::Condition && self.b.get(self.i) == Some(&b'!') && self.b.get(self.i + 1) != Some(&b'=') {
            self.i += 1;
            self.ws();
            return Ok(Expr::Not(self.reference()?));
        }
        let r = self.reference()?;
        self.ws();
        if mode == Mode::Reference {
            return Ok(Expr::Ref(r));
        }
        let rest = &self.b[self.i..];
        let (op, len) = if rest.starts_with(b"===") {
            (Op::Eq, 3)
        } else if rest.starts_with(b"!==") {
            (Op::Ne, 3)
        } else if rest.starts_with(b"==") {
            (Op::Eq, 2)
        } else if rest.starts_with(b"!=") {
            (Op::Ne, 2)
        } else if rest.starts_with(b"<=") {
            (Op::Le, 2)
        } else if rest.starts_with(b">=") {
            (Op::Ge, 2)
        } else if rest.starts_with(b"<") {
            (Op::Lt, 1)
        } else if rest.starts_with(b">") {
            (Op::Gt, 1)
        } else {
            return Ok(Expr::Ref(r));
        };
        self.i += len;
        self.ws();
        let lit = self.literal()?;
        Ok(Expr::Compare(r, op, lit))
    }

    fn symbol(&mut self) -> Option<String> {
        let start = self.i;
        while self.b.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            self.i += 1;
        }
        let s = &self.text[start..self.i];
        (!s.is_empty() && !s.as_bytes()[0].is_ascii_digit()).then(|| s.to_string())
    }

    fn reference(&mut self) -> Result<Reference, String> {
        let Some(root) = self.symbol() else { return self.bad("expected a name") };
        if !matches!(root.as_str(), "inputs" | "self" | "runtime") {
            return self.bad(&format!("{root} is not inputs, self or runtime"));
        }
        let mut path = Vec::new();
        loop {
            match self.b.get(self.i) {
                Some(b'.') => {
                    self.i += 1;
                    let Some(f) = self.symbol() else { return self.bad("expected a field name after '.'") };
                    path.push(Seg::Field(f));
                }
                Some(b'[') => {
                    self.i += 1;
                    match self.b.get(self.i) {
                        Some(b'\'' | b'"') => match self.literal()? {
                            Value::String(s) => path.push(Seg::Field(s)),
                            _ => unreachable!("a quoted literal is a string"),
                        },
                        _ => {
                            let start = self.i;
                            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                                self.i += 1;
                            }
                            match self.text[start..self.i].parse::<usize>() {
                                Ok(n) => path.push(Seg::Index(n)),
                                Err(_) => return self.bad("expected an index or a quoted name in [...]"),
                            }
                        }
                    }
                    if self.b.get(self.i) != Some(&b']') {
                        return self.bad("expected ']'");
                    }
                    self.i += 1;
                }
                _ => return Ok(Reference { root, path }),
            }
        }
    }

    fn literal(&mut self) -> Result<Value, String> {
        match self.b.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => {
                let mut s = String::new();
                self.i += 1;
                loop {
                    match self.b.get(self.i) {
                        None => return self.bad("unterminated string"),
                        Some(&c) if c == q => {
                            self.i += 1;
                            return Ok(Value::String(s));
                        }
                        Some(b'\\') if self.b.get(self.i + 1).is_some() => {
                            let c = self.text[self.i + 1..].chars().next().expect("inside");
                            s.push(c);
                            self.i += 1 + c.len_utf8();
                        }
                        Some(_) => {
                            let c = self.text[self.i..].chars().next().expect("inside");
                            s.push(c);
                            self.i += c.len_utf8();
                        }
                    }
                }
            }
            _ => {
                let start = self.i;
                while self.b.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+')) {
                    self.i += 1;
                }
                match &self.text[start..self.i] {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" => Ok(Value::Null),
                    t => match serde_json::from_str::<Number>(t) {
                        Ok(n) => Ok(Value::Number(n)),
                        Err(_) => self.bad("expected a number, a quoted string, true, false or null"),
                    },
                }
            }
        }
    }
}

impl Reference {
    fn eval(&self, ctx: &Value) -> Result<Value, String> {
        let mut v = ctx.get(&self.root).cloned().unwrap_or(Value::Null);
        let mut at = self.root.clone();
        for seg in &self.path {
            v = match (seg, &v) {
                (Seg::Field(f), Value::Array(a)) if f == "length" => Value::from(a.len()),
                (Seg::Field(f), Value::String(s)) if f == "length" => Value::from(s.encode_utf16().count()),
                (Seg::Field(f), Value::Object(o)) => o.get(f).cloned().unwrap_or(Value::Null),
                (Seg::Index(n), Value::Array(a)) => a.get(*n).cloned().unwrap_or(Value::Null),
                (_, Value::Null) => return Err(format!("{at} is null: it has no {}", seg.text())),
                (_, other) => return Err(format!("{at} is {}: it has no {}", kind(other), seg.text())),
            };
            at.push_str(&seg.text());
        }
        Ok(v)
    }
}

impl Seg {
    fn text(&self) -> String {
        match self {
            Seg::Field(f) => format!(".{f}"),
            Seg::Index(n) => format!("[{n}]"),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl Expr {
    fn eval(&self, ctx: &Value) -> Result<Value, String> {
        match self {
            Expr::Ref(r) => r.eval(ctx),
            Expr::Not(r) => Ok(Value::Bool(!truthy(&r.eval(ctx)?))),
            Expr::Compare(r, op, lit) => {
                let v = r.eval(ctx)?;
                let ordered = match (&v, lit) {
                    (Value::Number(a), Value::Number(b)) => a.as_f64().zip(b.as_f64()).and_then(|(a, b)| a.partial_cmp(&b)),
                    (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                    _ => None,
                };
                let equal = ordered.map_or(v == *lit, |o| o.is_eq());
                Ok(Value::Bool(match op {
                    Op::Eq => equal,
                    Op::Ne => !equal,
                    Op::Lt => ordered.is_some_and(|o| o.is_lt()),
                    Op::Le => ordered.is_some_and(|o| o.is_le()),
                    Op::Gt => ordered.is_some_and(|o| o.is_gt()),
                    Op::Ge => ordered.is_some_and(|o| o.is_ge()),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Value {
        json!({
            "inputs": {"x": 3, "name": "a b", "f": {"class": "File", "path": "/w/in/0/r.txt", "basename": "r.txt",
                        "nameroot": "r", "nameext": ".txt", "size": 12}, "xs": ["p", "q"], "flag": false},
            "self": [{"contents": "7\n"}],
            "runtime": {"outdir": "/w/out", "cores": 1},
        })
    }

    fn ev(t: &str) -> Value {
        eval(t, &ctx(), Mode::Reference).unwrap()
    }

    #[test]
    fn one_reference_is_its_value() {
        assert_eq!(ev("$(inputs.x)"), json!(3));
        assert_eq!(ev("$(inputs.f.path)"), json!("/w/in/0/r.txt"));
        assert_eq!(ev("$(inputs.f.size)"), json!(12));
        assert_eq!(ev("$(inputs['f'].basename)"), json!("r.txt"));
        assert_eq!(ev("$(inputs[\"f\"].nameroot)"), json!("r"));
        assert_eq!(ev("$(inputs.xs[1])"), json!("q"));
        assert_eq!(ev("$(inputs.xs.length)"), json!(2));
        assert_eq!(ev("$(self[0].contents)"), json!("7\n"));
        assert_eq!(ev("$(runtime.outdir)"), json!("/w/out"));
        assert_eq!(ev("$(inputs.missing)"), json!(null));
    }

    #[test]
    fn references_in_a_string_are_interpolated() {
        assert_eq!(ev("$(inputs.f.nameroot).sorted$(inputs.f.nameext)"), json!("r.sorted.txt"));
        assert_eq!(ev("n=$(inputs.x), xs=$(inputs.xs)"), json!("n=3, xs=[\"p\",\"q\"]"));
        assert_eq!(ev("plain"), json!("plain"));
        assert_eq!(ev(""), json!(""));
        assert_eq!(ev("cost \\$(inputs.x)"), json!("cost $(inputs.x)"));
    }

    #[test]
    fn javascript_is_refused() {
        for t in ["${return 1}", "$(inputs.x + 1)", "$(1)", "$(foo.x)", "$(inputs.f.path.split('/'))", "$(inputs.x > 1)", "$(inputs"] {
            assert!(eval(t, &ctx(), Mode::Reference).is_err(), "{t}");
            assert!(check(t, Mode::Reference).is_err(), "{t}");
        }
        let e = eval("$(inputs.x.y.z)", &ctx(), Mode::Reference).unwrap_err();
        assert!(e.contains("inputs.x is a number"), "{e}");
        let e = eval("$(inputs.nope.path)", &ctx(), Mode::Reference).unwrap_err();
        assert!(e.contains("inputs.nope is null"), "{e}");
    }

    #[test]
    fn conditions_compare_with_a_literal() {
        let c = |t: &str| eval(t, &ctx(), Mode::Condition).unwrap();
        assert_eq!(c("$(inputs.x > 1)"), json!(true));
        assert_eq!(c("$(inputs.x >= 4)"), json!(false));
        assert_eq!(c("$(inputs.x === 3)"), json!(true));
        assert_eq!(c("$(inputs.x != 3)"), json!(false));
        assert_eq!(c("$(inputs.name == 'a b')"), json!(true));
        assert_eq!(c("$(inputs.missing == null)"), json!(true));
        assert_eq!(c("$(!inputs.flag)"), json!(true));
        assert_eq!(c("$(inputs.flag)"), json!(false));
        assert_eq!(c("$(inputs.x < -2.5)"), json!(false));
        assert!(eval("$(inputs.x > 1 && inputs.flag)", &ctx(), Mode::Condition).is_err());
        assert!(truthy(&json!("x")) && !truthy(&json!(0)) && !truthy(&json!(null)) && truthy(&json!([])));
    }
}
