//! The endpoint part of a dashboard's document: what it deploys, the
//! instances it hosts (with the CPU and memory of the process running
//! each), its jobs (with the tail of their output), and its limits in use
//! against their bounds. Read when a page asks, never kept.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{json, Value};

use crate::jobs::process_group::Stat;
use crate::keys::Key;
use crate::service::endpoint::Found;
use crate::service::Endpoint;

/// How much of a job's stdout is shown, at most (its end).
const STDOUT_TAIL: u64 = 2048;
/// How many of a job's file names are listed, at most.
const FILES_LISTED: usize = 50;

fn process(pid: libc::pid_t) -> Value {
    match Stat::usage(pid) {
        Some((cpu, rss)) => json!({"pid": pid, "cpu_seconds": cpu, "rss_bytes": rss}),
        None => json!({"pid": pid, "cpu_seconds": null, "rss_bytes": null}),
    }
}

/// The end of the file at `path` (at most `STDOUT_TAIL` bytes), as text.
fn tail(path: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map_or(0, |m| m.len());
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(STDOUT_TAIL))).is_ok() {
        let _ = f.take(STDOUT_TAIL).read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The names of the regular files directly in `dir` (a job's outputs), sorted, at most `FILES_LISTED`.
fn files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names.truncate(FILES_LISTED);
    names
}

fn limit(name: &str, used: u64, bound: u64, unit: &str) -> Value {
    json!({"name": name, "flag": format!("--{}", name.replace('_', "-")), "used": used, "bound": bound, "unit": unit})
}

/// The endpoint's part, as `caller` (a key with `admin`) may see it.
pub fn endpoint(ep: &Endpoint, caller: &Key, streams: u64) -> Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let own = std::process::id() as libc::pid_t;
    let mut live = 0u64;
    let mut children_rss = 0u64;
    let mut instances: Vec<Value> = ep
        .shown()
        .into_iter()
        .map(|shown| {
            let (status, size) = match &shown.found {
                Found::Live(i) => (i.status(), i.size()),
                Found::Ended(e) => (e.status.clone(), e.traffic.sent.len() as u32),
            };
            if !status.state.is_final() {
                live += 1;
            }
            let mut v = json!({
                "domain": status.domain, "rank": status.rank, "size": size, "service": status.service,
                "state": status.state.name(), "age_seconds": shown.age.as_secs_f64(), "isolated": shown.pid.is_some(),
            });
            // An instance in this process shares its figures: they are the endpoint's own, shown once.
            if let Some(pid) = shown.pid {
                let p = process(pid);
                children_rss += p["rss_bytes"].as_u64().unwrap_or(0);
                for k in ["pid", "cpu_seconds", "rss_bytes"] {
                    v[k] = p[k].clone();
                }
            }
            v
        })
        .collect();
    instances.sort_by(|a, b| (a["domain"].as_str(), a["rank"].as_u64()).cmp(&(b["domain"].as_str(), b["rank"].as_u64())));
    let base = ep.url();
    let jobs: Vec<Value> = ep
        .jobs
        .jobs_of(caller)
        .iter()
        .map(|job| {
            // What `GET /jobs/{id}` says of it, and what the page adds.
            let mut v = job.describe(&base);
            let runtime = v["ended"].as_f64().unwrap_or(now) - v["started"].as_f64().unwrap_or(now);
            v["runtime_seconds"] = json!(runtime);
            v["disk_bytes"] = json!(job.disk_bytes());
            v["stdout_tail"] = json!(tail(&job.stdout_path()));
            v["files"] = json!(files(&job.workdir()));
            v
        })
        .collect();
    let c = &ep.config;
    let (disk, _) = ep.jobs.disk.used(None);
    let (buffered, max_buffered) = ep.buffered.used();
    let mut limits = vec![
        limit("max_instances", live, c.max_instances as u64, "count"),
        limit("max_jobs", ep.jobs.count() as u64, c.jobs.max_jobs as u64, "count"),
        limit("max_disk", disk, c.jobs.max_disk, "bytes"),
        limit("max_buffered", buffered, max_buffered, "bytes"),
        limit("max_dashboard_streams", streams, c.max_dashboard_streams as u64, "count"),
    ];
    if c.sandbox.is_some() {
        limits.push(limit("max_instances_memory", children_rss, c.max_instances_memory, "bytes"));
    }
    json!({
        "url": crate::wire::url::without_pin(&ep.url()), "mpiws": env!("CARGO_PKG_VERSION"), "now": now,
        "services": ep.services(),
        "programs": ep.jobs.programs().iter().map(|p| json!({"name": p.name, "kind": p.kind()})).collect::<Vec<_>>(),
        "process": process(own), "instances": instances, "jobs": jobs, "limits": limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_is_the_files_end_and_files_are_regular_ones_only() {
        let dir = std::env::temp_dir().join(format!("mpiws-view-{}", crate::jobs::new_id()));
        std::fs::create_dir(&dir).unwrap();
        let out = dir.join("stdout");
        std::fs::write(&out, format!("{}END", "x".repeat(5000))).unwrap();
        let t = tail(&out);
        assert_eq!(t.len() as u64, STDOUT_TAIL);
        assert!(t.ends_with("END"));
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join(".hidden"), "").unwrap();
        std::os::unix::fs::symlink(&out, dir.join("link")).unwrap();
        assert_eq!(files(&dir), vec!["stdout"]);
        assert_eq!(tail(&dir.join("missing")), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
