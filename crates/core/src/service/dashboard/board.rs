//! What a run tells its own dashboard: `mpiws run`, `mpiws workflow run`
//! and a pool executor each host an endpoint of their own (no services,
//! the user's key) and tell it, in-process, what to show: the domain they
//! started ([`Board::watch`], gathered as a hosted domain is) and
//! documents of their own ([`Board::publish`]: a workflow's record, a
//! farm's figures), shown as they are.
//!
//! Rules:
//! - Only the run's own process writes here (through the binding); no
//!   route does, so nothing a client sends becomes a document.
//! - A document replaces the last one of its name; at most [`MAX_RUNS`]
//!   names and [`MAX_DOCUMENT`] bytes each; at most [`MAX_WATCHED`] domains.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::error::{err, ErrorClass, Result};

pub const MAX_RUNS: usize = 64;
pub const MAX_DOCUMENT: usize = 4 << 20;
pub const MAX_WATCHED: usize = 16;

/// A domain this endpoint shows though it hosts none of it (a launcher's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub domain: String,
    /// What its ranks' endpoints take to tell their status (the domain's token, or a key).
    pub bearer: String,
    /// Rank i's endpoint at `endpoints[i]`.
    pub endpoints: Vec<String>,
}

#[derive(Default)]
pub struct Board {
    /// name -> (kind, document, when it was published: seconds since the epoch).
    runs: Mutex<BTreeMap<String, (String, Value, f64)>>,
    watched: Mutex<Vec<Watched>>,
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl Board {
    /// Show `document` (JSON text) as the run `name` of `kind` ("workflow", "farm", ...).
    pub fn publish(&self, name: &str, kind: &str, document: &str) -> Result<()> {
        if document.len() > MAX_DOCUMENT {
            return err(ErrorClass::Arg, format!("a dashboard document is at most {MAX_DOCUMENT} bytes ({} given)", document.len()));
        }
        let doc: Value = serde_json::from_str(document)
            .map_err(|e| crate::error::Error::new(ErrorClass::Arg, format!("a dashboard document is JSON: {e}")))?;
        let mut runs = self.runs.lock();
        if !runs.contains_key(name) && runs.len() >= MAX_RUNS {
            return err(ErrorClass::Arg, format!("a dashboard shows at most {MAX_RUNS} runs"));
        }
        runs.insert(name.to_string(), (kind.to_string(), doc, now()));
        Ok(())
    }

    /// Show `watched` (again, if its domain was shown: it is replaced).
    pub fn watch(&self, watched: Watched) -> Result<()> {
        let mut all = self.watched.lock();
        all.retain(|w| w.domain != watched.domain);
        if all.len() >= MAX_WATCHED {
            return err(ErrorClass::Arg, format!("a dashboard watches at most {MAX_WATCHED} domains"));
        }
        all.push(watched);
        Ok(())
    }

    pub fn watched(&self) -> Vec<Watched> {
        self.watched.lock().clone()
    }

    /// The documents, by name: `[{"name", "kind", "updated", "doc"}]`.
    pub fn runs(&self) -> Value {
        let runs = self.runs.lock();
        Value::Array(runs.iter().map(|(name, (kind, doc, at))| json!({"name": name, "kind": kind, "updated": at, "doc": doc})).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_replaces_its_names_last_and_bad_ones_are_refused() {
        let b = Board::default();
        b.publish("squares", "workflow", r#"{"state": "running"}"#).unwrap();
        b.publish("squares", "workflow", r#"{"state": "done"}"#).unwrap();
        assert_eq!(b.runs()[0]["doc"]["state"], "done");
        assert_eq!(b.runs().as_array().unwrap().len(), 1);
        assert!(b.publish("x", "farm", "{not json").unwrap_err().message.contains("is JSON"));
        let big = format!("\"{}\"", "a".repeat(MAX_DOCUMENT));
        assert!(b.publish("x", "farm", &big).unwrap_err().message.contains("at most"));
        for i in 1..MAX_RUNS {
            b.publish(&i.to_string(), "farm", "{}").unwrap();
        }
        assert!(b.publish("one more", "farm", "{}").is_err(), "bounded");
        b.publish("squares", "workflow", "{}").expect("a name already shown may be replaced");
    }

    #[test]
    fn a_watched_domain_is_replaced_not_repeated() {
        let b = Board::default();
        let w = |bearer: &str| Watched { domain: "d".into(), bearer: bearer.into(), endpoints: vec!["http://127.0.0.1:1".into()] };
        b.watch(w("a")).unwrap();
        b.watch(w("b")).unwrap();
        assert_eq!(b.watched(), vec![w("b")]);
    }
}
