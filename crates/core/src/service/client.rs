//! The client side of the service interface: start a domain by invoking
//! *run* on every endpoint, watch its instances, cancel them. Used by the
//! `mpiws run` launcher; any HTTP client can do the same.

use std::sync::Arc;

use futures_util::future::join_all;
use http::Method;
use serde_json::{json, Value};

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
                let reply = self.http.call_json_replayable::<Value>(Method::POST, &uri, self.key.as_deref(), Some(&binding), true).await;
                reply.map_err(|e| Error::new(e.class, format!("rank {rank}: {}", e.message)))
            }
        });
        let results = join_all(runs).await;
        if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
            let e = e.clone();
            let started: Vec<usize> = ranks.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(&rank, _)| rank).collect();
            join_all(started.into_iter().map(|r| self.cancel(r))).await;
            return Err(e);
        }
        Ok(())
    }

    /// Status of one rank; with `wait`, long-poll up to that many seconds for it to end.
    pub async fn status(&self, rank: usize, wait: Option<f64>) -> Result<Value> {
        let mut uri = self.rank_uri(rank);
        if let Some(w) = wait {
            uri = url::join(&uri, &format!("?wait={w}"));
        }
        self.http.call_json(Method::GET, &uri, Some(&self.token), None).await
    }

    pub async fn cancel(&self, rank: usize) -> Result<Value> {
        self.http.call_json(Method::DELETE, &self.rank_uri(rank), Some(&self.token), None).await
    }
}
