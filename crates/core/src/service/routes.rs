//! The HTTP face's one route table: each operation's method, path, the
//! credential it needs and the operation itself. The server finds a
//! request's route here ([`find`]), checks its credential before anything
//! else, then runs its operation. A path served with other methods is
//! answered 405 with `Allow`, after the credential its routes need (the
//! first that needs one): a caller without it learns nothing more. A path
//! no route has is 404. `docs/openapi.yaml` documents the same table.

use http::Method;

use crate::keys::Scope;

/// What a route asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing (`GET /`, which shows more to a key or token holder).
    Nothing,
    /// An endpoint key with this scope.
    Key(Scope),
    /// An endpoint key with this scope, or with `admin`: acting on jobs and
    /// uploads that exist (list, watch, read results, kill, remove), which
    /// are their own key's, and every one `admin`'s.
    KeyOrAdmin(Scope),
    /// The domain's token, or a key with `admin` (status and cancel; checked by the operation).
    TokenOrAdmin,
    /// The domain's token (what ranks send each other; checked by the operation).
    Token,
    /// The URL itself: a file's 128-bit random id is its capability, so
    /// that another endpoint can pull it by reference without a key.
    Capability,
}

impl Need {
    fn asks_credential(self) -> bool {
        !matches!(self, Need::Nothing | Need::Capability)
    }
}

/// An operation of the endpoint (`service::server::run_op` runs each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Describe,
    Run,
    RendezvousPost,
    RendezvousGet,
    Status,
    Cancel,
    Store,
    Stream,
    Matched,
    Withdraw,
    RelayRegister,
    RelayForward,
    Tunnel,
    Programs,
    Program,
    Spawn,
    Call,
    Jobs,
    Job,
    Kill,
    Results,
    JobFile,
    JobStream,
    Upload,
    GetUpload,
    RemoveUpload,
    SessionNew,
    Sessions,
    Session,
    SessionDelete,
    SessionFiles,
    SessionFile,
    SessionPut,
    SessionRemoveFile,
    Metrics,
    Dashboard,
    DashboardState,
    DashboardEvents,
    Soap,
    SoapServices,
    SoapStore,
    OgcLanding,
    OgcConformance,
    OgcApi,
    OgcProcesses,
    OgcProcess,
    OgcExecute,
    OgcJobs,
    OgcJob,
    OgcDismiss,
    OgcResults,
}

pub struct Route {
    /// None: any method.
    pub method: Option<Method>,
    /// Segments; `{name}` takes one, `{name..}` one or more (the rest).
    pub path: &'static str,
    pub need: Need,
    pub op: Op,
    /// Where instances run in processes of their own, passed on to the
    /// instance's process (`sandbox::relay`): a rank's messages.
    pub to_instance: bool,
}

const fn route(method: Method, path: &'static str, need: Need, op: Op) -> Route {
    Route { method: Some(method), path, need, op, to_instance: false }
}

const fn to_instance(method: Method, path: &'static str, op: Op) -> Route {
    Route { method: Some(method), path, need: Need::Token, op, to_instance: true }
}

const fn any(path: &'static str, need: Need, op: Op) -> Route {
    Route { method: None, path, need, op, to_instance: false }
}

/// Every route of an endpoint, the first that fits a request taking it.
pub const ROUTES: &[Route] = &[
    route(Method::GET, "/", Need::Nothing, Op::Describe),
    // What the endpoint counts, for Prometheus (`service::metrics`).
    route(Method::GET, "/metrics", Need::KeyOrAdmin(Scope::Metrics), Op::Metrics),
    // The dashboard (`service::dashboard`): its page's files hold no data; what it shows is admin's.
    route(Method::GET, "/dashboard", Need::Nothing, Op::Dashboard),
    route(Method::GET, "/dashboard/{file}", Need::Nothing, Op::Dashboard),
    route(Method::GET, "/dashboard/api/state", Need::Key(Scope::Admin), Op::DashboardState),
    route(Method::GET, "/dashboard/api/events", Need::Key(Scope::Admin), Op::DashboardEvents),
    // SOAP 1.2: the service interface's operations (`GET /?wsdl`); each checks its own credential, as `run`, `status` and `cancel` do.
    route(Method::POST, "/", Need::Nothing, Op::SoapServices),
    route(Method::POST, "/run", Need::Key(Scope::Run), Op::Run),
    route(Method::POST, "/rendezvous", Need::Key(Scope::Run), Op::RendezvousPost),
    route(Method::GET, "/rendezvous", Need::Key(Scope::Run), Op::RendezvousGet),
    route(Method::GET, "/domains/{domain}/ranks/{rank}", Need::TokenOrAdmin, Op::Status),
    route(Method::DELETE, "/domains/{domain}/ranks/{rank}", Need::TokenOrAdmin, Op::Cancel),
    to_instance(Method::POST, "/domains/{domain}/ranks/{rank}/messages", Op::Store),
    // SOAP 1.2: a rank's store and bStore, filed as a store is (`service::soap::rank`).
    to_instance(Method::POST, "/domains/{domain}/ranks/{rank}", Op::SoapStore),
    to_instance(Method::POST, "/domains/{domain}/ranks/{rank}/stream", Op::Stream),
    to_instance(Method::GET, "/domains/{domain}/ranks/{rank}/messages/{source}/{seq}/matched", Op::Matched),
    to_instance(Method::DELETE, "/domains/{domain}/ranks/{rank}/messages/{source}/{seq}", Op::Withdraw),
    // A relay's (`mpiws serve --relay`): a name registered, and what goes on under it (checked by the endpoint behind).
    route(Method::POST, "/relay/{name}", Need::Key(Scope::Relay), Op::RelayRegister),
    any("/relay/{name}", Need::Nothing, Op::RelayForward),
    any("/relay/{name}/{path..}", Need::Nothing, Op::RelayForward),
    // An endpoint behind a relay: TLS with it end to end, through the relay (`service::tunnel`; checked inside).
    route(Method::GET, "/tunnel", Need::Nothing, Op::Tunnel),
    route(Method::GET, "/programs", Need::Key(Scope::Jobs), Op::Programs),
    route(Method::GET, "/programs/{name}", Need::Key(Scope::Jobs), Op::Program),
    // SOAP 1.2: a program's operations, as its WSDL (`GET /programs/{name}?wsdl`) describes them (`service::soap`).
    route(Method::POST, "/programs/{name}", Need::Key(Scope::Jobs), Op::Soap),
    route(Method::POST, "/programs/{name}/jobs", Need::Key(Scope::Jobs), Op::Spawn),
    route(Method::POST, "/programs/{name}/call", Need::Key(Scope::Jobs), Op::Call),
    route(Method::GET, "/jobs", Need::KeyOrAdmin(Scope::Jobs), Op::Jobs),
    route(Method::GET, "/jobs/{id}", Need::KeyOrAdmin(Scope::Jobs), Op::Job),
    route(Method::DELETE, "/jobs/{id}", Need::KeyOrAdmin(Scope::Jobs), Op::Kill),
    route(Method::GET, "/jobs/{id}/results", Need::KeyOrAdmin(Scope::Jobs), Op::Results),
    route(Method::GET, "/jobs/{id}/files/{path..}", Need::Capability, Op::JobFile),
    route(Method::GET, "/jobs/{id}/stdout", Need::Capability, Op::JobStream),
    route(Method::GET, "/jobs/{id}/stderr", Need::Capability, Op::JobStream),
    route(Method::POST, "/files", Need::Key(Scope::Files), Op::Upload),
    route(Method::GET, "/files/{id}", Need::Capability, Op::GetUpload),
    route(Method::DELETE, "/files/{id}", Need::KeyOrAdmin(Scope::Files), Op::RemoveUpload),
    // Sessions: a client's jobs sharing a directory (`service::sessions`).
    route(Method::POST, "/sessions", Need::Key(Scope::Jobs), Op::SessionNew),
    route(Method::GET, "/sessions", Need::KeyOrAdmin(Scope::Jobs), Op::Sessions),
    route(Method::GET, "/sessions/{id}", Need::KeyOrAdmin(Scope::Jobs), Op::Session),
    route(Method::DELETE, "/sessions/{id}", Need::KeyOrAdmin(Scope::Jobs), Op::SessionDelete),
    route(Method::GET, "/sessions/{id}/files", Need::KeyOrAdmin(Scope::Jobs), Op::SessionFiles),
    route(Method::GET, "/sessions/{id}/files/{path..}", Need::KeyOrAdmin(Scope::Jobs), Op::SessionFile),
    route(Method::PUT, "/sessions/{id}/files/{name}", Need::KeyOrAdmin(Scope::Jobs), Op::SessionPut),
    route(Method::DELETE, "/sessions/{id}/files/{name}", Need::KeyOrAdmin(Scope::Jobs), Op::SessionRemoveFile),
    // OGC API - Processes over the same programs and jobs (`service::ogcapi`); what it is needs no key.
    route(Method::GET, "/ogcapi", Need::Nothing, Op::OgcLanding),
    route(Method::GET, "/ogcapi/conformance", Need::Nothing, Op::OgcConformance),
    route(Method::GET, "/ogcapi/api", Need::Nothing, Op::OgcApi),
    route(Method::GET, "/ogcapi/processes", Need::Key(Scope::Jobs), Op::OgcProcesses),
    route(Method::GET, "/ogcapi/processes/{id}", Need::Key(Scope::Jobs), Op::OgcProcess),
    route(Method::POST, "/ogcapi/processes/{id}/execution", Need::Key(Scope::Jobs), Op::OgcExecute),
    route(Method::GET, "/ogcapi/jobs", Need::KeyOrAdmin(Scope::Jobs), Op::OgcJobs),
    route(Method::GET, "/ogcapi/jobs/{id}", Need::KeyOrAdmin(Scope::Jobs), Op::OgcJob),
    route(Method::DELETE, "/ogcapi/jobs/{id}", Need::KeyOrAdmin(Scope::Jobs), Op::OgcDismiss),
    route(Method::GET, "/ogcapi/jobs/{id}/results", Need::KeyOrAdmin(Scope::Jobs), Op::OgcResults),
];

/// Which face a request speaks: its refusals are that face's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// The endpoint's own (JSON errors).
    Own,
    /// OGC API - Processes (its exception documents).
    Ogc,
    /// SOAP (faults).
    Soap,
}

pub fn face(method: &Method, parts: &[&str]) -> Face {
    match parts {
        ["ogcapi", ..] => Face::Ogc,
        ["programs", _] | [""] | ["domains", _, "ranks", _] if method == Method::POST => Face::Soap,
        _ => Face::Own,
    }
}

/// A request's route and the path's parameters, in order (a `{name..}`
/// parameter's segments joined by `/`, still percent-encoded).
pub struct Found<'p> {
    pub route: &'static Route,
    pub params: Vec<&'p str>,
    /// The segments a `{name..}` parameter took.
    pub rest: Vec<&'p str>,
}

pub enum Lookup<'p> {
    Found(Found<'p>),
    /// The path is served, with other methods; the credential its routes need.
    WrongMethod {
        need: Need,
        allow: Vec<Method>,
    },
    NotFound,
}

/// The parameters of `path`'s segments if `pattern` fits them.
fn fits<'p>(pattern: &str, parts: &[&'p str]) -> Option<(Vec<&'p str>, Vec<&'p str>)> {
    let pattern: Vec<&str> = pattern.trim_matches('/').split('/').collect();
    let mut params = Vec::new();
    for (i, seg) in pattern.iter().enumerate() {
        if seg.ends_with("..}") {
            let rest = parts.get(i..).filter(|r| !r.is_empty())?.to_vec();
            return Some((params, rest));
        }
        let part = *parts.get(i)?;
        if seg.starts_with('{') {
            params.push(part);
        } else if *seg != part {
            return None;
        }
    }
    (parts.len() == pattern.len()).then_some((params, Vec::new()))
}

/// The route of `method` on the path whose segments are `parts` (the path
/// trimmed of `/` and split at `/`; an empty segment fits no parameter).
pub fn find<'p>(method: &Method, parts: &[&'p str]) -> Lookup<'p> {
    let mut on_path = Vec::new();
    for route in ROUTES {
        let Some((params, rest)) = fits(route.path, parts) else { continue };
        if params.iter().chain(&rest).any(|p| p.is_empty()) {
            continue; // `/messages//0` names nothing
        }
        if route.method.as_ref().is_none_or(|m| m == method) {
            return Lookup::Found(Found { route, params, rest });
        }
        on_path.push(route);
    }
    if on_path.is_empty() {
        return Lookup::NotFound;
    }
    let need = on_path.iter().map(|r| r.need).find(|n| n.asks_credential()).unwrap_or(on_path[0].need);
    let mut allow: Vec<Method> = on_path.iter().filter_map(|r| r.method.clone()).collect();
    allow.dedup();
    Lookup::WrongMethod { need, allow }
}

/// The route of a request: as [`find`], but `POST /relay/{name}` is a
/// registration only when it asks to turn the connection around
/// (`relay_upgrade`: `Upgrade: mpiws-relay/1`); any other request there is
/// passed on as `/`, as any under the name is (a SOAP client posting to the
/// service interface of an endpoint behind the relay).
pub fn find_request<'p>(method: &Method, parts: &[&'p str], relay_upgrade: bool) -> Lookup<'p> {
    match find(method, parts) {
        Lookup::Found(f) if f.route.op == Op::RelayRegister && !relay_upgrade => {
            let route = ROUTES.iter().find(|r| r.op == Op::RelayForward).expect("the relay's forward route");
            Lookup::Found(Found { route, ..f })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(path: &str) -> Vec<&str> {
        path.trim_matches('/').split('/').collect()
    }

    fn need(method: Method, path: &str) -> Option<Need> {
        match find(&method, &parts(path)) {
            Lookup::Found(f) => Some(f.route.need),
            Lookup::WrongMethod { need, .. } => Some(need),
            Lookup::NotFound => None,
        }
    }

    #[test]
    fn routes_need_what_they_touch() {
        assert_eq!(need(Method::GET, "/"), Some(Need::Nothing));
        assert_eq!(need(Method::POST, "/run"), Some(Need::Key(Scope::Run)));
        assert_eq!(need(Method::GET, "/run"), Some(Need::Key(Scope::Run)), "a wrong method: the credential first");
        assert_eq!(need(Method::POST, "/rendezvous"), Some(Need::Key(Scope::Run)));
        assert_eq!(need(Method::DELETE, "/domains/d/ranks/0"), Some(Need::TokenOrAdmin));
        assert_eq!(need(Method::POST, "/domains/d/ranks/0/messages"), Some(Need::Token));
        assert_eq!(need(Method::GET, "/programs"), Some(Need::Key(Scope::Jobs)));
        assert_eq!(need(Method::POST, "/programs/x/jobs"), Some(Need::Key(Scope::Jobs)));
        assert_eq!(need(Method::DELETE, "/jobs/x"), Some(Need::KeyOrAdmin(Scope::Jobs)));
        assert_eq!(need(Method::GET, "/jobs"), Some(Need::KeyOrAdmin(Scope::Jobs)));
        assert_eq!(need(Method::GET, "/jobs/x/results"), Some(Need::KeyOrAdmin(Scope::Jobs)));
        assert_eq!(need(Method::GET, "/jobs/x/files/out"), Some(Need::Capability));
        assert_eq!(need(Method::DELETE, "/files/x"), Some(Need::KeyOrAdmin(Scope::Files)));
        assert_eq!(need(Method::POST, "/files/x"), Some(Need::KeyOrAdmin(Scope::Files)), "a wrong method: the one that asks");
        assert_eq!(need(Method::POST, "/files"), Some(Need::Key(Scope::Files)));
        assert_eq!(need(Method::GET, "/files/x"), Some(Need::Capability));
        assert_eq!(need(Method::POST, "/relay/lab"), Some(Need::Key(Scope::Relay)));
        for upgrade in [true, false] {
            let Lookup::Found(f) = find_request(&Method::POST, &parts("/relay/lab/"), upgrade) else { panic!("found") };
            let op = if upgrade { Op::RelayRegister } else { Op::RelayForward };
            assert_eq!(
                (f.route.op, f.params, f.route.need),
                (op, vec!["lab"], if upgrade { Need::Key(Scope::Relay) } else { Need::Nothing })
            );
        }
        assert_eq!(need(Method::GET, "/relay/lab/domains/d/ranks/0"), Some(Need::Nothing));
        assert_eq!(need(Method::POST, "/"), Some(Need::Nothing), "SOAP: each operation checks its own");
        assert_eq!(need(Method::POST, "/programs/x"), Some(Need::Key(Scope::Jobs)));
        assert_eq!(need(Method::GET, "/ogcapi/"), Some(Need::Nothing));
        assert_eq!(need(Method::GET, "/ogcapi/conformance"), Some(Need::Nothing));
        assert_eq!(need(Method::GET, "/ogcapi/processes"), Some(Need::Key(Scope::Jobs)));
        assert_eq!(need(Method::POST, "/ogcapi/processes/p/execution"), Some(Need::Key(Scope::Jobs)));
        assert_eq!(need(Method::GET, "/ogcapi/jobs"), Some(Need::KeyOrAdmin(Scope::Jobs)));
        assert_eq!(need(Method::DELETE, "/ogcapi/jobs/j"), Some(Need::KeyOrAdmin(Scope::Jobs)));
        assert_eq!(need(Method::GET, "/ogcapi/jobs/j/results"), Some(Need::KeyOrAdmin(Scope::Jobs)));
        assert_eq!(need(Method::PUT, "/ogcapi/jobs/j"), Some(Need::KeyOrAdmin(Scope::Jobs)), "a wrong method: the credential first");
    }

    #[test]
    fn parameters_come_in_order_and_a_rest_takes_one_or_more_segments() {
        let Lookup::Found(f) = find(&Method::GET, &parts("/domains/d/ranks/3/messages/1/9/matched")) else { panic!() };
        assert_eq!((f.route.op, f.params), (Op::Matched, vec!["d", "3", "1", "9"]));
        let Lookup::Found(f) = find(&Method::GET, &parts("/jobs/j/files/out/a%2Fb")) else { panic!() };
        assert_eq!((f.route.op, f.params, f.rest), (Op::JobFile, vec!["j"], vec!["out", "a%2Fb"]));
        assert!(matches!(find(&Method::GET, &parts("/jobs/j/files")), Lookup::NotFound));
        assert!(matches!(find(&Method::DELETE, &parts("/domains/d/ranks/1/messages//0")), Lookup::NotFound));
        assert!(matches!(find(&Method::GET, &parts("/domains/d/ranks/0/mailbox")), Lookup::NotFound));
    }

    /// The server gives these operations the caller's key: their routes ask for one.
    #[test]
    fn operations_on_behalf_of_a_key_are_behind_one() {
        let keyed = [
            Op::Run,
            Op::RelayRegister,
            Op::Spawn,
            Op::Call,
            Op::Soap,
            Op::Jobs,
            Op::Job,
            Op::Kill,
            Op::Results,
            Op::Upload,
            Op::RemoveUpload,
            Op::OgcProcesses,
            Op::OgcProcess,
            Op::OgcExecute,
            Op::OgcJobs,
            Op::OgcJob,
            Op::OgcDismiss,
            Op::OgcResults,
        ];
        for r in ROUTES.iter().filter(|r| keyed.contains(&r.op)) {
            assert!(matches!(r.need, Need::Key(_) | Need::KeyOrAdmin(_)), "{} {:?}", r.path, r.need);
        }
    }

    #[test]
    fn a_path_served_with_other_methods_says_which() {
        let Lookup::WrongMethod { allow, .. } = find(&Method::PUT, &parts("/files/x")) else { panic!() };
        assert_eq!(allow, vec![Method::GET, Method::DELETE]);
        let Lookup::WrongMethod { allow, .. } = find(&Method::PUT, &parts("/")) else { panic!() };
        assert_eq!(allow, vec![Method::GET, Method::POST]);
        // a relay takes any method under a name
        assert!(matches!(find(&Method::PUT, &parts("/relay/lab/x")), Lookup::Found(_)));
    }
}
