//! After a CWL job has exited: its outputs, found by glob inside its output
//! directory only, made the CWL output object. A File is `{"class",
//! "location", "basename", "nameroot", "nameext", "size", "checksum":
//! "sha1$..."}`, its location the job's file URL (a capability, to hand on
//! to another job); a Directory has its `listing`.
//!
//! Nothing outside the output directory is reached: a pattern is relative
//! (or under `runtime.outdir`) without `..`; symlinks are neither followed
//! nor reported, so a job cannot publish `/etc/shadow` by linking to it;
//! files are read through `O_NOFOLLOW`. `*` and `?` do not match a leading
//! '.', as in a shell (and in cwltool).

use std::io::Read;
use std::path::{Component, Path};

use serde_json::{json, Map, Value};

use super::inputs::split_ext;
use super::params::{self, Mode};
use super::tool::{Std, Tool, Type};
use crate::jobs::safe_file::open_beneath;
use crate::wire::url;

/// Most files and directories one output reports (its listings included).
pub const MAX_REPORTED: usize = 10_000;
/// What `loadContents` reads of a file, at most (CWL's limit).
pub const CONTENTS_MAX: u64 = 64 * 1024;

/// The output object of `tool`'s job. `ctx` is the evaluation context
/// (`inputs`, `runtime`); `streams` the names stdout and stderr went to in
/// `outdir`; `files_url` the URL the output directory's files are served under.
pub fn collect(
    tool: &Tool,
    outdir: &Path,
    ctx: &Value,
    streams: (Option<&str>, Option<&str>),
    files_url: &str,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut budget = MAX_REPORTED;
    for o in &tool.outputs {
        let fail = |e: String| format!("output '{}': {e}", o.name);
        let mut patterns = Vec::new();
        match o.std {
            Some(Std::Stdout) => patterns.extend(streams.0.map(str::to_string)),
            Some(Std::Stderr) => patterns.extend(streams.1.map(str::to_string)),
            None => {
                for g in &o.glob {
                    match params::eval(g, ctx, Mode::Reference).map_err(fail)? {
                        Value::String(s) => patterns.push(s),
                        Value::Array(a) => patterns.extend(a.iter().filter_map(|x| x.as_str().map(str::to_string))),
                        Value::Null => {}
                        other => return Err(fail(format!("glob gave {other}, not a pattern"))),
                    }
                }
            }
        }
        let root = ctx["runtime"]["outdir"].as_str().unwrap_or_default();
        let mut found = Vec::new();
        for p in &patterns {
            for rel in glob(outdir, root, p).map_err(fail)? {
                if !found.contains(&rel) {
                    found.push(rel);
                }
            }
        }
        let mut objects = Vec::new();
        for rel in &found {
            objects.push(object(outdir, rel, files_url, o.load_contents, &mut budget).map_err(fail)?);
        }
        let value = match &o.output_eval {
            Some(expr) => {
                let mut c = ctx.clone();
                c["self"] = Value::Array(objects);
                params::eval(expr, &c, Mode::Reference).map_err(fail)?
            }
            None => shape(&o.typ, objects).map_err(fail)?,
        };
        if !o.typ.admits(&value) {
            return Err(fail(format!("{} is not of its type {}", excerpt(&value), super::tool::type_name(&o.typ))));
        }
        out.insert(o.name.clone(), value);
    }
    Ok(out)
}

/// Found files and directories as the output's type wants them.
fn shape(t: &Type, objects: Vec<Value>) -> Result<Value, String> {
    let (optional, core) = match t {
        Type::Union(m) => (m.contains(&Type::Null), m.iter().find(|x| **x != Type::Null).unwrap_or(&Type::Null)),
        t => (false, t),
    };
    match (core, objects.len()) {
        (Type::Array(..), _) => Ok(Value::Array(objects)),
        (_, 0) if optional => Ok(Value::Null),
        (_, 0) => Err("no file matches its glob".into()),
        (_, 1) => Ok(objects.into_iter().next().expect("one")),
        (_, n) => Err(format!("{n} files match its glob; its type takes one")),
    }
}

fn excerpt(v: &Value) -> String {
    v.to_string().chars().take(80).collect()
}

/// The paths (relative to `outdir`, sorted) that `pattern` matches; `root`
/// is `outdir` as the job saw it (`runtime.outdir`), which an absolute pattern must be under.
pub fn glob(outdir: &Path, root: &str, pattern: &str) -> Result<Vec<String>, String> {
    let rel = if Path::new(pattern).is_absolute() {
        match Path::new(pattern).strip_prefix(root) {
            Ok(r) if !root.is_empty() => r.to_string_lossy().into_owned(),
            _ => return Err(format!("glob {pattern:?} is outside the job's output directory")),
        }
    } else {
        pattern.to_string()
    };
    let mut segments = Vec::new();
    for c in Path::new(&rel).components() {
        match c {
            Component::Normal(s) => segments.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return Err(format!("glob {pattern:?} leaves the job's output directory")),
        }
    }
    if segments.is_empty() {
        return Err(format!("glob {pattern:?} names the output directory itself"));
    }
    let mut found = vec![String::new()];
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let mut next = Vec::new();
        for base in &found {
            let dir = outdir.join(base);
            let join = |name: &str| if base.is_empty() { name.to_string() } else { format!("{base}/{name}") };
            if !seg.contains(['*', '?', '[']) {
                let p = dir.join(seg);
                // symlink_metadata: a symlink is neither a file nor a directory here.
                if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir() || last && m.is_file()) {
                    next.push(join(seg));
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
                if m.file_type().is_symlink() || !(m.is_file() || m.is_dir()) || (!last && !m.is_dir()) {
                    continue;
                }
                if matches(seg.as_bytes(), name.as_bytes()) && (!name.starts_with('.') || seg.starts_with('.')) {
                    next.push(join(&name));
                }
            }
        }
        found = next;
    }
    found.sort();
    Ok(found)
}

/// Shell pattern matching: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`.
fn matches(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => matches(&p[1..], s) || (!s.is_empty() && matches(p, &s[1..])),
        (Some(b'?'), Some(_)) => matches(&p[1..], &s[1..]),
        (Some(b'['), Some(&c)) => match p.iter().skip(2).position(|&x| x == b']').map(|i| i + 2) {
            Some(end) => {
                let class = &p[1..end];
                let (negate, class) = match class.first() {
                    Some(b'!' | b'^') => (true, &class[1..]),
                    _ => (false, class),
                };
                let mut hit = false;
                let mut k = 0;
                while k < class.len() {
                    if k + 2 < class.len() && class[k + 1] == b'-' {
                        hit |= class[k] <= c && c <= class[k + 2];
                        k += 3;
                    } else {
                        hit |= class[k] == c;
                        k += 1;
                    }
                }
                hit != negate && matches(&p[end + 1..], &s[1..])
            }
            None => c == b'[' && matches(&p[1..], &s[1..]),
        },
        (Some(&a), Some(&b)) => a == b && matches(&p[1..], &s[1..]),
        _ => false,
    }
}

/// The File or Directory object of `rel` in `outdir`.
pub(super) fn object(outdir: &Path, rel: &str, files_url: &str, load_contents: bool, budget: &mut usize) -> Result<Value, String> {
    if *budget == 0 {
        return Err(format!("more than {MAX_REPORTED} files and directories"));
    }
    *budget -= 1;
    let basename = rel.rsplit('/').next().unwrap_or(rel).to_string();
    let (root, ext) = split_ext(&basename);
    let location = url::join(files_url, &format!("/{}", rel.split('/').map(url::percent_encode).collect::<Vec<_>>().join("/")));
    let meta = std::fs::symlink_metadata(outdir.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
    if meta.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(outdir.join(rel))
            .map_err(|e| format!("{rel}: {e}"))?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_dir())) // no symlinks, FIFOs
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let listing =
            names.iter().map(|n| object(outdir, &format!("{rel}/{n}"), files_url, false, budget)).collect::<Result<Vec<_>, _>>()?;
        return Ok(json!({"class": "Directory", "location": location, "basename": basename, "listing": listing}));
    }
    let mut file = open_beneath(outdir, rel).map_err(|e| format!("{rel}: {e}"))?;
    let mut sha = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    let (mut size, mut head) = (0u64, Vec::new());
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(|e| format!("{rel}: {e}"))?;
        if n == 0 {
            break;
        }
        if load_contents && (head.len() as u64) < CONTENTS_MAX {
            let room = (CONTENTS_MAX as usize - head.len()).min(n);
            head.extend_from_slice(&buf[..room]);
        }
        sha.update(&buf[..n]);
        size += n as u64;
    }
    let checksum: String = sha.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let mut f = json!({"class": "File", "location": location, "basename": basename, "nameroot": root, "nameext": ext,
                       "size": size, "checksum": format!("sha1${checksum}")});
    if load_contents {
        f["contents"] = json!(String::from_utf8_lossy(&head));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outdir() -> tempdir::Dir {
        let d = tempdir::Dir::new();
        std::fs::create_dir_all(d.0.join("d/sub")).unwrap();
        for (p, text) in [("a.txt", "a\n"), ("b.txt", "bb\n"), (".hidden.txt", "h"), ("x.log", "x"), ("d/one", "1"), ("d/sub/two", "22")] {
            std::fs::write(d.0.join(p), text).unwrap();
        }
        std::os::unix::fs::symlink("/etc/passwd", d.0.join("leak.txt")).unwrap();
        std::os::unix::fs::symlink("/etc", d.0.join("etc")).unwrap();
        d
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                let p = std::env::temp_dir().join(format!("mpiws-collect-{}", crate::jobs::new_id()));
                std::fs::create_dir(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn globs_stay_inside_and_skip_symlinks() {
        let d = outdir();
        let root = d.0.to_str().unwrap();
        assert_eq!(glob(&d.0, root, "*.txt").unwrap(), ["a.txt", "b.txt"]);
        assert_eq!(glob(&d.0, root, ".*.txt").unwrap(), [".hidden.txt"]);
        assert_eq!(glob(&d.0, root, "[ab].t?t").unwrap(), ["a.txt", "b.txt"]);
        assert_eq!(glob(&d.0, root, "d/*").unwrap(), ["d/one", "d/sub"]);
        assert_eq!(glob(&d.0, root, &format!("{root}/x.log")).unwrap(), ["x.log"]);
        assert!(glob(&d.0, root, "leak.txt").unwrap().is_empty());
        assert!(glob(&d.0, root, "etc/passwd").unwrap().is_empty());
        assert!(glob(&d.0, root, "etc/*").unwrap().is_empty());
        for bad in ["../x", "/etc/passwd", "d/../../x", "."] {
            assert!(glob(&d.0, root, bad).is_err(), "{bad}");
        }
        assert!(matches(b"[!a]*", b"b.txt") && !matches(b"[!a]*", b"a.txt") && matches(b"*", b""));
    }

    #[test]
    fn the_output_object_has_checksums_and_listings() {
        let d = outdir();
        let tool = Tool::parse(&json!({
            "cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "true", "stdout": "a.txt", "inputs": {},
            "outputs": {
                "one": {"type": "File", "outputBinding": {"glob": "$(inputs.name)"}},
                "all": {"type": "File[]", "outputBinding": {"glob": ["*.txt", "x.log"]}},
                "dir": {"type": "Directory", "outputBinding": {"glob": "d"}},
                "none": {"type": "File?", "outputBinding": {"glob": "*.nothing"}},
                "text": {"type": "string", "outputBinding": {"glob": "b.txt", "loadContents": true, "outputEval": "$(self[0].contents)"}},
                "out": "stdout",
            }
        }))
        .unwrap();
        let ctx = json!({"inputs": {"name": "a.txt"}, "runtime": {"outdir": d.0.to_str().unwrap()}});
        let o = collect(&tool, &d.0, &ctx, (Some("a.txt"), None), "http://h/jobs/J/files").unwrap();
        assert_eq!(
            o["one"],
            json!({"class": "File", "location": "http://h/jobs/J/files/a.txt", "basename": "a.txt", "nameroot": "a",
                                     "nameext": ".txt", "size": 2, "checksum": "sha1$3f786850e387550fdab836ed7e6dc881de23001b"})
        );
        assert_eq!(
            o["all"].as_array().unwrap().iter().map(|f| f["basename"].as_str().unwrap()).collect::<Vec<_>>(),
            ["a.txt", "b.txt", "x.log"]
        );
        assert_eq!(o["dir"]["listing"][1]["listing"][0]["location"], json!("http://h/jobs/J/files/d/sub/two"));
        assert_eq!(o["dir"]["listing"][1]["class"], json!("Directory"));
        assert_eq!(o["none"], json!(null));
        assert_eq!(o["text"], json!("bb\n"));
        assert_eq!(o["out"]["basename"], json!("a.txt"));
        let missing = Tool::parse(&json!({"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "true", "inputs": {},
                                          "outputs": {"f": {"type": "File", "outputBinding": {"glob": "*.txt"}}}}))
        .unwrap();
        let e = collect(&missing, &d.0, &ctx, (None, None), "http://h").unwrap_err();
        assert!(e.contains("output 'f': 2 files match"), "{e}");
        assert_eq!(url::percent_encode("a b/ü"), "a%20b%2F%C3%BC");
    }
}
