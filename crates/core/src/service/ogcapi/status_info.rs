//! A job's status document (`statusInfo`): the standard's states, its
//! times in RFC 3339, and links to itself and, once it succeeded, to its
//! results (pure: unit-tested below).
//!
//! States: `staging` is `accepted`, `running` `running`, `done`
//! `successful`, `failed` and `lost` (the endpoint stopped while it ran)
//! `failed`, `killed` `dismissed`.

use serde_json::{json, Value};

use crate::jobs::job::{Phase, State};
use crate::wire::url;

pub const RESULTS_REL: &str = "http://www.opengis.net/def/rel/ogc/1.0/results";

pub fn status_name(p: Phase) -> &'static str {
    match p {
        Phase::Staging => "accepted",
        Phase::Running => "running",
        Phase::Done => "successful",
        Phase::Failed | Phase::Lost => "failed",
        Phase::Killed => "dismissed",
    }
}

/// The status document of job `id` of `process` in state `s`; `href` is its URL on the face.
pub fn status_info(id: &str, process: &str, s: &State, href: &str) -> Value {
    let message = match (s.state, &s.error, s.exit_code) {
        (_, Some(e), _) => e.clone(),
        (Phase::Done, None, _) => "the program ended well".into(),
        (_, None, Some(code)) => format!("the program ended with exit code {code}"),
        (p, None, None) => format!("the job is {}", p.name()),
    };
    // `started` is when it was created; it begins to run once staged.
    let started = (s.state != Phase::Staging).then_some(s.started);
    document(id, process, status_name(s.state), &message, Some(Times { created: s.started, started, finished: s.ended }), href)
}

/// When a job was created, started running and finished (seconds since the epoch).
pub struct Times {
    pub created: f64,
    pub started: Option<f64>,
    pub finished: Option<f64>,
}

/// A status document: `status` one of the standard's, `times` when it
/// started and ended (seconds since the epoch), if known.
pub fn document(id: &str, process: &str, status: &str, message: &str, times: Option<Times>, href: &str) -> Value {
    let ended = matches!(status, "successful" | "failed" | "dismissed");
    let mut links = vec![json!({"href": href, "rel": "self", "type": "application/json", "title": "this job's status"})];
    if !ended {
        links.push(json!({"href": href, "rel": "monitor", "type": "application/json", "title": "poll this job's status"}));
    }
    if status == "successful" {
        links.push(
            json!({"href": url::join(href, "/results"), "rel": RESULTS_REL, "type": "application/json", "title": "the job's results"}),
        );
    }
    let mut d = json!({
        "type": "process", "processID": process, "jobID": id, "status": status, "message": message,
        "progress": if ended { 100 } else { 0 }, "links": links,
    });
    if let Some(t) = times {
        d["created"] = json!(rfc3339(t.created));
        d["updated"] = json!(rfc3339(t.finished.or(t.started).unwrap_or(t.created)));
        if let Some(s) = t.started {
            d["started"] = json!(rfc3339(s));
        }
        if let Some(f) = t.finished {
            d["finished"] = json!(rfc3339(f));
        }
    }
    d
}

/// Seconds since the epoch as an RFC 3339 UTC time, to the millisecond.
pub fn rfc3339(secs: f64) -> String {
    let millis = (secs.max(0.0) * 1000.0).round() as u64;
    let (days, ms) = (millis / 86_400_000, millis % 86_400_000);
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{frac:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(rfc3339(1_795_795_199.999), "2026-11-27T15:59:59.999Z");
        assert_eq!(rfc3339(4_107_542_400.0), "2100-03-01T00:00:00.000Z");
    }

    fn state(state: Phase, exit_code: Option<i32>, ended: Option<f64>) -> State {
        State { state, exit_code, error: None, started: 10.0, ended }
    }

    #[test]
    fn a_running_job_links_where_to_poll_and_a_successful_one_its_results() {
        let running = status_info("j", "p", &state(Phase::Running, None, None), "http://h/ogcapi/jobs/j");
        assert_eq!(
            (running["status"].as_str(), running["type"].as_str(), running["jobID"].as_str()),
            (Some("running"), Some("process"), Some("j"))
        );
        let rels = |d: &Value| d["links"].as_array().unwrap().iter().map(|l| l["rel"].as_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(rels(&running), ["self", "monitor"]);
        assert!(running.get("finished").is_none());
        let done = status_info("j", "p", &state(Phase::Done, Some(0), Some(11.0)), "http://h/ogcapi/jobs/j");
        assert_eq!(rels(&done), ["self", RESULTS_REL]);
        assert_eq!(
            (done["status"].as_str(), done["finished"].as_str(), done["progress"].as_i64()),
            (Some("successful"), Some("1970-01-01T00:00:11.000Z"), Some(100))
        );
        assert_eq!(done["links"][1]["href"], "http://h/ogcapi/jobs/j/results");
        let failed = status_info("j", "p", &state(Phase::Failed, Some(3), Some(11.0)), "h");
        assert_eq!((failed["status"].as_str(), failed["message"].as_str()), (Some("failed"), Some("the program ended with exit code 3")));
        assert_eq!(rels(&failed), ["self"], "no results link but for success");
        assert_eq!(status_name(Phase::Killed), "dismissed");
        assert_eq!(status_name(Phase::Staging), "accepted");
        let accepted = status_info("j", "p", &state(Phase::Staging, None, None), "h");
        assert!(accepted["created"].is_string() && accepted.get("started").is_none(), "created, not yet started");
    }
}
