//! `POST /`: the service interface's SOAP operations, as `GET /?wsdl`
//! describes them: `run` (an instance, as `POST /run`: an endpoint key with
//! `run`), `status` and `cancel` (as `GET`/`DELETE
//! /domains/{domain}/ranks/{rank}`: the domain's token, or a key with
//! `admin`). The route asks for no credential itself: each operation checks
//! its own first, as those routes do, before it acts. A refusal is a fault
//! with their HTTP status.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use super::envelope;
use super::program::{answer_envelope, sender, Fault};
use super::wsdl::escape;
use crate::error::ErrorClass;
use crate::keys::Scope;
use crate::rank::{Binding, Status};
use crate::service::endpoint::Found;
use crate::service::reply::{read_body, watched_instance, HttpError, Reply};
use crate::service::{guard, run, Endpoint};

pub const NS: &str = "urn:mpiws:services";

pub async fn services(ep: &Endpoint, req: Request<Incoming>) -> Reply {
    match operate(ep, req).await {
        Ok(body) => answer_envelope(&body),
        Err(f) => f.into(),
    }
}

async fn operate(ep: &Endpoint, req: Request<Incoming>) -> Result<String, Fault> {
    let headers = req.headers().clone();
    let content_type = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let body = read_body(ep, req.into_body(), ep.config.max_binding, "the SOAP request (--max-binding)").await?;
    let request = envelope::read_sessionless(&content_type, &body)?;
    let op = &request.operation;
    if op.ns != NS {
        return Err(sender(format!("the operation {{{}}}{} is not of the service interface's namespace, {NS}", op.ns, op.name)));
    }
    let text = |name: &str| op.child(name).map(|c| c.text.trim().to_string());
    let rank = || -> Result<(String, String), Fault> {
        let domain = text("domain").ok_or_else(|| sender(format!("{} takes a domain", op.name)))?;
        Ok((domain, text("rank").ok_or_else(|| sender(format!("{} takes a rank", op.name)))?))
    };
    let answer = |s: &Status| format!(r#"<s:{}Response xmlns:s="{NS}">{}</s:{}Response>"#, op.name, status(s), op.name);
    match op.name.as_str() {
        "run" => {
            let key = guard::key(ep, &headers, Scope::Run)?;
            let params = match text("params") {
                None => serde_json::Value::Null,
                Some(p) => serde_json::from_str(&p).map_err(|e| sender(format!("params is a JSON text: {e}")))?,
            };
            let binding = Binding {
                domain: text("domain").unwrap_or_default(),
                rank: text("rank").unwrap_or_default().parse().map_err(|_| sender("rank is a whole number"))?,
                endpoints: op.children.iter().filter(|c| c.name == "endpoints").map(|c| c.text.trim().to_string()).collect(),
                token: text("token").unwrap_or_default(),
                service: text("service").unwrap_or_default(),
                params,
            };
            Ok(answer(&run::create(ep, binding, key.id)?.status()))
        }
        "status" | "cancel" => {
            let (domain, rank) = rank()?;
            let found = watched_instance(ep, &domain, &rank, &headers)?;
            let s = match found {
                Found::Live(i) => {
                    if op.name == "cancel" {
                        i.cancel();
                    }
                    i.status()
                }
                Found::Ended(e) => e.status.clone(),
            };
            Ok(answer(&s))
        }
        other => Err(HttpError::new(
            StatusCode::BAD_REQUEST,
            ErrorClass::Arg,
            format!("the service interface has no operation {other} (it has run, status, cancel)"),
        )
        .into()),
    }
}

/// An instance's status, as the WSDL's `Status`.
fn status(s: &Status) -> String {
    let state = serde_json::to_value(s.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let mut x = format!(
        "<s:domain>{}</s:domain><s:rank>{}</s:rank><s:service>{}</s:service><s:state>{state}</s:state>",
        escape(&s.domain),
        s.rank,
        escape(&s.service)
    );
    if let Some(r) = &s.result {
        x += &format!("<s:result>{}</s:result>", escape(&r.to_string()));
    }
    if let Some(e) = &s.error {
        x += &format!("<s:error><s:name>{}</s:name><s:message>{}</s:message></s:error>", escape(&e.name), escape(&e.message));
    }
    x
}
