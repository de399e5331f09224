//! Fuzz targets for what clients send the service interface: a run
//! request's binding (`serde_json::from_slice::<Binding>` + `validate`), a
//! program's template (`Template::parse`), and a job's input values and
//! output files (`Param::check_value`, `Param::read_value`). Properties: no
//! panic; a valid binding survives JSON both ways; a parsed template
//! written back out parses to the same program.

mod fuzz_support;

use mpiws_core::template::{Direction, Kind, Param, Placement, Template, Word};
use mpiws_core::Binding;
use proptest::prelude::*;
use serde_json::{json, Value};

#[global_allocator]
static ALLOC: fuzz_support::Watching = fuzz_support::Watching;

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite()).prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        "[-+ 0-9.eE]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map(".{0,8}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn url() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("http://127.0.0.1:8001".to_string()),
        "https?://[a-z0-9.:\\[\\]@%/-]{0,24}",
        "https?://[a-z0-9.-]{1,12}:[0-9]{1,6}(/relay/[a-z0-9._-]{0,4})?/?",
        "http://",
        ".{0,24}",
    ]
}

/// A run request's body: shaped like a binding (fields right or wrong), or
/// any JSON, or any bytes.
fn binding_body() -> impl Strategy<Value = Vec<u8>> {
    let field = |good: BoxedStrategy<Value>| prop_oneof![3 => good, 1 => json_value()];
    let shaped = (
        field(prop_oneof!["[A-Za-z0-9._-]{0,10}", ".{0,12}", Just("..".to_string())].prop_map(Value::from).boxed()),
        field(prop_oneof![0..8u32, any::<u32>()].prop_map(Value::from).boxed()),
        field(proptest::collection::vec(url(), 0..6).prop_map(Value::from).boxed()),
        field(prop_oneof!["[A-Za-z0-9._~+/=-]{16,40}", ".{0,20}"].prop_map(Value::from).boxed()),
        field(".{0,12}".prop_map(Value::from).boxed()),
        json_value(),
        proptest::collection::vec(any::<bool>(), 6),
    )
        .prop_map(|(domain, rank, endpoints, token, service, params, keep)| {
            let all =
                [("domain", domain), ("rank", rank), ("endpoints", endpoints), ("token", token), ("service", service), ("params", params)];
            let o: serde_json::Map<String, Value> =
                all.into_iter().zip(keep).filter(|(_, k)| *k).map(|((n, v), _)| (n.to_string(), v)).collect();
            serde_json::to_vec(&o).unwrap()
        });
    prop_oneof![
        6 => shaped,
        2 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => (binding_like(), any::<usize>()).prop_map(|(b, cut)| b[..cut % (b.len() + 1)].to_vec()), // truncated
    ]
}

fn binding_like() -> impl Strategy<Value = Vec<u8>> {
    Just(serde_json::to_vec(&json!({"domain": "d", "rank": 0, "endpoints": ["http://127.0.0.1:1"], "token": "t".repeat(16)})).unwrap())
}

const DIRECTIONS: [&str; 4] = ["in", "out", "in_out", "up"];
const PLACEMENTS: [&str; 3] = ["val", "file", "disk"];
const KINDS: [&str; 6] = ["int", "float", "string", "binary", "xml", "complex"];

/// One word of a template: a program or option, a parameter (well formed
/// or not), or junk with brackets and colons.
fn template_word() -> impl Strategy<Value = String> {
    let sel = |v: &'static [&'static str]| proptest::sample::select(v);
    prop_oneof![
        3 => "[A-Za-z0-9./_-]{1,10}",
        4 => (sel(&DIRECTIONS), sel(&PLACEMENTS), "[A-Za-z0-9_-]{0,6}|\\.\\./x|é", sel(&KINDS)).prop_map(|(d, p, n, k)| format!("[{d}:{p}:{n}:{k}]")),
        1 => "[\\[\\]:a-z]{0,10}",
        1 => "\\PC{1,8}",
    ]
}

fn template_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (proptest::collection::vec(template_word(), 0..6), proptest::collection::vec(prop_oneof![Just(" "), Just("\t"), Just("  "), Just("\n"), Just("\u{3000}")], 6))
            .prop_map(|(words, gaps)| words.iter().zip(gaps.iter().cycle()).map(|(w, g)| format!("{w}{g}")).collect()),
        1 => ".{0,40}",
    ]
}

/// Equal JSON values, floats within one unit in the last place.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || x.to_bits().abs_diff(y.to_bits()) <= 1
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w))),
        _ => a == b,
    }
}

/// A template written back out from what was parsed.
fn render(t: &Template) -> String {
    let names = |p: &Param| {
        let d = match p.direction {
            Direction::In => "in",
            Direction::Out => "out",
            Direction::InOut => "in_out",
        };
        let pl = match p.placement {
            Placement::Val => "val",
            Placement::File => "file",
        };
        let k = match p.kind {
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::String => "string",
            Kind::Binary => "binary",
            Kind::Xml => "xml",
        };
        format!("[{d}:{pl}:{}:{k}]", p.name)
    };
    let words: Vec<String> = t
        .words
        .iter()
        .map(|w| match w {
            Word::Literal(s) => s.clone(),
            Word::Param(i) => names(&t.params[*i]),
        })
        .collect();
    words.join(" ")
}

fn param() -> impl Strategy<Value = Param> {
    let d = proptest::sample::select(vec![Direction::In, Direction::Out, Direction::InOut]);
    let p = proptest::sample::select(vec![Placement::Val, Placement::File]);
    let k = proptest::sample::select(vec![Kind::Int, Kind::Float, Kind::String, Kind::Binary, Kind::Xml]);
    (d, p, k, proptest::bool::ANY).prop_map(|(direction, placement, kind, dash_ok)| Param {
        name: "x".into(),
        direction,
        placement,
        kind,
        dash_ok,
    })
}

/// An output file's bytes: numbers as programs print them, text (ASCII and
/// not) of any length, or any bytes.
fn output_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[-+ ]?[0-9]{1,25}(\\.[0-9]{0,5})?([eE][-+]?[0-9]{1,3})?\\s*".prop_map(String::into_bytes),
        "\\PC{0,120}".prop_map(String::into_bytes),
        ("[a-z]{75,85}", "[éあ😀]{1,4}").prop_map(|(a, b)| format!("{a}{b}").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..120),
    ]
}

proptest! {
    #![proptest_config(fuzz_support::config())]

    /// Any run request body: a binding or an error; a binding that
    /// validates is usable (its rank in range, its own URL and host found)
    /// and survives JSON both ways.
    #[test]
    fn binding_json(body in binding_body()) {
        let Ok(b) = serde_json::from_slice::<Binding>(&body) else { return Ok(()) };
        if b.validate().is_err() {
            return Ok(());
        }
        prop_assert!(b.rank < b.size());
        prop_assert!(b.local_ranks() >= 1);
        for e in &b.endpoints {
            prop_assert!(mpiws_core::wire::url::endpoint(e.trim_end_matches('/')).is_ok(), "{e}");
        }
        let _ = b.url_of(b.rank);
        let again: Binding = serde_json::from_slice(&serde_json::to_vec(&b).unwrap()).unwrap();
        // serde_json's default float parser may miss the nearest f64 by one
        // unit (it has no `float_roundtrip`): floats in params are compared
        // with that tolerance, everything else exactly.
        prop_assert!(same_json(&again.params, &b.params), "{:?} != {:?}", again.params, b.params);
        prop_assert_eq!(Binding { params: Value::Null, ..again }, Binding { params: Value::Null, ..b });
    }

    /// Any text: a URL or an error, never a panic; a URL written back out
    /// parses to the same parts, its port in range.
    #[test]
    fn url_parser(text in prop_oneof![url(), ".{0,40}", "https?://\\[[0-9a-f:]{0,12}\\](:[0-9]{0,6})?[/?#a-z]{0,6}"]) {
        if let Ok(u) = mpiws_core::wire::url::parse(&text) {
            prop_assert!(u.port >= 1);
            prop_assert_eq!(mpiws_core::wire::url::parse(&u.to_string()), Ok(u));
        }
    }

    /// Any template text: a program or an error; a program written back out
    /// parses to the same words and parameters.
    #[test]
    fn template_parser(text in template_text()) {
        let Ok(t) = Template::parse(&text) else { return Ok(()) };
        prop_assert!(matches!(t.words.first(), Some(Word::Literal(_))));
        let words_ok = t.words.iter().all(|w| match w { Word::Param(i) => *i < t.params.len(), Word::Literal(s) => !s.is_empty() });
        prop_assert!(words_ok, "{:?}", t.words);
        for p in &t.params {
            prop_assert!(t.param(&p.name) == Some(p));
        }
        let _ = t.describe("p");
        let back = Template::parse(&render(&t)).unwrap();
        prop_assert_eq!((back.words, back.params), (t.words, t.params));
    }

    /// Any JSON value for any parameter: the command-line text or an error;
    /// a number is given as a number of its type.
    #[test]
    fn input_values(p in param(), v in json_value()) {
        if let Ok(text) = p.check_value(&v) {
            match p.kind {
                Kind::Int => prop_assert!(text.parse::<i128>().is_ok(), "{text:?}"),
                Kind::Float => prop_assert!(text.parse::<f64>().is_ok(), "{text:?}"),
                Kind::String | Kind::Xml => prop_assert!(v.as_str() == Some(text.as_str())),
                Kind::Binary => prop_assert!(false, "binary has no command-line value"),
            }
        }
    }

    /// Any bytes as an output file: a value, none, or an error, never a
    /// panic (an error's excerpt of the text included).
    #[test]
    fn output_values(p in param(), bytes in output_bytes()) {
        match p.read_value(&bytes) {
            Ok(Some(Value::Number(_))) => prop_assert!(matches!(p.kind, Kind::Int | Kind::Float)),
            Ok(Some(Value::String(s))) => prop_assert!(matches!(p.kind, Kind::String | Kind::Xml) && s.as_bytes() == &bytes[..]),
            Ok(Some(other)) => prop_assert!(false, "{other:?}"),
            Ok(None) => prop_assert!(p.kind == Kind::Binary || std::str::from_utf8(&bytes).is_err()),
            // The excerpt is 80 characters at most, each escaped in at most 10.
            Err(e) => prop_assert!(e.message.chars().count() < 900 && matches!(p.kind, Kind::Int | Kind::Float)),
        }
    }
}
