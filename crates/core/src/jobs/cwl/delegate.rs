//! CWL documents this endpoint's own engine does not run (JavaScript,
//! `InitialWorkDirRequirement`, `ShellCommandRequirement`, records,
//! workflows, `ExpressionTool`s, packed `$graph`s ...) run by the CWL
//! runner the endpoint was given (`mpiws serve --cwl-runner`; cwltool, the
//! reference, by default): each job is one run of it, inside the job's
//! directory, under the job's limits, as any other program's.
//!
//! The rules that keep this as safe as the endpoint's own engine:
//! - The deployed document is the rule, as for every program; it holds no
//!   way out of the job: no `$include` or `$mixin`, `$import` only of a part
//!   of itself (`#id`: a deployer packs the document, `cwltool --pack`), and
//!   `$schemas` and a File's or Directory's `location` only as the name of one
//!   of its own files, which it carries (`ATTACHED`) and which are written
//!   beside it in the job's `doc/`. The runner reads nothing but the document,
//!   its files and the job object.
//! - The client's job object is checked as for the own engine, but by shape
//!   rather than type (the runner checks types): each File and Directory is
//!   staged into `in/K/` (a File's `secondaryFiles` beside it), from an
//!   upload, a URL under the fetch rules, or its `contents`; the runner sees
//!   them as paths in the job's directory.
//! - The runner's options are the deployer's (`--cwl-runner`), and where it
//!   writes (`--outdir out/`, temporary directories in `tmp/`) this file's;
//!   nothing from the client becomes one.
//! - Its output object (its stdout) names files; each must be inside `out/`
//!   and is described again from the disk (`collect::object`: no symlinks,
//!   sizes and checksums as they are), its location the job's file URL.
//! - The runner links what it stages into `out/` (an `InitialWorkDirRequirement`
//!   entry) to the job's own files; such a link becomes the file it names
//!   ([`settle_links`]) when that is inside the job's directory, and stays a
//!   link, never reported nor served, when it leads anywhere else.

use std::path::Path;

use serde_json::{Map, Value};

use super::collect::{object, MAX_REPORTED};
use super::inputs::{check_basename, split_ext, Checker, Stage, LITERAL};
use super::{OUT, TMP};
use crate::wire::url::decode_path;

/// Where the job's directory holds the document and its own files, for the runner.
pub const DOCUMENT_DIR: &str = "doc";
/// The document there.
pub const DOCUMENT: &str = "doc/document.cwl";
/// The job object as the runner reads it.
pub const JOB: &str = "job.json";
/// Most of the runner's output object that is read.
pub const MAX_OUTPUT: u64 = 16 << 20;

/// The key under which a document carries its own files (`{NAME: BASE64}`): taken
/// out of it at deploy and written beside it for each job, where its
/// references (`location: NAME`, `$schemas: [NAME]`) find them.
pub const ATTACHED: &str = "mpiws:attached";
/// Most a document's own files may weigh together.
pub const MAX_ATTACHED: usize = 64 << 20;

/// The document's own files (`ATTACHED`), taken out of it; refused, saying why,
/// if one is not a plain name or not base64, or they weigh too much.
pub fn take_attached(doc: &mut Value) -> Result<Vec<(String, Vec<u8>)>, String> {
    use base64::Engine;
    let Some(Value::Object(files)) = doc.as_object_mut().and_then(|d| d.remove(ATTACHED)) else { return Ok(vec![]) };
    let mut total = 0usize;
    let mut out = vec![];
    for (name, data) in files {
        check_basename(&name, ATTACHED)?;
        let bytes = data
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .ok_or_else(|| format!("{ATTACHED}: {name:?} is not base64"))?;
        total = total.saturating_add(bytes.len());
        if total > MAX_ATTACHED {
            return Err(format!("{ATTACHED}: a document's own files weigh at most {} MiB together", MAX_ATTACHED >> 20));
        }
        out.push((name, bytes));
    }
    Ok(out)
}

/// Refused, saying why, if the document reaches outside itself and its own
/// files `attached` (see the module's doc).
pub fn check_document(doc: &Value, attached: &[(String, Vec<u8>)]) -> Result<(), String> {
    let own = |v: &Value| v.as_str().is_some_and(|n| attached.iter().any(|(a, _)| a == n));
    let walk = |v: &Value| -> Result<(), String> {
        let mut stack = vec![(v, String::new())];
        while let Some((v, at)) = stack.pop() {
            match v {
                Value::Object(o) => {
                    for (k, x) in o {
                        // `$import: "#id"` names a part of this document (as `cwltool --pack` writes them);
                        // `$schemas` and a File's or Directory's `location` may name its own files.
                        let fine = match k.as_str() {
                            "$import" => x.as_str().is_some_and(|r| r.starts_with('#')),
                            "$schemas" => x.as_array().is_some_and(|a| a.iter().all(own)),
                            "$include" | "$mixin" => false,
                            "location" | "path" if matches!(o.get("class").and_then(Value::as_str), Some("File" | "Directory")) => own(x),
                            _ => true,
                        };
                        if !fine {
                            return Err(format!(
                                "{at}: {k} reaches outside the document (pack it: cwltool --pack; its own files under {ATTACHED})"
                            ));
                        }
                        stack.push((x, format!("{at}/{k}")));
                    }
                }
                Value::Array(a) => stack.extend(a.iter().enumerate().map(|(i, x)| (x, format!("{at}/{i}")))),
                _ => {}
            }
        }
        Ok(())
    };
    if !doc.is_object() {
        return Err("a CWL document is an object".into());
    }
    walk(doc)
}

/// The key of a job object's own requirements, as the runner reads it.
pub const JOB_REQUIREMENTS: &str = "cwl:requirements";

/// The client's job object checked by shape, and what to stage (see the module's doc).
/// Its names are plain: the runner would read `cwl:requirements` (code of the
/// client's: expressions, environment), unless `own_requirements` lets it
/// (`Limits::cwl_client_requirements`), and `$include` (a file of the endpoint's).
pub fn check_job(mut given: Map<String, Value>, own_requirements: bool) -> Result<(Map<String, Value>, Vec<Stage>), String> {
    let requirements = if own_requirements { given.remove(JOB_REQUIREMENTS) } else { None };
    fn plain(v: &Value, at: &str) -> Result<(), String> {
        match v {
            Value::Object(o) => o.iter().try_for_each(|(k, x)| {
                if k.starts_with('$') || k.contains(':') || k.contains('#') {
                    return Err(format!("{at}: {k:?} is not an input's name or a value's field (no $-directives, no cwl: fields)"));
                }
                plain(x, &format!("{at}.{k}"))
            }),
            Value::Array(a) => a.iter().try_for_each(|x| plain(x, at)),
            _ => Ok(()),
        }
    }
    plain(&Value::Object(given.clone()), "the job")?;
    if let Some(r) = &requirements {
        plain(r, JOB_REQUIREMENTS)?;
    }
    let mut c = Checker::default();
    c.literals = true;
    let mut job: Map<String, Value> =
        given.into_iter().map(|(k, v)| Ok((k.clone(), c.any(v, &format!("input '{k}'"))?))).collect::<Result<_, String>>()?;
    if let Some(r) = requirements {
        job.insert(JOB_REQUIREMENTS.into(), r);
    }
    Ok((job, c.stages))
}

/// The resolved job object (`inputs::resolve`) as the runner reads it: a Directory
/// the client gave as a literal (a listing, no location) stays one, so that the
/// runner makes it from its listing and keeps that listing whatever `loadListing` says.
pub fn as_the_runner_reads(v: Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.into_iter().map(as_the_runner_reads).collect()),
        Value::Object(mut o) => {
            if o.remove(LITERAL).is_some() {
                o.remove("location");
                o.remove("path");
            }
            Value::Object(o.into_iter().map(|(k, x)| (k, as_the_runner_reads(x))).collect())
        }
        other => other,
    }
}

/// The command line of a job in `dir`: the runner, where it writes, the document and the job.
pub fn argv(runner: &[String], dir: &Path) -> Vec<String> {
    let at = |p: &str| dir.join(p).to_string_lossy().into_owned();
    let mut argv = runner.to_vec();
    argv.extend([
        "--outdir".into(),
        at(OUT),
        "--tmpdir-prefix".into(),
        at(&format!("{TMP}/t")),
        "--tmp-outdir-prefix".into(),
        at(&format!("{TMP}/o")),
        at(DOCUMENT),
        at(JOB),
    ]);
    argv
}

/// Each symlink under `outdir` that leads to a file or directory inside `job_dir`
/// replaced by a copy of it (a hard link for a file), so that it is reported and
/// served as the job's own; links leading elsewhere, or to what holds them, stay.
pub fn settle_links(job_dir: &Path, outdir: &Path) -> Result<(), String> {
    let root = std::fs::canonicalize(job_dir).map_err(|e| format!("the job's directory: {e}"))?;
    let mut budget = MAX_REPORTED;
    settle_in(&root, outdir, &mut budget)
}

fn settle_in(root: &Path, dir: &Path, budget: &mut usize) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
        count(budget)?;
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            if let Some(target) = leads_inside(root, &path) {
                std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                copy_in(root, &target, &path, budget)?;
            }
        }
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            settle_in(root, &path, budget)?;
        }
    }
    Ok(())
}

/// Where the link `path` leads, if that is inside `root` and does not hold the link itself.
fn leads_inside(root: &Path, path: &Path) -> Option<std::path::PathBuf> {
    let target = std::fs::canonicalize(path).ok()?; // none when dangling
    let holder = std::fs::canonicalize(path.parent()?).ok()?;
    (target.starts_with(root) && !holder.starts_with(&target)).then_some(target)
}

fn count(budget: &mut usize) -> Result<(), String> {
    *budget = budget.checked_sub(1).ok_or_else(|| format!("more than {MAX_REPORTED} files and directories"))?;
    Ok(())
}

/// `from` (a file or a directory) made at `to`, the links inside it settled as above.
fn copy_in(root: &Path, from: &Path, to: &Path, budget: &mut usize) -> Result<(), String> {
    let m = std::fs::metadata(from).map_err(|e| format!("{}: {e}", from.display()))?;
    let at = |e: std::io::Error| format!("{}: {e}", to.display());
    if m.is_file() {
        return std::fs::hard_link(from, to).or_else(|_| std::fs::copy(from, to).map(drop)).map_err(at);
    }
    if !m.is_dir() {
        return Ok(()); // a FIFO or a socket: nothing to report
    }
    std::fs::create_dir(to).map_err(at)?;
    for e in std::fs::read_dir(from).map_err(at)?.flatten() {
        count(budget)?;
        let src = e.path();
        let src = if e.file_type().is_ok_and(|t| t.is_symlink()) {
            match leads_inside(root, &src) {
                Some(t) => t,
                None => continue,
            }
        } else {
            src
        };
        copy_in(root, &src, &to.join(e.file_name()), budget)?;
    }
    Ok(())
}

/// The runner's output object (`printed`, its stdout) with each File and
/// Directory described again from `outdir`, located under `files_url`.
pub fn collect(printed: &str, outdir: &Path, files_url: &str) -> Result<Map<String, Value>, String> {
    if printed.trim().is_empty() {
        return Err("the CWL runner gave no output object (its stderr says why)".into());
    }
    let v: Value = serde_json::from_str(printed).map_err(|e| format!("the CWL runner printed no output object: {e}"))?;
    let Value::Object(o) = v else { return Err("the CWL runner's output is not an object".into()) };
    let mut budget = MAX_REPORTED;
    o.into_iter()
        .map(|(k, v)| Ok((k.clone(), again(v, outdir, files_url, &mut budget).map_err(|e| format!("output '{k}': {e}"))?)))
        .collect()
}

fn again(v: Value, outdir: &Path, files_url: &str, budget: &mut usize) -> Result<Value, String> {
    match v {
        Value::Array(a) => a.into_iter().map(|x| again(x, outdir, files_url, budget)).collect::<Result<_, _>>().map(Value::Array),
        Value::Object(o) if matches!(o.get("class").and_then(Value::as_str), Some("File" | "Directory")) => {
            let rel = inside(&o, outdir)?;
            let mut fresh = object(outdir, &rel, files_url, false, budget)?;
            // The name it goes by, where it differs from the file's (cwltool renames
            // a second `a.txt` in its output directory `a.txt_2`, and says `a.txt`).
            if let Some(name) = o.get("basename").and_then(Value::as_str).filter(|n| check_basename(n, "").is_ok()) {
                if fresh["class"] == "File" {
                    let (root, ext) = split_ext(name);
                    (fresh["nameroot"], fresh["nameext"]) = (root.into(), ext.into());
                }
                fresh["basename"] = name.into();
            }
            for k in ["format", "contents"] {
                if let Some(x) = o.get(k).filter(|x| x.is_string()) {
                    fresh[k] = x.clone();
                }
            }
            if let Some(Value::Array(s)) = o.get("secondaryFiles") {
                let s = s.iter().map(|x| again(x.clone(), outdir, files_url, budget)).collect::<Result<Vec<_>, _>>()?;
                fresh["secondaryFiles"] = Value::Array(s);
            }
            Ok(fresh)
        }
        Value::Object(o) => {
            o.into_iter().map(|(k, x)| Ok((k, again(x, outdir, files_url, budget)?))).collect::<Result<_, _>>().map(Value::Object)
        }
        other => Ok(other),
    }
}

/// Where a reported File or Directory is, relative to `outdir`; an error if it is not inside.
fn inside(o: &Map<String, Value>, outdir: &Path) -> Result<String, String> {
    let path = match (o.get("path").and_then(Value::as_str), o.get("location").and_then(Value::as_str)) {
        (Some(p), _) => p.to_string(),
        (None, Some(l)) if l.starts_with("file:///") => {
            let segments: Vec<&str> = l["file:///".len()..].split('/').collect();
            format!("/{}", decode_path(&segments).ok_or_else(|| format!("{l:?} is not a file inside the job's output directory"))?)
        }
        _ => return Err("a file the CWL runner reported has no local path".into()),
    };
    let rel = Path::new(&path).strip_prefix(outdir).map_err(|_| format!("{path:?} is not in the job's output directory"))?;
    let ok = rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    match rel.to_str() {
        Some(r) if ok && !r.is_empty() => Ok(r.to_string()),
        _ => Err(format!("{path:?} is not a file inside the job's output directory")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::inputs;
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_that_reaches_outside_itself_is_refused() {
        let ok = json!({"class": "CommandLineTool", "inputs": [{"id": "#main/f", "type": "File",
                        "default": {"class": "File", "contents": "x", "basename": "a.py"}}], "outputs": []});
        assert!(check_document(&ok, &[]).is_ok());
        assert!(check_document(&json!({"requirements": [{"class": "SchemaDefRequirement", "types": [{"$import": "#types.yml"}]}]}), &[])
            .is_ok());
        let mut with_files = json!({"$schemas": ["EDAM.owl"], "inputs": [{"default": {"class": "File", "location": "a.py"}}],
                                    "mpiws:attached": {"EDAM.owl": "PHJkZi8+", "a.py": "cHJpbnQoMSk="}});
        let files = take_attached(&mut with_files).unwrap();
        assert!(with_files.get(ATTACHED).is_none() && files[1] == ("a.py".to_string(), b"print(1)".to_vec()));
        assert!(check_document(&with_files, &files).is_ok(), "its own files");
        assert!(check_document(&with_files, &files[..1]).unwrap_err().contains("location reaches outside"));
        for bad in [json!({ATTACHED: {"../x": ""}}), json!({ATTACHED: {"x": "%%%"}})] {
            assert!(take_attached(&mut bad.clone()).is_err(), "{bad}");
        }
        for (doc, why) in [
            (json!({"class": "Workflow", "requirements": [{"$import": "types.yml"}]}), "$import"),
            (json!({"class": "CommandLineTool", "$schemas": ["http://edamontology.org/EDAM.owl"]}), "$schemas"),
            (json!({"inputs": [{"default": {"class": "File", "location": "file:///etc/passwd"}}]}), "location reaches outside"),
            (json!({"steps": [{"in": {"d": {"default": {"class": "Directory", "path": "/root"}}}}]}), "path reaches outside"),
            (json!(["a list"]), "an object"),
        ] {
            let e = check_document(&doc, &[]).unwrap_err();
            assert!(e.contains(why), "{doc}: {e}");
        }
    }

    #[test]
    fn job_files_anywhere_are_staged_and_secondary_files_beside_theirs() {
        let given = json!({
            "n": 3, "rec": {"a": {"class": "File", "contents": "x", "basename": "a.txt", "format": "http://edam/format_1"}},
            "f": {"class": "File", "location": "http://h/files/u1", "basename": "r.bam",
                  "secondaryFiles": [{"class": "File", "location": "http://h/files/u2", "basename": "r.bam.bai"}]},
        });
        let (job, stages) = check_job(given.as_object().unwrap().clone(), false).unwrap();
        assert_eq!(job["n"], json!(3));
        assert_eq!(job["rec"]["a"]["format"], json!("http://edam/format_1"));
        let primary = job["f"]["path"].as_str().unwrap();
        let secondary = job["f"]["secondaryFiles"][0]["path"].as_str().unwrap();
        assert_eq!(Path::new(primary).parent(), Path::new(secondary).parent(), "{job:?}");
        assert_eq!(stages.len(), 3);
        let own = json!({"n": 1, "cwl:requirements": [{"class": "EnvVarRequirement", "envDef": {"X": "$(1 + 1)"}}]});
        let (job, _) = check_job(own.as_object().unwrap().clone(), true).unwrap();
        assert_eq!(job["cwl:requirements"][0]["envDef"]["X"], json!("$(1 + 1)"), "the endpoint's own user's");
        let sneaky = json!({"cwl:requirements": [{"$include": "/etc/passwd"}]});
        assert!(check_job(sneaky.as_object().unwrap().clone(), true).unwrap_err().contains("no $-directives"));
        let dirs = json!({"lit": {"class": "Directory", "basename": "d", "listing": [{"class": "File", "contents": "x", "basename": "a"}]},
                          "real": {"class": "Directory", "basename": "e", "location": "file:///home/u/e", "listing": []}});
        let (job, _) = check_job(dirs.as_object().unwrap().clone(), false).unwrap();
        let read = as_the_runner_reads(inputs::resolve(&Value::Object(job), Path::new("/w/j")));
        assert!(read["lit"].get("location").is_none() && read["lit"]["listing"][0]["path"] == json!("/w/j/in/0/d/a"), "{read}");
        assert_eq!(read["real"]["location"], json!("file:///w/j/in/1/e"), "a directory of the client's stays one");
        assert!(read["lit"].get(LITERAL).is_none());
        for (bad, why) in [
            (json!({"f": {"class": "File", "path": "/etc/passwd"}}), "location"),
            (json!({"f": {"class": "File", "contents": "x", "basename": "../x"}}), "not a plain file name"),
            (json!({"f": {"class": "File", "contents": "x", "secondaryFiles": "no"}}), "secondaryFiles is a list"),
            (json!({"cwl:requirements": [{"class": "EnvVarRequirement"}]}), "no cwl: fields"),
            (json!({"x": {"$include": "/etc/passwd"}}), "no $-directives"),
            (json!({"x": [{"$import": "/etc/passwd"}]}), "no $-directives"),
        ] {
            let e = check_job(bad.as_object().unwrap().clone(), false).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_runners_outputs_are_described_again_and_only_from_inside_the_output_directory() {
        let d = std::env::temp_dir().join(format!("mpiws-delegate-{}", std::process::id()));
        let out = d.join(OUT);
        std::fs::create_dir_all(out.join("dir")).unwrap();
        std::fs::write(out.join("a b.txt"), "hello").unwrap();
        std::fs::write(out.join("dir/x"), "1").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", out.join("leak")).unwrap();
        let at = |p: &str| format!("file://{}/{p}", out.display());
        let printed = json!({
            "t": {"class": "File", "location": at("a%20b.txt"), "size": 999, "format": "fmt", "basename": "a.txt"},
            "d": {"class": "Directory", "location": at("dir")}, "n": 1, "none": null,
        })
        .to_string();
        let o = collect(&printed, &out, "http://e/jobs/J/files").unwrap();
        assert_eq!(o["t"]["size"], json!(5), "sizes are the disk's, not the runner's word");
        assert_eq!(o["t"]["location"], json!("http://e/jobs/J/files/a%20b.txt"));
        assert_eq!(o["t"]["format"], json!("fmt"));
        assert_eq!((o["t"]["basename"].clone(), o["t"]["nameroot"].clone()), (json!("a.txt"), json!("a")), "the name it goes by");
        assert_eq!(o["d"]["listing"][0]["basename"], json!("x"));
        assert_eq!((o["n"].clone(), o["none"].clone()), (json!(1), json!(null)));
        for (bad, why) in [
            (json!({"x": {"class": "File", "location": "file:///etc/passwd"}}), "not in the job's output directory"),
            (json!({"x": {"class": "File", "location": at("../../etc/passwd")}}), "not a file inside"),
            (json!({"x": {"class": "File", "location": at("leak")}}), "leak"),
            (json!({"x": {"class": "File", "location": "http://elsewhere/x"}}), "no local path"),
            (json!([1]), "not an object"),
        ] {
            let e = collect(&bad.to_string(), &out, "http://e/jobs/J/files").unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn links_to_the_jobs_own_files_become_files_and_others_stay_links() {
        let d = std::env::temp_dir().join(format!("mpiws-settle-{}", std::process::id()));
        let (out, doc) = (d.join(OUT), d.join(DOCUMENT_DIR));
        std::fs::create_dir_all(out.join("dir")).unwrap();
        std::fs::create_dir_all(doc.join("tree/sub")).unwrap();
        std::fs::write(doc.join("f1"), "one").unwrap();
        std::fs::write(doc.join("tree/sub/f2"), "two").unwrap();
        std::os::unix::fs::symlink(doc.join("f1"), doc.join("tree/to-f1")).unwrap();
        std::os::unix::fs::symlink(&d, doc.join("tree/up")).unwrap(); // holds the tree: not copied
        std::os::unix::fs::symlink(doc.join("f1"), out.join("dir/a")).unwrap();
        std::os::unix::fs::symlink("../../doc/tree", out.join("dir/t")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", out.join("leak")).unwrap();
        std::os::unix::fs::symlink(&d, out.join("whole")).unwrap();
        std::os::unix::fs::symlink(out.join("nowhere"), out.join("dangling")).unwrap();
        settle_links(&d, &out).unwrap();
        let kind = |p: &str| std::fs::symlink_metadata(out.join(p)).unwrap().file_type();
        assert!(kind("dir/a").is_file() && std::fs::read_to_string(out.join("dir/a")).unwrap() == "one");
        assert!(kind("dir/t").is_dir() && kind("dir/t/to-f1").is_file() && kind("dir/t/sub/f2").is_file());
        assert!(std::fs::symlink_metadata(out.join("dir/t/up")).is_err(), "a link to what holds it is left out");
        for link in ["leak", "whole", "dangling"] {
            assert!(kind(link).is_symlink(), "{link} stays a link (collect neither reports nor follows it)");
        }
        let printed = json!({"a": {"class": "File", "path": out.join("dir/a")}}).to_string();
        assert_eq!(collect(&printed, &out, "http://e/jobs/J/files").unwrap()["a"]["size"], json!(3));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
