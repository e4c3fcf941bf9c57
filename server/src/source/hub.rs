//! The old status page's agents as a push source: each report an agent POSTs (`/api/report`, the
//! old `StatusData`) becomes its datacenter's hosts (Nodes) and VMs (VMIs) in the graph, in one
//! write. Each agent holds a token of its own datacenter (`HUB_TOKENS_FILE`) and can write only
//! that one; a datacenter whose reports stop goes `STALE` like a silent cluster.
//!
//! The token file: one datacenter per line, `DATACENTER TOKEN`, where TOKEN is the token itself
//! (at least 16 characters) or `sha256:<64 hex digits>` of it; `#` starts a comment. Tokens are
//! kept and compared only as SHA-256 hashes (as API keys are).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::status::SourceStatus;
use crate::auth::keys::{hash, secret_hash};
use crate::db::Db;
use crate::db::hub_reports::{self, StoredReport};
use crate::model::datacenter::valid_key;
use crate::model::status_page::{NodeInfo, StatusData, VmInfo};
use crate::model::{Datacenter, Kind, LABEL_CLUSTER_ID, Resource};
use crate::store::{ObjectKey, Op, Store};

/// Largest report accepted (the old hub's limit), in bytes.
pub const MAX_REPORT_BYTES: usize = 10 * 1024 * 1024;

/// Annotation on every object a report wrote: where it came from.
pub const ANNOTATION_REPORTED: &str = "vitistack.io/reported-by";

/// Which datacenter each token may write.
#[derive(Clone, Debug, Default)]
pub struct HubTokens {
    by_hash: HashMap<[u8; 32], Datacenter>,
}

/// Why a token file was not taken (the tokens themselves are never in it).
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file could not be read.
    #[error("HUB_TOKENS_FILE {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A line of it is wrong.
    #[error("HUB_TOKENS_FILE {origin}:{line}: {reason}")]
    Line {
        origin: String,
        line: usize,
        reason: String,
    },
}

impl HubTokens {
    /// The tokens of a file's text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<HubTokens, TokensError> {
        let mut by_hash = HashMap::new();
        let mut seen = BTreeSet::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let at = |reason: String| TokensError::Line {
                origin: origin.to_string(),
                line: n + 1,
                reason,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [datacenter, token] = fields.as_slice() else {
                return Err(at(
                    "expected `DATACENTER TOKEN` (the token itself is not shown)".into(),
                ));
            };
            // A token written in the first column must not end up in a log: the key's own
            // error would quote it.
            valid_key(datacenter).map_err(|_| {
                at(
                    "the datacenter (first column) is 1 to 63 letters, digits, `-`, `_`, `.`"
                        .into(),
                )
            })?;
            let h = secret_hash(token, "token", datacenter).map_err(at)?;
            if !seen.insert(datacenter.to_string()) {
                return Err(at(format!("the datacenter `{datacenter}` is given twice")));
            }
            if by_hash.insert(h, Datacenter::new(datacenter)).is_some() {
                return Err(at(format!(
                    "the token of `{datacenter}` is another datacenter's too"
                )));
            }
        }
        Ok(HubTokens { by_hash })
    }

    /// Read and parse a token file.
    pub fn read(path: &Path) -> Result<HubTokens, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        HubTokens::parse(&text, &path.display().to_string())
    }

    /// The datacenter a presented token may write.
    fn datacenter(&self, token: &str) -> Option<&Datacenter> {
        use subtle::ConstantTimeEq;
        let h = hash(token);
        // Looked up by the presented token's own hash, then compared in constant time (as API
        // keys are: the lookup's time says nothing about the tokens held).
        self.by_hash
            .get_key_value(&h)
            .filter(|(held, _)| bool::from(held.ct_eq(&h)))
            .map(|(_, dc)| dc)
    }

    /// Number of datacenters with a token.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// True when no datacenter has a token.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

/// Why a report was not taken. Nothing of a refused report is applied.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The server takes no reports (no `HUB_TOKENS_FILE`).
    #[error("reports are refused here: HUB_TOKENS_FILE is not set")]
    Off,
    /// No `Authorization: Bearer` token.
    #[error("a report needs `Authorization: Bearer <token>` (a token of HUB_TOKENS_FILE)")]
    NoToken,
    /// A token no datacenter has.
    #[error("the token is not one of HUB_TOKENS_FILE")]
    UnknownToken,
    /// The token is another datacenter's.
    #[error("this token may report datacenter `{allowed}` only, not `{reported}`")]
    OtherDatacenter {
        allowed: Datacenter,
        reported: String,
    },
    /// The body is not the old `StatusData` JSON.
    #[error("the report is not StatusData JSON: {0}")]
    BadJson(String),
    /// A field of it is wrong.
    #[error("the report's `{path}` {reason}")]
    Invalid { path: String, reason: String },
    /// The datacenter is one this server watches itself.
    #[error("datacenter `{0}` is watched by this server; it takes no reports")]
    Watched(Datacenter),
}

/// What a report changed.
#[derive(Debug)]
pub struct Accepted {
    /// The datacenter.
    pub datacenter: Datacenter,
    /// Objects created, changed or removed.
    pub changes: usize,
    /// The report as the server read it, to keep and share with the other replicas.
    pub stored: StoredReport,
}

/// The agents' entry: tokens, the graph it writes, the datacenters' record.
pub struct Hub {
    tokens: HubTokens,
    store: Arc<Store>,
    status: Arc<SourceStatus>,
    /// When the report applied last for each datacenter was taken (ms since the epoch): an
    /// older one read back later is not applied over it.
    latest: parking_lot::Mutex<HashMap<Datacenter, i64>>,
}

impl Hub {
    /// Take reports with `tokens` into `store`, recording each in `status`.
    pub fn new(tokens: HubTokens, store: Arc<Store>, status: Arc<SourceStatus>) -> Self {
        Hub {
            tokens,
            store,
            status,
            latest: Default::default(),
        }
    }

    /// Make `objects` the datacenter's hosts and VMs (hosts and VMs they do not hold are
    /// removed) in one write, unless a newer report was applied. None when it was older.
    fn apply(&self, dc: &Datacenter, objects: Vec<Resource>, taken_ms: i64) -> Option<usize> {
        // Held through the write: two reports of one datacenter are applied in their order.
        let mut latest = self.latest.lock();
        if latest.get(dc).is_some_and(|l| *l > taken_ms) {
            return None;
        }
        latest.insert(dc.clone(), taken_ms);
        let snap = self.store.snapshot();
        let keep: BTreeSet<ObjectKey> = objects.iter().map(ObjectKey::of).collect();
        let gone: Vec<Op> = [Kind::Node, Kind::VirtualMachineInstance]
            .into_iter()
            .flat_map(|k| snap.list_datacenter(dc, k))
            .map(|r| ObjectKey::of(r))
            .filter(|k| !keep.contains(k))
            .map(Op::Delete)
            .collect();
        drop(snap);
        let mut ops: Vec<Op> = objects.into_iter().map(Op::Upsert).collect();
        ops.extend(gone);
        // The datacenter is listed (`/health`, `datacenters`) before its hosts are served: a
        // reader that sees them finds it too.
        let at =
            jiff::Timestamp::from_millisecond(taken_ms).unwrap_or_else(|_| jiff::Timestamp::now());
        self.status.pushed(dc, at);
        Some(self.store.apply(ops).len())
    }

    /// Apply a report kept in the database (another replica took it, or this server before a
    /// restart), unless a newer one was applied; one for a datacenter no token names now, or one
    /// this server watches itself, is left out. True when it was applied.
    pub fn replay(&self, stored: &StoredReport) -> bool {
        let Some(dc) = self
            .tokens
            .by_hash
            .values()
            .find(|d| d.key() == stored.datacenter)
            .cloned()
        else {
            return false;
        };
        if self.status.watches(&dc) {
            return false;
        }
        let report = match serde_json::from_str::<StatusData>(&stored.body) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(datacenter = %dc, error = %e, "a stored report is not StatusData; left out");
                return false;
            }
        };
        match objects(&report, &dc) {
            Ok(objects) => self.apply(&dc, objects, stored.received_ms).is_some(),
            Err(e) => {
                tracing::warn!(datacenter = %dc, error = %e, "a stored report was refused; left out");
                false
            }
        }
    }

    /// Take one report: `authorization` is the request's header, `body` its bytes. The
    /// datacenter's hosts and VMs become the report's, in one write (hosts and VMs it no longer
    /// lists are removed); a report equal to the last one changes nothing.
    pub fn report(&self, authorization: Option<&str>, body: &[u8]) -> Result<Accepted, Refusal> {
        let token = authorization
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::NoToken)?;
        let allowed = self
            .tokens
            .datacenter(token)
            .ok_or(Refusal::UnknownToken)?
            .clone();
        let report: StatusData =
            serde_json::from_slice(body).map_err(|e| Refusal::BadJson(e.to_string()))?;
        if report.datacenter.is_empty() {
            return Err(invalid("datacenter", "is empty"));
        }
        if report.datacenter != allowed.key() {
            return Err(Refusal::OtherDatacenter {
                allowed,
                reported: report.datacenter,
            });
        }
        let dc = allowed;
        if self.status.watches(&dc) {
            return Err(Refusal::Watched(dc));
        }
        let objects = objects(&report, &dc)?;
        let taken_ms = jiff::Timestamp::now().as_millisecond();
        // The report as read: fields the server does not know are not kept or shared.
        let body = serde_json::to_string(&report).map_err(|e| Refusal::BadJson(e.to_string()))?;
        let changes = self.apply(&dc, objects, taken_ms).unwrap_or(0);
        Ok(Accepted {
            stored: StoredReport {
                datacenter: dc.key().to_string(),
                body,
                received_ms: taken_ms,
            },
            datacenter: dc,
            changes,
        })
    }
}

/// Keep applying the reports other replicas take, as the database announces them (PostgreSQL's
/// LISTEN/NOTIFY), after applying every stored one (so a restarted server lists its pushing
/// datacenters at once, with their age). On SQLite (one replica) the stored ones are read once.
/// `db` gives the database once it is reachable.
pub async fn follow(
    hub: Arc<Hub>,
    db: impl Fn() -> Option<Db> + Send + 'static,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let read = |db: Db, datacenter: Option<String>| {
        let hub = hub.clone();
        async move {
            let reports = match datacenter {
                None => hub_reports::all(&db).await?,
                Some(dc) => hub_reports::one(&db, &dc).await?.into_iter().collect(),
            };
            for r in reports {
                hub.replay(&r);
            }
            Ok(())
        }
    };
    crate::db::follow::follow(db, hub_reports::CHANNEL, "reports", read, stop).await;
}

fn invalid(path: impl Into<String>, reason: impl Into<String>) -> Refusal {
    Refusal::Invalid {
        path: path.into(),
        reason: reason.into(),
    }
}

/// A name as Kubernetes has them: 1 to 253 characters, no `/` and no control characters.
fn name(path: String, value: &str) -> Result<(), Refusal> {
    if value.is_empty() || value.len() > 253 {
        return Err(invalid(path, "must have 1 to 253 characters"));
    }
    if value.chars().any(|c| c == '/' || c.is_control()) {
        return Err(invalid(path, "must not hold `/` or control characters"));
    }
    Ok(())
}

fn count(path: String, value: i64) -> Result<(), Refusal> {
    if value < 0 {
        return Err(invalid(path, format!("must not be negative (is {value})")));
    }
    Ok(())
}

/// The report's hosts and VMs as objects of `dc`, every field checked first.
fn objects(report: &StatusData, dc: &Datacenter) -> Result<Vec<Resource>, Refusal> {
    let mut out = Vec::new();
    let mut nodes = BTreeSet::new();
    // A VM may be listed under its host and under its cluster: taken once.
    let mut vms: BTreeSet<(String, String)> = BTreeSet::new();
    let mut vm_objects = Vec::new();
    for (i, n) in report.nodes.iter().enumerate() {
        let at = |field: &str| format!("nodes[{i}].{field}");
        name(at("name"), &n.name)?;
        if !nodes.insert(n.name.as_str()) {
            return Err(invalid(at("name"), format!("`{}` is listed twice", n.name)));
        }
        for (field, v) in [
            ("cpuCapacity", n.cpu_capacity),
            ("memoryCapMB", n.memory_cap_mb),
            ("cpuAllocatable", n.cpu_allocatable),
            ("memAllocMB", n.mem_alloc_mb),
        ] {
            count(at(field), v)?;
        }
        for (r, role) in n.roles.iter().enumerate() {
            if role.is_empty()
                || role.len() > 63
                || !role
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(invalid(
                    format!("nodes[{i}].roles[{r}]"),
                    "must be 1 to 63 letters, digits, `-`, `_`, `.`",
                ));
            }
        }
        out.push(node(n, dc)?);
        for (j, vm) in n.vms.iter().enumerate() {
            vm_object(
                vm,
                &format!("nodes[{i}].vms[{j}]"),
                dc,
                &mut vms,
                &mut vm_objects,
            )?;
        }
    }
    for (i, c) in report.clusters.iter().enumerate() {
        for (j, vm) in c.vms.iter().enumerate() {
            vm_object(
                vm,
                &format!("clusters[{i}].vms[{j}]"),
                dc,
                &mut vms,
                &mut vm_objects,
            )?;
        }
    }
    out.extend(vm_objects);
    Ok(out)
}

fn decode(kind: Kind, value: Value, path: &str) -> Result<Resource, Refusal> {
    Resource::from_value(kind, "v1", value).map_err(|e| invalid(path, e.to_string()))
}

fn node(n: &NodeInfo, dc: &Datacenter) -> Result<Resource, Refusal> {
    let labels: serde_json::Map<String, Value> = n
        .roles
        .iter()
        .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
        .collect();
    let ready = match n.status.as_str() {
        "Ready" => "True",
        "NotReady" => "False",
        _ => "Unknown",
    };
    let value = json!({
        "metadata": {"name": n.name, "labels": labels,
                     "annotations": {ANNOTATION_REPORTED: "status-page-agent"}},
        "status": {
            "capacity": {"cpu": n.cpu_capacity.to_string(), "memory": format!("{}Mi", n.memory_cap_mb)},
            "allocatable": {"cpu": n.cpu_allocatable.to_string(), "memory": format!("{}Mi", n.mem_alloc_mb)},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    });
    Ok(decode(Kind::Node, value, "nodes")?.in_datacenter(dc))
}

fn vm_object(
    vm: &VmInfo,
    path: &str,
    dc: &Datacenter,
    seen: &mut BTreeSet<(String, String)>,
    out: &mut Vec<Resource>,
) -> Result<(), Refusal> {
    name(format!("{path}.name"), &vm.name)?;
    let namespace = if vm.namespace.is_empty() {
        "default"
    } else {
        vm.namespace.as_str()
    };
    name(format!("{path}.namespace"), namespace)?;
    count(format!("{path}.cpuCores"), vm.cpu_cores)?;
    count(format!("{path}.memoryMB"), vm.memory_mb)?;
    if !seen.insert((namespace.to_string(), vm.name.clone())) {
        return Ok(());
    }
    let mut labels = serde_json::Map::new();
    if !vm.cluster.is_empty() && vm.cluster != "unknown" {
        labels.insert(LABEL_CLUSTER_ID.into(), json!(vm.cluster));
    }
    let mut status = serde_json::Map::new();
    if !vm.status.is_empty() {
        status.insert("phase".into(), json!(vm.status));
    }
    if !vm.node_name.is_empty() {
        status.insert("nodeName".into(), json!(vm.node_name));
    }
    let value = json!({
        "metadata": {"name": vm.name, "namespace": namespace, "labels": labels,
                     "annotations": {ANNOTATION_REPORTED: "status-page-agent"}},
        "spec": {"domain": {
            "cpu": {"sockets": 1, "cores": vm.cpu_cores.max(1), "threads": 1},
            "memory": {"guest": format!("{}Mi", vm.memory_mb)},
        }},
        "status": status,
    });
    out.push(decode(Kind::VirtualMachineInstance, value, path)?.in_datacenter(dc));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_name_the_line_and_never_the_token() {
        let hashed = crate::auth::keys::to_hex(&hash("west-token-0123456789"));
        let tokens = HubTokens::parse(
            &format!("# agents\neast east-token-0123456789\nwest sha256:{hashed} # hashed\n"),
            "tokens",
        )
        .expect("valid file");
        assert_eq!(tokens.len(), 2);
        assert_eq!(
            tokens.datacenter("west-token-0123456789").map(|d| d.key()),
            Some("west")
        );
        assert!(tokens.datacenter("west-token-012345678").is_none());
        for (text, said) in [
            (
                "east short",
                "tokens:1: the token of `east` is 5 characters",
            ),
            (
                "east-token-0123456789",
                "tokens:1: expected `DATACENTER TOKEN`",
            ),
            (
                "a/b token-0123456789abc",
                "tokens:1: the datacenter (first column)",
            ),
            (
                "a token-0123456789abc\na token-9876543210abc",
                "tokens:2: the datacenter `a` is given twice",
            ),
            (
                "a token-0123456789abc\nb token-0123456789abc",
                "tokens:2: the token of `b` is another datacenter's too",
            ),
        ] {
            let e = HubTokens::parse(text, "tokens")
                .expect_err(text)
                .to_string();
            assert!(e.contains(said), "{text:?}: {e}");
            assert!(!e.contains("0123456789abc") && !e.contains("short`"), "{e}");
        }
    }

    #[test]
    fn a_datacenter_the_server_watches_takes_no_reports() {
        let status = Arc::new(SourceStatus::kube(
            std::time::Duration::from_secs(300),
            Some(Default::default()),
        ));
        let east = Datacenter::new("east");
        status.add_datacenter(&east, &[(Kind::Node, "v1")], |_| 1);
        assert!(status.watches(&east));
        assert!(!status.watches(&Datacenter::new("eas")));
        assert!(!status.watches(&Datacenter::new("west")));
        let store = Arc::new(Store::new());
        let hub = Hub::new(
            HubTokens::parse("east east-token-0123456789", "t").expect("tokens"),
            store.clone(),
            status,
        );
        let body = json!({"datacenter": "east", "nodes": [{"name": "n1"}]}).to_string();
        let refused = hub
            .report(Some("Bearer east-token-0123456789"), body.as_bytes())
            .expect_err("watched");
        assert!(matches!(refused, Refusal::Watched(_)), "{refused}");
        assert_eq!(store.snapshot().count(Kind::Node), 0, "nothing applied");
    }

    #[test]
    fn a_report_becomes_hosts_and_vms_and_a_bad_field_is_named() {
        let dc = Datacenter::new("east");
        let report: StatusData = serde_json::from_value(json!({
            "datacenter": "east",
            "nodes": [{"name": "n1", "roles": ["worker"], "status": "Ready", "cpuCapacity": 32,
                       "memoryCapMB": 65536, "cpuAllocatable": 31, "memAllocMB": 60000,
                       "vms": [{"name": "prod-wrk1", "namespace": "t1", "status": "Running",
                                "nodeName": "n1", "cpuCores": 4, "memoryMB": 8192, "cluster": "prod"}]}],
            "clusters": [{"name": "prod", "nodes": ["n1"], "vms": [
                {"name": "prod-wrk1", "namespace": "t1", "status": "Running", "nodeName": "n1",
                 "cpuCores": 4, "memoryMB": 8192, "cluster": "prod"}]}],
            "updated": "2026-01-01T00:00:00Z"
        }))
        .expect("report");
        let made = objects(&report, &dc).expect("valid");
        assert_eq!(made.len(), 2, "the VM listed twice is one object");
        assert!(made.iter().all(|o| o.datacenter() == &dc));
        let Resource::Node(n) = &made[0] else {
            panic!("a node first")
        };
        let cap = crate::domain::hosts::capacity(n);
        assert_eq!(cap.cpu_capacity, 32.0);
        assert_eq!(cap.memory_allocatable, 60000.0 * 1024.0 * 1024.0);
        assert_eq!(cap.roles, vec!["worker".to_string()]);
        let Resource::VirtualMachineInstance(vmi) = &made[1] else {
            panic!("then the VM")
        };
        let d = crate::domain::hosts::demand(Some(vmi), None);
        assert_eq!((d.vcpus, d.memory_bytes), (4.0, 8192.0 * 1024.0 * 1024.0));
        assert_eq!(made[1].label(LABEL_CLUSTER_ID), Some("prod"));

        let mut bad = report.clone();
        bad.nodes[0].vms[0].memory_mb = -1;
        let e = objects(&bad, &dc).expect_err("negative memory");
        assert_eq!(
            e.to_string(),
            "the report's `nodes[0].vms[0].memoryMB` must not be negative (is -1)"
        );
        let mut bad = report;
        bad.clusters[0].vms[0].name = "a/b".into();
        let e = objects(&bad, &dc).expect_err("slash");
        assert!(e.to_string().contains("`clusters[0].vms[0].name`"), "{e}");
    }
}
