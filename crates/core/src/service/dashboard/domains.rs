//! The domains a dashboard shows: each with an instance here (all its
//! ranks, wherever they run), each a run watches (`board::Watched`), and
//! what is kept of those whose instances here all ended.
//!
//! Each rank's state, traffic and what it waits for come from its own
//! endpoint's status route (`?traffic=true`, which asks a child process
//! where the rank's code runs in one), with the domain's token: one way
//! for a rank here or far away. The ranks are asked at once, each for at
//! most [`ASK_WITHIN`]; one that does not answer is shown `unreachable`.
//! Only while a page is open is anything asked.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use http::Method;
use serde_json::{json, Value};

use crate::error::Result;
use crate::service::dashboard::board::Watched;
use crate::service::endpoint::Found;
use crate::service::Endpoint;
use crate::wire::url;

/// How long one rank's status is waited for.
const ASK_WITHIN: Duration = Duration::from_secs(2);

/// The ranks of one domain shown, at most (a matrix of more is not read).
pub const MAX_RANKS_SHOWN: usize = 256;

/// The ranks asked in one gathering, all domains together: an endpoint
/// hosting many domains asks the first ones' ranks (by domain id) and shows
/// the rest with none (`shown` says how many of each were asked).
pub const MAX_RANKS_ASKED: usize = 1024;

/// How a domain is known here.
enum Known {
    /// Whole: its ranks are asked.
    Asked(Watched, String),
    /// Only what was kept of its instances here: (rank, status) each.
    Kept(Vec<(u32, Value)>),
}

/// Every domain shown, by id.
pub async fn gather(ep: &Endpoint) -> Vec<Value> {
    let mut known: BTreeMap<String, Known> = BTreeMap::new();
    for w in ep.board.watched() {
        known.insert(w.domain.clone(), Known::Asked(w, String::new()));
    }
    for shown in ep.shown() {
        match shown.found {
            Found::Live(i) => {
                let b = &i.binding;
                let w = Watched { domain: b.domain.clone(), bearer: b.token.clone(), endpoints: b.endpoints.clone() };
                known.insert(b.domain.clone(), Known::Asked(w, b.service.clone()));
            }
            Found::Ended(e) => {
                let status = serde_json::to_value(&e.status).expect("a status encodes");
                let mut v = status;
                v["traffic"] = serde_json::to_value(&e.traffic).expect("counts encode");
                match known.entry(e.status.domain.clone()).or_insert_with(|| Known::Kept(Vec::new())) {
                    Known::Kept(ranks) => ranks.push((e.status.rank, v)),
                    Known::Asked(..) => {}
                }
            }
        }
    }
    let here = ep.url();
    let sizes: Vec<usize> = known.values().map(|k| if let Known::Asked(w, _) = k { w.endpoints.len() } else { 0 }).collect();
    let shown = known.into_iter().zip(taken(&sizes)).map(|((domain, k), take)| {
        let here = here.clone();
        async move {
            match k {
                Known::Asked(w, service) => asked(ep, &domain, &w, &service, take).await,
                Known::Kept(mut ranks) => {
                    ranks.sort_by_key(|(r, _)| *r);
                    let size = ranks.iter().map(|(_, v)| v["traffic"]["sent"].as_array().map_or(0, Vec::len)).max().unwrap_or(0);
                    let service = ranks.first().and_then(|(_, v)| v["service"].as_str()).unwrap_or("").to_string();
                    let ranks: Vec<Value> = ranks.into_iter().map(|(r, v)| rank_view(r, &here, Ok(v))).collect();
                    json!({"domain": domain, "size": size, "service": service, "shown": ranks.len(), "ranks": ranks})
                }
            }
        }
    });
    join_all(shown).await
}

/// How many ranks of each domain (of `sizes` ranks, in order) are asked.
fn taken(sizes: &[usize]) -> Vec<usize> {
    let mut left = MAX_RANKS_ASKED;
    sizes
        .iter()
        .map(|&n| {
            let take = n.min(MAX_RANKS_SHOWN).min(left);
            left -= take;
            take
        })
        .collect()
}

/// Domain `domain` with its first `take` ranks asked.
async fn asked(ep: &Endpoint, domain: &str, w: &Watched, service: &str, take: usize) -> Value {
    let http = ep.stores.http();
    let ranks = w.endpoints.iter().take(take).enumerate().map(|(r, base)| async move {
        let asked = url::join(base, &format!("/domains/{domain}/ranks/{r}?traffic=true"));
        let answer = match tokio::time::timeout(ASK_WITHIN, http.call_json::<Value>(Method::GET, &asked, Some(&w.bearer), None)).await {
            Ok(answer) => answer,
            Err(_) => {
                Err(crate::error::Error::new(crate::error::ErrorClass::ProcFailed, format!("no answer within {} s", ASK_WITHIN.as_secs())))
            }
        };
        rank_view(r as u32, url::without_pin(base), answer)
    });
    let ranks: Vec<Value> = join_all(ranks).await;
    let service =
        if service.is_empty() { ranks.iter().find_map(|r| r["service"].as_str()).unwrap_or("").to_string() } else { service.to_string() };
    json!({"domain": domain, "size": w.endpoints.len(), "service": service, "shown": take, "ranks": ranks})
}

/// One rank as the page shows it, from its status (or why there is none).
fn rank_view(rank: u32, url: &str, status: Result<Value>) -> Value {
    let v = match status {
        Ok(v) => v,
        Err(e) => {
            return json!({"rank": rank, "url": url, "state": "unreachable", "error": e.message, "awaiting": null, "sent": null, "received": null})
        }
    };
    let error = match &v["error"] {
        Value::Null => Value::Null,
        e => json!(format!("{}: {}", e["name"].as_str().unwrap_or("error"), e["message"].as_str().unwrap_or(""))),
    };
    let awaiting = if v["state"] == "running" || v["state"] == "starting" { v["awaiting"].clone() } else { json!([]) };
    json!({
        "rank": rank, "url": url, "service": v["service"], "state": v["state"], "error": error, "awaiting": awaiting,
        "sent": v["traffic"]["sent"], "received": v["traffic"]["received"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorClass};

    #[test]
    fn a_rank_is_shown_with_its_error_named_and_what_it_waits_for_while_it_runs() {
        let running = json!({"service": "s", "state": "running", "error": null, "traffic": {"sent": [[0, 0], [2, 16]], "received": [[0, 0], [1, 8]]},
                             "awaiting": [{"source": 1, "tag": 3, "collective": null}]});
        let v = rank_view(0, "http://a", Ok(running));
        assert_eq!(v["awaiting"][0]["tag"], 3);
        assert_eq!(v["sent"][1], json!([2, 16]));
        let failed = json!({"state": "failed", "error": {"name": "ZeroDivisionError", "message": "division by zero"}, "traffic": {}, "awaiting": [{"source": 1}]});
        let v = rank_view(2, "http://b", Ok(failed));
        assert_eq!(v["error"], "ZeroDivisionError: division by zero");
        assert_eq!(v["awaiting"], json!([]), "an ended rank waits for nothing");
    }

    #[test]
    fn ranks_asked_are_bounded_per_domain_and_in_all() {
        assert_eq!(taken(&[4, 1000, 0]), vec![4, MAX_RANKS_SHOWN, 0]);
        let many = vec![200; 8];
        let got = taken(&many);
        assert_eq!(got.iter().sum::<usize>(), MAX_RANKS_ASKED);
        assert_eq!((got[0], got[5], got[6], got[7]), (200, 24, 0, 0), "the first domains first");
    }

    #[test]
    fn a_rank_that_does_not_answer_is_unreachable_and_says_why() {
        let v = rank_view(3, "http://c", Err(Error::new(ErrorClass::ProcFailed, "http://c is unreachable: refused")));
        assert_eq!((v["state"].as_str(), v["error"].as_str()), (Some("unreachable"), Some("http://c is unreachable: refused")));
        assert!(v["sent"].is_null());
    }
}
