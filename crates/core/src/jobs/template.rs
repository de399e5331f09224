//! The one-line template that makes a command-line program a service:
//!
//! ```text
//! add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]
//! ```
//!
//! Each `[direction:placement:name:type]` is a parameter: direction `in`,
//! `out` or `in_out`; placement `val` (the value goes on the command line)
//! or `file` (a file's name goes there); type `int`, `float`, `string`,
//! `binary` or `xml`. Every other word is passed as it is.
//!
//! A `val` value never becomes an option of the program by accident: one
//! that starts with `-` (a negative number too) is refused, unless the
//! template marks the parameter with a fifth field, `dash-ok`:
//! `[in:val:offset:int:dash-ok]`. A value never holds a NUL byte; an `int`
//! is a decimal i64 (`-?[0-9]+`), a `float` a finite decimal number.

use serde::Serialize;
use serde_json::{json, Value};

use crate::error::{err, ErrorClass, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    In,
    Out,
    InOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    Val,
    File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Int,
    Float,
    String,
    Binary,
    Xml,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Param {
    pub name: String,
    pub direction: Direction,
    pub placement: Placement,
    #[serde(rename = "type")]
    pub kind: Kind,
    /// A value may start with '-' (the template's `dash-ok`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dash_ok: bool,
}

impl Param {
    pub fn is_input(&self) -> bool {
        self.direction != Direction::Out
    }

    pub fn is_output(&self) -> bool {
        self.direction != Direction::In
    }

    /// The command-line text of a value for a `val` parameter, checked
    /// against its type, and against becoming an option of the program.
    pub fn check_value(&self, v: &Value) -> Result<String> {
        let bad = || err(ErrorClass::Arg, format!("input '{}' must be {}, not {v}", self.name, self.kind_name()));
        let text = match (self.kind, v) {
            (Kind::Int, Value::Number(n)) if n.is_i64() => n.to_string(),
            (Kind::Float, Value::Number(n)) => n.to_string(),
            (Kind::Int, Value::String(s)) if is_decimal_i64(s) => s.clone(),
            (Kind::Float, Value::String(s)) if is_decimal_float(s) => s.clone(),
            (Kind::String | Kind::Xml, Value::String(s)) => s.clone(),
            _ => return bad(),
        };
        if text.contains('\0') {
            return err(ErrorClass::Arg, format!("input '{}' holds a NUL byte, which no command line can carry", self.name));
        }
        if text.starts_with('-') && !self.dash_ok {
            return err(
                ErrorClass::Arg,
                format!(
                    "input '{}' starts with '-', which the program would read as an option; \
                     a template that wants such values marks the parameter [in:val:{}:{}:dash-ok]",
                    self.name,
                    self.name,
                    self.kind_word()
                ),
            );
        }
        Ok(text)
    }

    /// An output file's content as a JSON value: parsed for numbers, text
    /// for strings and XML; None for binary (or text that is not UTF-8).
    pub fn read_value(&self, bytes: &[u8]) -> Result<Option<Value>> {
        let Ok(text) = std::str::from_utf8(bytes) else { return Ok(None) };
        let parsed = match self.kind {
            Kind::Binary => return Ok(None),
            Kind::String | Kind::Xml => return Ok(Some(Value::String(text.to_string()))),
            Kind::Int => Some(text.trim()).filter(|t| is_decimal_i64(t)).and_then(|t| t.parse::<i64>().ok()).map(Value::from),
            // JSON has no infinity or NaN (1e999 parses as inf): they would read as null, "not written".
            Kind::Float => Some(text.trim())
                .filter(|t| is_decimal_float(t))
                .and_then(|t| t.parse::<f64>().ok())
                .filter(|f| f.is_finite())
                .map(Value::from),
        };
        match parsed {
            Some(v) => Ok(Some(v)),
            // The excerpt is cut at a character, not a byte (found by tests/fuzz_requests.rs).
            None => err(
                ErrorClass::Other,
                format!("output '{}' is not {}: {:?}", self.name, self.kind_name(), text.chars().take(80).collect::<String>()),
            ),
        }
    }

    fn kind_word(&self) -> &'static str {
        match self.kind {
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::String => "string",
            Kind::Binary => "binary",
            Kind::Xml => "xml",
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Int => "an int",
            Kind::Float => "a float",
            Kind::String => "a string",
            Kind::Binary => "binary data",
            Kind::Xml => "an XML text",
        }
    }
}

/// A canonical decimal i64: an optional '-', then digits (no '+', no
/// spaces, no hex), within i64's range.
fn is_decimal_i64(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) && s.parse::<i64>().is_ok()
}

/// A finite decimal number: an optional '-', a digit, then digits, '.' and
/// an exponent. Not `inf` or `nan`: few programs read them, and in C's
/// `strtod` they are spelled otherwise; JSON has no such numbers either.
fn is_decimal_float(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    body.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// One word of the command line: as written, or a parameter's place.
#[derive(Debug, Clone, PartialEq)]
pub enum Word {
    Literal(String),
    Param(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub text: String,
    pub words: Vec<Word>,
    pub params: Vec<Param>,
}

impl Template {
    pub fn parse(text: &str) -> Result<Template> {
        let mut words = Vec::new();
        let mut params: Vec<Param> = Vec::new();
        for w in text.split_whitespace() {
            let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) else {
                if w.contains('[') || w.contains(']') {
                    return err(ErrorClass::Arg, format!("template word {w:?}: a parameter is [direction:placement:name:type]"));
                }
                words.push(Word::Literal(w.to_string()));
                continue;
            };
            let p = parse_param(inner)?;
            if params.iter().any(|q| q.name == p.name) {
                return err(ErrorClass::Arg, format!("template names parameter '{}' twice", p.name));
            }
            words.push(Word::Param(params.len()));
            params.push(p);
        }
        match words.first() {
            None => return err(ErrorClass::Arg, "empty template: it starts with the program to run"),
            Some(Word::Param(_)) => return err(ErrorClass::Arg, "a template starts with the program to run, not a parameter"),
            Some(Word::Literal(_)) => {}
        }
        Ok(Template { text: text.to_string(), words, params })
    }

    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The interface description clients read (`GET /programs/{name}`).
    pub fn describe(&self, name: &str) -> Value {
        json!({"name": name, "template": self.text, "parameters": self.params})
    }
}

fn parse_param(inner: &str) -> Result<Param> {
    let fields: Vec<&str> = inner.split(':').collect();
    let ([direction, placement, name, kind] | [direction, placement, name, kind, _]) = fields[..] else {
        return err(ErrorClass::Arg, format!("template parameter [{inner}]: expected [direction:placement:name:type] or [...:dash-ok]"));
    };
    let dash_ok = match fields.get(4) {
        None => false,
        Some(&"dash-ok") => true,
        Some(flag) => {
            return err(ErrorClass::Arg, format!("template parameter [{inner}]: {flag:?} is not dash-ok, the one flag a parameter takes"))
        }
    };
    let direction = match direction {
        "in" => Direction::In,
        "out" => Direction::Out,
        "in_out" => Direction::InOut,
        d => return err(ErrorClass::Arg, format!("template parameter [{inner}]: direction {d:?} is not in, out or in_out")),
    };
    let placement = match placement {
        "val" => Placement::Val,
        "file" => Placement::File,
        p => return err(ErrorClass::Arg, format!("template parameter [{inner}]: placement {p:?} is not val or file")),
    };
    let kind = match kind {
        "int" => Kind::Int,
        "float" => Kind::Float,
        "string" => Kind::String,
        "binary" => Kind::Binary,
        "xml" => Kind::Xml,
        k => return err(ErrorClass::Arg, format!("template parameter [{inner}]: type {k:?} is not int, float, string, binary or xml")),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') || name.starts_with('-') {
        return err(ErrorClass::Arg, format!("template parameter [{inner}]: a name is letters, digits, '_' and '-'"));
    }
    if placement == Placement::Val && direction != Direction::In {
        return err(
            ErrorClass::Arg,
            format!("template parameter [{inner}]: only inputs go on the command line by value; an output is a file"),
        );
    }
    if placement == Placement::Val && kind == Kind::Binary {
        return err(ErrorClass::Arg, format!("template parameter [{inner}]: binary data goes in a file"));
    }
    if dash_ok && placement != Placement::Val {
        return err(
            ErrorClass::Arg,
            format!("template parameter [{inner}]: dash-ok is for val parameters (a file's name never starts with '-')"),
        );
    }
    Ok(Param { name: name.to_string(), direction, placement, kind, dash_ok })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_template_parses() {
        let t = Template::parse("add.sh [in:val:x:int] [in:file:y:int] -q [out:file:result:int]").unwrap();
        assert_eq!(t.words.len(), 5);
        assert_eq!(t.words[0], Word::Literal("add.sh".into()));
        assert_eq!(t.words[3], Word::Literal("-q".into()));
        assert_eq!(t.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["x", "y", "result"]);
        assert_eq!(t.param("y").unwrap().placement, Placement::File);
        assert!(t.param("result").unwrap().is_output() && !t.param("result").unwrap().is_input());
        assert_eq!(t.describe("add")["parameters"][0], json!({"name": "x", "direction": "in", "placement": "val", "type": "int"}));
    }

    #[test]
    fn bad_templates_say_why() {
        for (text, why) in [
            ("", "empty"),
            ("[in:val:x:int] prog", "starts with the program"),
            ("p [in:val:x]", "expected [direction"),
            ("p [up:val:x:int]", "direction"),
            ("p [in:disk:x:int]", "placement"),
            ("p [in:val:x:complex]", "type"),
            ("p [in:val:x y:int]", "parameter is"),
            ("p [out:val:x:int]", "an output is a file"),
            ("p [in:val:x:binary]", "binary data goes in a file"),
            ("p [in:val:x:int] [in:file:x:int]", "twice"),
            ("p [in:val:../x:int]", "a name is"),
            ("p [in:val:x:int:dash]", "not dash-ok"),
            ("p [in:file:x:int:dash-ok]", "dash-ok is for val"),
            ("p [in:val:x:int:dash-ok:more]", "expected [direction"),
        ] {
            let e = Template::parse(text).unwrap_err();
            assert!(e.message.contains(why), "{text:?}: {}", e.message);
        }
    }

    #[test]
    fn values_are_checked_against_their_type() {
        let t = Template::parse("p [in:val:n:int] [in:val:f:float] [in:val:s:string]").unwrap();
        assert_eq!(t.params[0].check_value(&json!(3)).unwrap(), "3");
        assert_eq!(t.params[0].check_value(&json!("42")).unwrap(), "42");
        assert!(t.params[0].check_value(&json!(1.5)).is_err());
        assert!(t.params[0].check_value(&json!("x")).is_err());
        assert_eq!(t.params[1].check_value(&json!(1.5)).unwrap(), "1.5");
        assert_eq!(t.params[2].check_value(&json!("a b")).unwrap(), "a b");
        assert!(t.params[2].check_value(&json!(null)).is_err());
        assert_eq!(t.params[0].read_value(b" 7\n").unwrap(), Some(json!(7)));
        assert!(t.params[0].read_value(b"seven").is_err());
    }

    #[test]
    fn a_float_output_out_of_json_range_is_an_error_not_null() {
        let t = Template::parse("p [out:file:f:float]").unwrap();
        for text in ["200000000E300", "inf", "-inf", "NaN"] {
            assert!(t.params[0].read_value(text.as_bytes()).is_err(), "{text}");
        }
        assert_eq!(t.params[0].read_value(b"1e300").unwrap(), Some(json!(1e300)));
    }

    #[test]
    fn an_output_with_a_character_across_byte_80_is_refused_not_a_panic() {
        let t = Template::parse("p [out:file:n:int]").unwrap();
        let text = format!("{}あ", "a".repeat(79)); // 'あ' takes bytes 79..82
        let e = t.params[0].read_value(text.as_bytes()).unwrap_err();
        assert!(e.message.contains(&"a".repeat(79)), "{}", e.message);
    }

    #[test]
    fn numbers_are_canonical_decimals() {
        let t = Template::parse("p [in:val:n:int:dash-ok] [in:val:f:float:dash-ok]").unwrap();
        for bad in
            [json!("+5"), json!(" 5"), json!("0x10"), json!("1e3"), json!("9223372036854775808"), json!(18446744073709551615u64), json!("")]
        {
            assert!(t.params[0].check_value(&bad).is_err(), "int {bad}");
        }
        assert_eq!(t.params[0].check_value(&json!("-9223372036854775808")).unwrap(), "-9223372036854775808");
        assert_eq!(t.params[0].check_value(&json!(i64::MAX)).unwrap(), i64::MAX.to_string());
        for bad in [json!("inf"), json!("nan"), json!("-inf"), json!("+1.5"), json!(".5"), json!("1e999"), json!("0x1p3")] {
            assert!(t.params[1].check_value(&bad).is_err(), "float {bad}");
        }
        assert_eq!(t.params[1].check_value(&json!("-1.5e-3")).unwrap(), "-1.5e-3");
    }

    #[test]
    fn values_never_become_options_unless_the_template_says_so() {
        let t = Template::parse("p [in:val:s:string] [in:val:n:int] [in:val:ok:string:dash-ok]").unwrap();
        for (p, v) in [(0, json!("--help")), (0, json!("-rf")), (1, json!(-5)), (1, json!("-5"))] {
            let e = t.params[p].check_value(&v).unwrap_err();
            assert!(e.message.contains("read as an option") && e.message.contains("dash-ok"), "{}", e.message);
        }
        assert_eq!(t.params[2].check_value(&json!("--verbose")).unwrap(), "--verbose");
        assert!(t.params[2].check_value(&json!("a\0b")).unwrap_err().message.contains("NUL"));
        assert_eq!(t.describe("p")["parameters"][2]["dash_ok"], json!(true));
        assert!(t.describe("p")["parameters"][0].get("dash_ok").is_none());
    }
}
