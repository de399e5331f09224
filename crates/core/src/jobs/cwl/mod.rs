//! **CWL v1.2 `CommandLineTool`s as programs.** A deployer gives a tool
//! document (`mpiws serve --program-cwl tool.cwl`; the Python side only
//! turns its YAML into JSON); clients spawn jobs of it with a CWL job object
//! as their inputs, and its results are the CWL output object. The
//! document is the rule that lets a client's values become command-line
//! words and files: the command line is built here, on the endpoint, never
//! taken from the client.
//!
//! - [`tool`]: the document parsed and checked into typed rules; what is not
//!   supported is refused at deploy, by name.
//! - [`params`]: parameter references `$(inputs.x.path)`, no JavaScript.
//! - [`inputs`]: the client's job object checked against the tool's inputs,
//!   and where its Files and Directories are staged.
//! - [`argv`]: the command line, by CWL's binding and ordering rules.
//! - [`collect`]: the output object, by glob inside the output directory.
//! - [`delegate`]: what the engine here does not run, run by the CWL runner
//!   the endpoint was given (cwltool), inside the job's directory.
//!
//! Supported: `baseCommand`, `arguments`, `inputBinding` (`position`,
//! `prefix`, `separate`, `itemSeparator`, `valueFrom` as references),
//! inputs and outputs of types null, boolean, int, long, float, double,
//! string, enum, File, Directory, Any, arrays and unions (`T?`), defaults,
//! `stdin`/`stdout`/`stderr` and `type: stdout|stderr`, `outputBinding`
//! (`glob` with references, `loadContents`, `outputEval` as a reference),
//! `successCodes`, `EnvVarRequirement`; `ResourceRequirement`,
//! `NetworkAccess`, `WorkReuse` accepted (nothing to do); every hint
//! ignored. Not: JavaScript (`InlineJavascriptRequirement`, `${...}`),
//! `ShellCommandRequirement`, `InitialWorkDirRequirement`, containers,
//! records, `secondaryFiles`, File defaults.
//!
//! A job's directory: `out/` (its working and output directory,
//! `runtime.outdir`), `tmp/` (`runtime.tmpdir`), `in/K/BASENAME` (its
//! staged inputs, outside `out/` so that a glob never reports them). It
//! runs with a cleared environment (`PATH` kept, `HOME` = `out/`, `TMPDIR`
//! = `tmp/`, plus `EnvVarRequirement`'s), as cwltool runs a tool.

pub mod argv;
pub mod collect;
pub mod delegate;
pub mod inputs;
pub mod params;
pub mod tool;

use std::path::Path;

use serde_json::{json, Value};

pub use tool::Tool;

use params::Mode;

/// The working (and output) directory of a CWL job, inside its directory.
pub const OUT: &str = "out";
/// Its `runtime.tmpdir`.
pub const TMP: &str = "tmp";

/// What a job runs: its command line and where its streams go.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The file stdin reads, relative to the job's directory.
    pub stdin: Option<String>,
    /// The names stdout and stderr are written to in `out/`, if the tool captures them.
    pub stdout: Option<String>,
    pub stderr: Option<String>,
}

/// `runtime` of a job in `dir` (cores and sizes as cwltool reports them by default).
pub fn runtime(dir: &Path) -> Value {
    json!({
        "outdir": dir.join(OUT).to_string_lossy(), "tmpdir": dir.join(TMP).to_string_lossy(),
        "cores": 1, "ram": 256, "outdirSize": 1024, "tmpdirSize": 1024,
    })
}

/// The job's launch from its tool and resolved job object (see
/// [`inputs::resolve`]); `id` names a captured stream the tool leaves unnamed.
pub fn launch(tool: &Tool, inputs: &Value, dir: &Path, id: &str) -> Result<Launch, String> {
    let rt = runtime(dir);
    let ctx = argv::context(inputs, &rt);
    let argv = argv::build(tool, inputs, &rt)?;
    let name = |field: &Option<String>, std: tool::Std| -> Result<Option<String>, String> {
        let given = match field {
            Some(expr) => Some(text(expr, &ctx)?),
            None if tool.outputs.iter().any(|o| o.std == Some(std)) => {
                Some(format!("{id}{}", if std == tool::Std::Stderr { ".err" } else { "" }))
            }
            None => None,
        };
        if let Some(n) = &given {
            if n.is_empty() || n.contains('/') || n == "." || n == ".." || n.contains('\0') {
                return Err(format!("a captured stream's file name {n:?} is not a plain file name"));
            }
        }
        Ok(given)
    };
    let stdout = name(&tool.stdout, tool::Std::Stdout)?;
    let stderr = name(&tool.stderr, tool::Std::Stderr)?;
    let stdin = match &tool.stdin {
        None => None,
        Some(expr) => {
            let path = text(expr, &ctx)?;
            let rel = Path::new(&path).strip_prefix(dir).ok().map(|r| r.to_string_lossy().into_owned());
            Some(rel.ok_or_else(|| format!("stdin {path:?} is not a file of the job (give $(inputs.NAME.path))"))?)
        }
    };
    let mut env = vec![
        ("PATH".to_string(), std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())),
        ("HOME".to_string(), rt["outdir"].as_str().unwrap_or_default().to_string()),
        ("TMPDIR".to_string(), rt["tmpdir"].as_str().unwrap_or_default().to_string()),
    ];
    for (k, v) in &tool.env {
        let v = text(v, &ctx)?;
        if v.contains('\0') {
            return Err(format!("environment variable {k} holds a NUL byte"));
        }
        env.retain(|(name, _)| name != k);
        env.push((k.clone(), v));
    }
    Ok(Launch { argv, env, stdin, stdout, stderr })
}

/// An expression that gives text (a file name, an environment value).
fn text(expr: &str, ctx: &Value) -> Result<String, String> {
    match params::eval(expr, ctx, Mode::Reference)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("{expr:?} gives {other}, not a text")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_environment_and_stdin() {
        let tool = Tool::parse(&json!({
            "cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": ["wc", "-l"],
            "requirements": [{"class": "EnvVarRequirement", "envDef": [{"envName": "LABEL", "envValue": "$(inputs.f.nameroot)"}]}],
            "stdin": "$(inputs.f.path)", "stdout": "$(inputs.f.nameroot).count",
            "inputs": {"f": "File"}, "outputs": {"count": "stdout", "err": "stderr"}
        }))
        .unwrap();
        let dir = Path::new("/w/jobs/J");
        let f = inputs::resolve(&json!({"f": {"class": "File", "basename": "r.txt", "path": "in/0/r.txt"}}), dir);
        let l = launch(&tool, &f, dir, "J").unwrap();
        assert_eq!(l.argv, ["wc", "-l"]);
        assert_eq!(l.stdin.as_deref(), Some("in/0/r.txt"));
        assert_eq!(l.stdout.as_deref(), Some("r.count"));
        assert_eq!(l.stderr.as_deref(), Some("J.err"));
        assert!(l.env.contains(&("LABEL".into(), "r".into())) && l.env.contains(&("HOME".into(), "/w/jobs/J/out".into())));
        let bad = Tool::parse(&json!({"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "cat", "stdin": "/etc/passwd",
                                      "stdout": "$(inputs.n)", "inputs": {"n": "string"}, "outputs": {}}))
        .unwrap();
        let e = launch(&bad, &json!({"n": "../x"}), dir, "J").unwrap_err();
        assert!(e.contains("not a plain file name"), "{e}");
        let e = launch(&bad, &json!({"n": "x"}), dir, "J").unwrap_err();
        assert!(e.contains("stdin \"/etc/passwd\" is not a file of the job"), "{e}");
    }
}
