//! `GET /metrics`: what the endpoint counts, in the Prometheus text format
//! (version 0.0.4), for the tools operators already run (a key with the
//! `metrics` scope, or `admin`).
//!
//! Rules:
//! - Names follow Prometheus' conventions: `mpiws_` first, the unit in the
//!   name (`_seconds`, `_bytes`), counters end in `_total`.
//! - Every label's values are bounded and none comes from a client: a
//!   route is its template in the route table (`/jobs/{id}`, never the
//!   path asked for), a method one of the table's, a status code a number,
//!   a limit one of the endpoint's own settings ([`limit_named`]), a state
//!   one of a fixed few. No label names a job or a key; a domain is named
//!   only while it has a live instance here (at most `--max-instances`
//!   series, gone with the domain).
//! - Counting costs a request a lock and a few additions. A rank's
//!   messages never pass here: their counts and receive waits are the
//!   ranks' own (`rank::traffic`), read at scrape time.
//!
//! [`Metrics`] holds the counters the server adds to as it answers;
//! [`render`] writes them and the gauges read at scrape time.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use http::Response;
use parking_lot::Mutex;

use crate::body::Chunks;
use crate::rank::traffic::TIME_BUCKETS;
use crate::service::reply::Reply;
use crate::service::Endpoint;

/// The upper bounds (seconds) of the request-duration histogram's buckets.
const BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A refusal that hit a limit: attached to its reply (an extension: never
/// sent), counted by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit(pub &'static str);

/// What the flow control of a rank's mailbox is called among the limits (its 429 names no setting).
pub const PUSHBACK: &str = "pushback";

/// The route label of a request no route took (a path or method the table has not).
pub const UNROUTED: &str = "unrouted";

/// A method as a label: one of those the routes have, or `OTHER`.
pub fn method_name(m: &http::Method) -> &'static str {
    match *m {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

/// Mark `reply`, a refusal saying `message`, with the limit it hit, if it
/// is one (413, 429, 503 or 507 naming a setting; a rank's pushback).
pub fn mark(reply: &mut crate::service::reply::Reply, message: &str) {
    let status = reply.status().as_u16();
    if !matches!(status, 413 | 429 | 503 | 507) {
        return;
    }
    let limit = if message == crate::service::store::PUSHBACK_MESSAGE { Some(PUSHBACK) } else { limit_named(message) };
    if let Some(limit) = limit {
        reply.extensions_mut().insert(LimitHit(limit));
    }
}

/// The endpoint setting a refusal's `message` names (`--max-jobs` is
/// `max_jobs`), if it names one: the limit it hit. Only the endpoint's own
/// setting names are returned, so a label never holds a client's text.
pub fn limit_named(message: &str) -> Option<&'static str> {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let defaults = crate::service::config::Config::defaults();
        let settings = defaults.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        settings.into_iter().map(|s| &*Box::leak(s.into_boxed_str())).collect()
    });
    message.match_indices("--").find_map(|(at, _)| {
        let flag: String = message[at + 2..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
        let name = flag.replace('-', "_");
        names.iter().copied().find(|n| *n == name)
    })
}

#[derive(Default)]
struct Histogram {
    /// Observations at most each bucket's bound (not cumulative here).
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            self.counts[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Default)]
pub struct Metrics {
    /// (method, route, status) -> requests answered.
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), u64>>,
    /// route -> how long answering took (until the answer's head).
    durations: Mutex<BTreeMap<&'static str, Histogram>>,
    /// (limit, status) -> refusals.
    limits: Mutex<BTreeMap<(&'static str, u16), u64>>,
    tls_ok: AtomicU64,
    tls_failed: AtomicU64,
}

/// A value read at scrape time: its name, help, and (labels, value) samples.
pub struct Gauge {
    pub name: &'static str,
    pub help: &'static str,
    pub samples: Vec<(String, f64)>,
}

impl Metrics {
    /// A request was answered: `route` is its template (`"unrouted"` if none fit).
    pub fn request(&self, method: &'static str, route: &'static str, status: u16, seconds: f64, limit: Option<LimitHit>) {
        *self.requests.lock().entry((method, route, status)).or_default() += 1;
        self.durations.lock().entry(route).or_default().observe(seconds);
        if let Some(LimitHit(limit)) = limit {
            *self.limits.lock().entry((limit, status)).or_default() += 1;
        }
    }

    /// A TLS handshake ended (`ok`: well).
    pub fn tls_handshake(&self, ok: bool) {
        if ok { &self.tls_ok } else { &self.tls_failed }.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition: these counters, then `gauges`.
    pub fn render(&self, gauges: &[Gauge]) -> String {
        let mut out = String::new();
        head(&mut out, "mpiws_http_requests_total", "counter", "HTTP requests answered, by method, route (its template) and status code.");
        for ((method, route, status), n) in self.requests.lock().iter() {
            let _ = writeln!(out, "mpiws_http_requests_total{{method=\"{method}\",route=\"{route}\",code=\"{status}\"}} {n}");
        }
        let name = "mpiws_http_request_duration_seconds";
        head(&mut out, name, "histogram", "Time to answer an HTTP request (until its answer's head), by route.");
        for (route, h) in self.durations.lock().iter() {
            let mut counts = h.counts.to_vec();
            counts.push(h.count - h.counts.iter().sum::<u64>()); // beyond the last bound
            write_buckets(&mut out, name, &format!("route=\"{route}\","), &BUCKETS, &counts, h.sum);
        }
        head(
            &mut out,
            "mpiws_limit_refusals_total",
            "counter",
            "Requests refused by a limit, by the setting that bounds it and the status code.",
        );
        for ((limit, status), n) in self.limits.lock().iter() {
            let _ = writeln!(out, "mpiws_limit_refusals_total{{limit=\"{limit}\",code=\"{status}\"}} {n}");
        }
        head(&mut out, "mpiws_tls_handshakes_total", "counter", "TLS handshakes of connections accepted, by result.");
        let _ = writeln!(out, "mpiws_tls_handshakes_total{{result=\"ok\"}} {}", self.tls_ok.load(Ordering::Relaxed));
        let _ = writeln!(out, "mpiws_tls_handshakes_total{{result=\"failed\"}} {}", self.tls_failed.load(Ordering::Relaxed));
        for g in gauges {
            head(&mut out, g.name, "gauge", g.help);
            for (labels, v) in &g.samples {
                let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
                let _ = writeln!(out, "{}{labels} {v}", g.name);
            }
        }
        out
    }
}

/// `GET /metrics`: the counters, and what the endpoint holds now.
pub fn answer(ep: &Endpoint) -> Reply {
    let labelled = |label: &str, counts: BTreeMap<&'static str, u64>| -> Vec<(String, f64)> {
        counts.into_iter().map(|(v, n)| (format!("{label}=\"{v}\""), n as f64)).collect()
    };
    let (disk_used, _) = ep.jobs.disk.used(None);
    let (buffered, max_buffered) = ep.buffered.used();
    let gauges = [
        Gauge {
            name: "mpiws_instances",
            help: "Instances hosted (running, or ended and still kept), by state.",
            samples: labelled("state", ep.instance_states()),
        },
        Gauge {
            name: "mpiws_jobs",
            help: "Jobs held (running, or ended and not yet removed), by state.",
            samples: labelled("state", ep.jobs.states()),
        },
        Gauge { name: "mpiws_sessions", help: "Sessions kept.", samples: vec![(String::new(), ep.jobs.session_count() as f64)] },
        Gauge {
            name: "mpiws_disk_used_bytes",
            help: "Bytes of the work directory counted against its quota.",
            samples: vec![(String::new(), disk_used as f64)],
        },
        Gauge {
            name: "mpiws_disk_limit_bytes",
            help: "The work directory's quota (--max-disk).",
            samples: vec![(String::new(), ep.config.jobs.max_disk as f64)],
        },
        Gauge {
            name: "mpiws_buffered_bytes",
            help: "Request bodies held in memory now, all connections.",
            samples: vec![(String::new(), buffered as f64)],
        },
        Gauge {
            name: "mpiws_buffered_limit_bytes",
            help: "Their bound (--max-buffered).",
            samples: vec![(String::new(), max_buffered as f64)],
        },
        Gauge {
            name: "mpiws_relay_connections",
            help: "Connections endpoints behind this relay keep open to it.",
            samples: vec![(String::new(), ep.relay.connections() as f64)],
        },
    ];
    let fetched = |i: usize| ep.jobs.fetcher.pulled[i].load(std::sync::atomic::Ordering::Relaxed);
    let mut text = ep.metrics.render(&gauges);
    let activity = ep.activity();
    let [sent, sent_bytes, received, received_bytes] = activity.traffic;
    for (name, help, n) in [
        ("mpiws_messages_sent_total", "Messages this endpoint's instances sent (to their peers, wherever they are).", sent),
        ("mpiws_message_bytes_sent_total", "Their payload bytes.", sent_bytes),
        ("mpiws_messages_received_total", "Messages this endpoint's instances received (duplicates not counted).", received),
        ("mpiws_message_bytes_received_total", "Their payload bytes.", received_bytes),
    ] {
        head(&mut text, name, "counter", help);
        let _ = writeln!(text, "{name} {n}");
    }
    let name = "mpiws_receive_wait_seconds";
    head(&mut text, name, "histogram", "How long receives waited for their message, from posted to matched (0: it was there first).");
    write_buckets(&mut text, name, "", &TIME_BUCKETS, &activity.waits.buckets, activity.waits.seconds);
    let name = "mpiws_message_handling_seconds";
    head(
        &mut text,
        name,
        "histogram",
        "How long messages took to be handled where they arrived, from head read to filed (stores and streams).",
    );
    write_buckets(&mut text, name, "", &TIME_BUCKETS, &activity.handling.buckets, activity.handling.seconds);
    head(&mut text, "mpiws_instances_ended_total", "counter", "Instances that ended, by final state (failed: failures detected).");
    for state in ["done", "failed", "cancelled"] {
        let _ = writeln!(text, "mpiws_instances_ended_total{{state=\"{state}\"}} {}", activity.ended.get(state).copied().unwrap_or(0));
    }
    // Per domain: only those with a live instance here (bounded by --max-instances), gone with them.
    let domains = ep.live_domains();
    for (name, help, i) in [
        ("mpiws_domain_messages_sent_total", "Messages this endpoint's live instances of a domain sent.", 0),
        ("mpiws_domain_message_bytes_sent_total", "Their payload bytes.", 1),
        ("mpiws_domain_messages_received_total", "Messages this endpoint's live instances of a domain received.", 2),
        ("mpiws_domain_message_bytes_received_total", "Their payload bytes.", 3),
    ] {
        head(&mut text, name, "counter", help);
        for (domain, a) in &domains {
            let _ = writeln!(text, "{name}{{domain=\"{domain}\"}} {}", a.traffic[i]);
        }
    }
    head(&mut text, "mpiws_fetches_total", "counter", "URL inputs jobs pulled, by result.");
    let _ = writeln!(text, "mpiws_fetches_total{{result=\"ok\"}} {}\nmpiws_fetches_total{{result=\"failed\"}} {}", fetched(0), fetched(1));
    head(&mut text, "mpiws_fetched_bytes_total", "counter", "Bytes of URL inputs jobs pulled.");
    let _ = writeln!(text, "mpiws_fetched_bytes_total {}", fetched(2));
    let mut r = Response::new(Chunks::new([bytes::Bytes::from(text)]));
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

/// A histogram's series: `counts` per bucket of `bounds` (not cumulative),
/// then one for beyond the last; `labels` ends with a comma if not empty.
fn write_buckets(out: &mut String, name: &str, labels: &str, bounds: &[f64], counts: &[u64], sum: f64) {
    let mut cumulative = 0u64;
    for (i, bound) in bounds.iter().enumerate() {
        cumulative = cumulative.saturating_add(counts.get(i).copied().unwrap_or(0));
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
    }
    let count = counts.iter().fold(0u64, |t, &n| t.saturating_add(n));
    let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
    let plain = labels.trim_end_matches(',');
    let braces = if plain.is_empty() { String::new() } else { format!("{{{plain}}}") };
    let _ = writeln!(out, "{name}_sum{braces} {sum}\n{name}_count{braces} {count}");
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_named_only_by_a_setting_of_the_endpoint() {
        assert_eq!(limit_named("the job table is full (mpiws serve --max-jobs)"), Some("max_jobs"));
        assert_eq!(limit_named("raise it (mpiws serve --max-jobs-per-key) or wait"), Some("max_jobs_per_key"));
        assert_eq!(limit_named("--no-such-setting, then --max-upload"), Some("max_upload"));
        assert_eq!(limit_named("a client's --evil=\"x\" text"), None);
        assert_eq!(limit_named("no flag at all"), None);
    }

    #[test]
    fn the_exposition_is_prometheus_text_with_cumulative_buckets() {
        let m = Metrics::default();
        m.request("GET", "/jobs/{id}", 200, 0.003, None);
        m.request("GET", "/jobs/{id}", 200, 0.2, None);
        m.request("POST", "/programs/{name}/jobs", 503, 0.001, Some(LimitHit("max_jobs")));
        m.tls_handshake(true);
        let gauge = Gauge { name: "mpiws_jobs", help: "Jobs held, by state.", samples: vec![("state=\"running\"".into(), 2.0)] };
        let text = m.render(&[gauge]);
        for line in [
            "# TYPE mpiws_http_requests_total counter",
            "mpiws_http_requests_total{method=\"GET\",route=\"/jobs/{id}\",code=\"200\"} 2",
            "mpiws_http_request_duration_seconds_bucket{route=\"/jobs/{id}\",le=\"0.0025\"} 0",
            "mpiws_http_request_duration_seconds_bucket{route=\"/jobs/{id}\",le=\"0.005\"} 1",
            "mpiws_http_request_duration_seconds_bucket{route=\"/jobs/{id}\",le=\"0.25\"} 2",
            "mpiws_http_request_duration_seconds_bucket{route=\"/jobs/{id}\",le=\"+Inf\"} 2",
            "mpiws_http_request_duration_seconds_count{route=\"/jobs/{id}\"} 2",
            "mpiws_limit_refusals_total{limit=\"max_jobs\",code=\"503\"} 1",
            "mpiws_tls_handshakes_total{result=\"ok\"} 1",
            "# TYPE mpiws_jobs gauge",
            "mpiws_jobs{state=\"running\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
