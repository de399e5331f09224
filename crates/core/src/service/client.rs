//! The client side of the service interface: start a domain by invoking
//! *run* on every endpoint, watch its instances, cancel them. Used by the
//! `mpiws run` launcher; any HTTP client can do the same.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use http::Method;
use serde_json::{json, Value};

use crate::config::{failure_timeout, startup_timeout};
use crate::error::{Error, ErrorClass, Result};
use crate::net::http::Http;
use crate::wire::url;

pub struct DomainClient {
    pub domain: String,
    pub token: String,
    pub endpoints: Vec<String>,
    /// The endpoint key that creates the domain's instances (*run*).
    key: Option<String>,
    http: Arc<Http>,
}

impl DomainClient {
    /// Err: an endpoint URL the one URL parser refuses (`wire::url::endpoint`),
    /// named before any request goes out.
    pub fn new(domain: String, token: String, endpoints: Vec<String>, key: Option<String>) -> Result<Self> {
        let endpoints: Vec<String> = endpoints.into_iter().map(|e| e.trim_end_matches('/').to_string()).collect();
        for e in &endpoints {
            url::endpoint(e).map_err(|why| Error::new(ErrorClass::Arg, why))?;
        }
        Ok(DomainClient { domain, token, endpoints, key, http: Arc::new(Http::new()) })
    }

    fn rank_uri(&self, rank: usize) -> String {
        url::join(&self.endpoints[rank], &format!("/domains/{}/ranks/{rank}", self.domain))
    }

    /// Invoke *run* on every endpoint at once. If any refuses, the ranks
    /// already started are cancelled and the first refusal is returned.
    pub async fn start(&self, service: &str, params: &Value) -> Result<()> {
        self.start_ranks(&(0..self.endpoints.len()).collect::<Vec<_>>(), service, params).await
    }

    /// `start` for some ranks only: the others' instances are created by
    /// their own processes (a client that is itself a rank).
    pub async fn start_ranks(&self, ranks: &[usize], service: &str, params: &Value) -> Result<()> {
        let results = self.start_each(ranks, service, params).await?;
        if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
            let e = e.clone();
            let started: Vec<usize> = ranks.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(&rank, _)| rank).collect();
            join_all(started.into_iter().map(|r| self.cancel(r))).await;
            return Err(e);
        }
        Ok(())
    }

    /// *run* on the endpoints of `ranks`, each on its own: one that cannot
    /// be started leaves the others running (`mpiws run --keep-going`: a
    /// rank that dies at once may die before its endpoint answers). Each
    /// rank's outcome, in the order of `ranks`.
    pub async fn start_each(&self, ranks: &[usize], service: &str, params: &Value) -> Result<Vec<Result<()>>> {
        if let Some(r) = ranks.iter().find(|&&r| r >= self.endpoints.len()) {
            return Err(Error::new(ErrorClass::Rank, format!("rank {r} of a domain of {}", self.endpoints.len())));
        }
        let runs = ranks.iter().map(|&rank| {
            let binding = json!({
                "domain": self.domain, "rank": rank, "endpoints": self.endpoints,
                "token": self.token, "service": service, "params": params,
            });
            let uri = url::join(&self.endpoints[rank], "/run");
            async move {
                // *run* with the same binding is idempotent (docs/protocol.md): safe to send again.
                // Unanswered within the startup timeout (a link that black-holes): failed, not waited for ever.
                let call = self.http.call_json_replayable::<Value>(Method::POST, &uri, self.key.as_deref(), Some(&binding), true);
                let reply = answered(&uri, startup_timeout(), call).await;
                reply.map(|_| ()).map_err(|e| Error::new(e.class, format!("rank {rank}: {}", e.message)))
            }
        });
        Ok(join_all(runs).await)
    }

    /// Status of one rank; with `wait`, long-poll up to that many seconds for it to end.
    /// An endpoint that does not answer within `wait` and the failure timeout
    /// (a connection that stays open but carries nothing: a link that
    /// black-holes) is unreachable, as one that refuses is: the watcher
    /// (`mpiws run --endpoints`, a workflow) sees the rank failed, not a hang.
    pub async fn status(&self, rank: usize, wait: Option<f64>) -> Result<Value> {
        let mut uri = self.rank_uri(rank);
        if let Some(w) = wait {
            uri = url::join(&uri, &format!("?wait={w}"));
        }
        let within = Duration::from_secs_f64(wait.unwrap_or(0.0).clamp(0.0, 3600.0)) + failure_timeout();
        answered(&uri, within, self.http.call_json(Method::GET, &uri, Some(&self.token), None)).await
    }

    /// Cancel one rank's instance (bounded by the failure timeout as `status` is).
    pub async fn cancel(&self, rank: usize) -> Result<Value> {
        let uri = self.rank_uri(rank);
        answered(&uri, failure_timeout(), self.http.call_json(Method::DELETE, &uri, Some(&self.token), None)).await
    }
}

/// `call`'s answer, or the peer failed if none came `within`.
async fn answered<T>(uri: &str, within: Duration, call: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(within, call)
        .await
        .unwrap_or_else(|_| Err(Error::new(ErrorClass::ProcFailed, format!("{uri} did not answer within {:.1} s", within.as_secs_f64()))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::runtime;

    /// A status or cancel sent to an endpoint that accepts the connection and
    /// never answers ends as an unreachable peer within its bound, not never.
    #[test]
    fn a_silent_endpoint_is_unreachable_not_a_hang() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", silent.local_addr().unwrap());
        let held = std::thread::spawn(move || {
            let mut kept = Vec::new();
            for _ in 0..2 {
                kept.push(silent.accept().unwrap().0); // accepted, never read, never answered
            }
            std::thread::sleep(Duration::from_secs(30));
            drop(kept);
        });
        let client = DomainClient::new("d".into(), "t".repeat(16), vec![url], None).unwrap();
        let started = std::time::Instant::now();
        let e = runtime().block_on(client.status(0, Some(0.5))).unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.class, ErrorClass::ProcFailed, "{}", e.message);
        assert!(e.message.contains("did not answer"), "{}", e.message);
        assert!(took >= Duration::from_millis(500) && took < Duration::from_millis(500) + failure_timeout() * 2, "{took:?}");
        let started = std::time::Instant::now();
        let e = runtime().block_on(client.cancel(0)).unwrap_err();
        assert_eq!(e.class, ErrorClass::ProcFailed, "{}", e.message);
        assert!(started.elapsed() < failure_timeout() * 2, "{:?}", started.elapsed());
        drop(held);
    }
}
