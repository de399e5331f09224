//! A job's outputs as the faces give them (the OGC face's results, the
//! SOAP face's answers): each output's value, its bytes, or a link to its
//! file, read from the job's directory by the rules of `GET
//! /jobs/{id}/results` (by reference, and above 16 MiB by value, a link;
//! a file that is not what the template says it is: a link).

use serde_json::{json, Value};

use crate::jobs::job::Job;
use crate::jobs::safe_file::size_of;
use crate::jobs::template::Kind;
use crate::service::jobs::results::{read_inline, INLINE_MAX};
use crate::service::Endpoint;
use crate::wire::url;

/// How an output is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transmission {
    Value,
    Reference,
}

/// One output, as the job left it.
#[derive(Debug, PartialEq)]
pub enum Out {
    /// A JSON value (a number, a text, a CWL value).
    Value(Value),
    /// A file's bytes: their media type, and whether they are text.
    Bytes { bytes: Vec<u8>, media: &'static str, text: bool },
    /// Where to fetch it.
    Link { href: String, media: String },
}

/// The names of a job's outputs, in its program's order.
pub fn output_names(job: &Job) -> Vec<String> {
    match job.program.template() {
        Some(t) => t.params.iter().filter(|p| p.is_output()).map(|p| p.name.clone()).collect(),
        None => job.outputs.get().map(|o| o.keys().cloned().collect()).unwrap_or_default(),
    }
}

pub async fn output(ep: &Endpoint, job: &Job, name: &str, how: Transmission) -> Option<Out> {
    let Some(template) = job.program.template() else {
        return job.outputs.get().and_then(|o| o.get(name)).map(cwl_out);
    };
    let p = template.params.iter().find(|p| p.name == name && p.is_output())?;
    let path = job.output_path(&p.name);
    let size = size_of(&path)?;
    let media = media_of(p.kind);
    let link = || Out::Link {
        // A job's output in a session is a file of the session, referenced there (where it outlives the job).
        href: match &job.session {
            Some(session) => session.file_url(&ep.url(), job.names.of(&p.name)),
            None => url::join(&job.url(&ep.url()), &format!("/files/{}", p.name)),
        },
        media: media.to_string(),
    };
    if how == Transmission::Reference || size > INLINE_MAX {
        return Some(link());
    }
    let Some(bytes) = read_inline(&path).await else { return Some(link()) };
    Some(match p.read_value(&bytes) {
        Ok(Some(v)) if p.kind != Kind::Xml => Out::Value(v),
        Ok(_) => Out::Bytes { text: p.kind == Kind::Xml, bytes, media },
        Err(_) => link(), // not what the template says it is: the file as it is
    })
}

fn media_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Xml => "application/xml",
        Kind::Binary => "application/octet-stream",
        Kind::Int | Kind::Float | Kind::String => "text/plain",
    }
}

/// A CWL output value: a File is a link to it, the rest as it is.
fn cwl_out(v: &Value) -> Out {
    match v {
        Value::Object(o) if o.get("class") == Some(&json!("File")) => Out::Link {
            href: o.get("location").and_then(Value::as_str).unwrap_or_default().to_string(),
            media: o
                .get("format")
                .and_then(Value::as_str)
                .filter(|f| f.contains('/') && !f.contains(':'))
                .unwrap_or("application/octet-stream")
                .to_string(),
        },
        other => Out::Value(links_for_files(other)),
    }
}

/// Files inside a value (a list of them) as links.
fn links_for_files(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(links_for_files).collect()),
        Value::Object(o) if o.get("class") == Some(&json!("File")) => match cwl_out(v) {
            Out::Link { href, media } => json!({"href": href, "type": media}),
            _ => unreachable!("a File is a link"),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwl_files_are_links_inside_values_too() {
        let f = json!({"class": "File", "location": "http://h/jobs/j/files/out/a.txt", "basename": "a.txt", "size": 3});
        assert_eq!(cwl_out(&f), Out::Link { href: "http://h/jobs/j/files/out/a.txt".into(), media: "application/octet-stream".into() });
        assert_eq!(
            cwl_out(&json!([f])),
            Out::Value(json!([{"href": "http://h/jobs/j/files/out/a.txt", "type": "application/octet-stream"}]))
        );
        assert_eq!(cwl_out(&json!(7)), Out::Value(json!(7)));
    }
}
