//! Helm releases as Helm stores them, read down to what the application inventory shows.
//!
//! Helm 3 keeps each revision of a release in a Secret of type `helm.sh/release.v1` (or a
//! ConfigMap, with `HELM_DRIVER=configmap`), key `release`: the release as JSON, gzipped, then
//! base64 (a Secret's data is base64 once more on the wire). This module is the only place a
//! release is opened. It keeps the release's identity, status, chart and the kinds and names of
//! the objects its manifest made; the values, the config and the manifest's bodies (where
//! passwords live) are never kept: they are not even deserialized into a value, except the
//! manifest text, which is read for its objects' names and dropped here.
//!
//! Inputs are hostile: the gzip stream is read to at most [`MAX_RELEASE_BYTES`], and errors name
//! the place (line, column) and the kind of fault, never a value.

use std::io::Read;

use base64::Engine;
use serde::Deserialize;

/// The `type` of the Secrets Helm stores releases in.
pub const SECRET_TYPE: &str = "helm.sh/release.v1";

/// A release's JSON is read to at most this many bytes once unzipped (Helm's own releases stay
/// far below: a Secret holds at most 1 MiB, zipped).
pub const MAX_RELEASE_BYTES: u64 = 32 * 1024 * 1024;

/// Helm's release statuses (`helm.sh/helm/v3/pkg/release.Status`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ReleaseStatus {
    Unknown,
    Deployed,
    Uninstalled,
    Superseded,
    Failed,
    Uninstalling,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
}

impl ReleaseStatus {
    /// From Helm's word for it (anything else is `Unknown`).
    pub fn parse(s: &str) -> Self {
        match s {
            "deployed" => Self::Deployed,
            "uninstalled" => Self::Uninstalled,
            "superseded" => Self::Superseded,
            "failed" => Self::Failed,
            "uninstalling" => Self::Uninstalling,
            "pending-install" => Self::PendingInstall,
            "pending-upgrade" => Self::PendingUpgrade,
            "pending-rollback" => Self::PendingRollback,
            _ => Self::Unknown,
        }
    }

    /// Helm's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Deployed => "deployed",
            Self::Uninstalled => "uninstalled",
            Self::Superseded => "superseded",
            Self::Failed => "failed",
            Self::Uninstalling => "uninstalling",
            Self::PendingInstall => "pending-install",
            Self::PendingUpgrade => "pending-upgrade",
            Self::PendingRollback => "pending-rollback",
        }
    }

    /// A revision in this status is the release as it runs (or is about to): deployed, or an
    /// install, upgrade or rollback under way. The newest such revision is the live one; the
    /// others are history.
    pub fn live(self) -> bool {
        matches!(
            self,
            Self::Deployed | Self::PendingInstall | Self::PendingUpgrade | Self::PendingRollback
        )
    }
}

/// An object a release's manifest made (its kind and name; its namespace when it names one).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ManifestObject {
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// One revision of a Helm release: what the inventory keeps of it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HelmRelease {
    pub name: String,
    pub namespace: String,
    /// The revision (Helm's `version`).
    pub revision: u64,
    pub status: ReleaseStatus,
    /// When this revision was deployed (`info.last_deployed`, RFC 3339), when Helm says.
    pub updated: Option<String>,
    /// The chart's name, version and app version.
    pub chart: String,
    pub chart_version: String,
    pub app_version: String,
    /// The objects its manifest made, sorted.
    pub objects: Vec<ManifestObject>,
    /// Its manifest labels an object `app.kubernetes.io/managed-by: Helm` (the hossted design's
    /// test for a release it deployed: `hossted_helm`, with the namespace's `uuid` Secret).
    pub managed_by_helm: bool,
}

/// Why a release could not be read. Never carries a value of the release.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HelmError {
    /// The data is not base64.
    #[error("`release` is not base64")]
    NotBase64,
    /// Unzipped, it is larger than [`MAX_RELEASE_BYTES`].
    #[error("the release is larger than {MAX_RELEASE_BYTES} bytes unzipped")]
    TooLarge,
    /// The gzip stream is broken.
    #[error("the release's gzip stream is broken")]
    BadGzip,
    /// The JSON is not a release.
    #[error("the release is not Helm's JSON ({0})")]
    BadJson(String),
}

/// A Secret's `data.release` as the API serves it (base64 of Helm's base64).
pub fn from_secret_data(release: &str) -> Result<HelmRelease, HelmError> {
    let helm = base64::engine::general_purpose::STANDARD
        .decode(release.trim())
        .map_err(|_| HelmError::NotBase64)?;
    decode(&helm)
}

/// A ConfigMap's `data.release` (Helm's base64).
pub fn from_configmap_data(release: &str) -> Result<HelmRelease, HelmError> {
    decode(release.trim().as_bytes())
}

/// Helm's `decodeRelease`: base64, gunzip when it is gzip, then the JSON. `helm` is what Helm
/// stored (a Secret's `data.release` once the API's base64 is undone, or a ConfigMap's).
pub fn decode(helm: &[u8]) -> Result<HelmRelease, HelmError> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(helm)
        .map_err(|_| HelmError::NotBase64)?;
    let json = if raw.starts_with(&[0x1f, 0x8b, 0x08]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .take(MAX_RELEASE_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|_| HelmError::BadGzip)?;
        if out.len() as u64 > MAX_RELEASE_BYTES {
            return Err(HelmError::TooLarge);
        }
        out
    } else if raw.len() as u64 > MAX_RELEASE_BYTES {
        return Err(HelmError::TooLarge);
    } else {
        raw
    };
    let r: RawRelease = serde_json::from_slice(&json).map_err(|e| {
        // serde_json's message may quote a value: only the kind of fault and where.
        HelmError::BadJson(format!(
            "{:?} error at line {} column {}",
            e.classify(),
            e.line(),
            e.column()
        ))
    })?;
    let (objects, managed_by_helm) = manifest_objects(&r.manifest);
    let chart = r.chart.and_then(|c| c.metadata).unwrap_or_default();
    Ok(HelmRelease {
        name: r.name,
        namespace: r.namespace,
        revision: r.version,
        status: ReleaseStatus::parse(&r.info.status),
        updated: r.info.last_deployed.filter(|s| !s.is_empty()),
        chart: chart.name,
        chart_version: chart.version,
        app_version: chart.app_version,
        objects,
        managed_by_helm,
    })
}

/// The kinds and names of the objects in a manifest (YAML documents), and whether one of them is
/// labelled `app.kubernetes.io/managed-by: Helm`; a document that is not an object is skipped.
/// Nothing else of it is kept.
fn manifest_objects(manifest: &str) -> (Vec<ManifestObject>, bool) {
    let mut out = Vec::new();
    let mut managed_by_helm = false;
    for doc in serde_yaml::Deserializer::from_str(manifest) {
        // A document that is not YAML ends the reading: after a syntax error the stream of
        // documents does not move on (it would yield the same error for ever).
        let Ok(value) = serde_yaml::Value::deserialize(doc) else {
            break;
        };
        let Ok(Some(o)) = Option::<ManifestDoc>::deserialize(value) else {
            continue;
        };
        let (Some(kind), Some(meta)) = (o.kind, o.metadata) else {
            continue;
        };
        managed_by_helm |= meta
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by"))
            .is_some_and(|v| v == "Helm");
        let Some(name) = meta.name.filter(|n| !n.is_empty()) else {
            continue;
        };
        out.push(ManifestObject {
            kind,
            name,
            namespace: meta.namespace.filter(|n| !n.is_empty()),
        });
    }
    out.sort();
    out.dedup();
    (out, managed_by_helm)
}

/// The fields of a release that are read; everything else (values, config, templates, files,
/// hooks) is skipped by the parser without being kept.
#[derive(Deserialize)]
struct RawRelease {
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    version: u64,
    #[serde(default)]
    info: RawInfo,
    #[serde(default)]
    chart: Option<RawChart>,
    /// Read for its objects' names, then dropped.
    #[serde(default)]
    manifest: String,
}

#[derive(Default, Deserialize)]
struct RawInfo {
    #[serde(default)]
    status: String,
    #[serde(default)]
    last_deployed: Option<String>,
}

#[derive(Deserialize)]
struct RawChart {
    #[serde(default)]
    metadata: Option<RawChartMeta>,
}

#[derive(Default, Deserialize)]
struct RawChartMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default, rename = "appVersion")]
    app_version: String,
}

#[derive(Deserialize)]
struct ManifestDoc {
    kind: Option<String>,
    metadata: Option<ManifestMeta>,
}

#[derive(Deserialize)]
struct ManifestMeta {
    name: Option<String>,
    namespace: Option<String>,
    /// Only string values are read (a label is a string; anything else is not one).
    #[serde(default, deserialize_with = "string_labels")]
    labels: Option<std::collections::BTreeMap<String, String>>,
}

/// A manifest's labels, keeping the string ones: a template that renders a number or a list there
/// still names its object.
fn string_labels<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::collections::BTreeMap<String, String>>, D::Error> {
    let v = Option::<serde_yaml::Value>::deserialize(d)?;
    Ok(v.and_then(|v| match v {
        serde_yaml::Value::Mapping(m) => Some(
            m.into_iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect(),
        ),
        _ => None,
    }))
}

/// Encode a release as Helm does (JSON → gzip → base64), for tests and the demo.
pub fn encode(release: &serde_json::Value) -> String {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(release.to_string().as_bytes());
    let zipped = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(zipped)
}

/// A Secret's `data.release` for `release` (Helm's encoding, base64 once more as the API serves
/// it), for tests and the demo.
pub fn secret_data(release: &serde_json::Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(encode(release))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLANTED: &str = "hunter2-planted-in-values";

    fn release(revision: u64, status: &str) -> serde_json::Value {
        json!({
            "name": "shop",
            "namespace": "team-a",
            "version": revision,
            "info": {"status": status, "last_deployed": "2026-11-20T10:00:00.5+01:00",
                     "first_deployed": "2026-11-01T10:00:00Z", "notes": "thanks"},
            "chart": {"metadata": {"name": "keycloak", "version": "24.0.1", "appVersion": "26.0.0"},
                      "values": {"auth": {"adminPassword": PLANTED}},
                      "templates": [{"name": "t.yaml", "data": "e30="}]},
            "config": {"auth": {"adminPassword": PLANTED}},
            "manifest": format!("---\n# Source: keycloak/templates/secret.yaml\napiVersion: v1\nkind: Secret\n\
                metadata:\n  name: shop-keycloak\n  namespace: team-a\nstringData:\n  admin-password: {PLANTED}\n\
                ---\napiVersion: v1\nkind: Service\nmetadata:\n  name: shop-keycloak\nspec:\n  ports:\n  - port: 80\n\
                ---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: shop-keycloak\n\
                ---\n# only a comment\n"),
        })
    }

    #[test]
    fn a_secret_stored_release_reads_as_helm_wrote_it_and_keeps_no_value() {
        let data = secret_data(&release(3, "deployed"));
        let r = from_secret_data(&data).expect("a release");
        assert_eq!((r.name.as_str(), r.namespace.as_str()), ("shop", "team-a"));
        assert_eq!(r.revision, 3);
        assert_eq!(r.status, ReleaseStatus::Deployed);
        assert_eq!(r.updated.as_deref(), Some("2026-11-20T10:00:00.5+01:00"));
        assert_eq!(
            (
                r.chart.as_str(),
                r.chart_version.as_str(),
                r.app_version.as_str()
            ),
            ("keycloak", "24.0.1", "26.0.0")
        );
        let kinds: Vec<(&str, &str)> = r
            .objects
            .iter()
            .map(|o| (o.kind.as_str(), o.name.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("Secret", "shop-keycloak"),
                ("Service", "shop-keycloak"),
                ("StatefulSet", "shop-keycloak")
            ]
        );
        assert!(!format!("{r:?}").contains(PLANTED), "{r:?}");
    }

    #[test]
    fn a_configmap_stored_release_and_an_unzipped_one_read_too() {
        let r = from_configmap_data(&encode(&release(2, "pending-upgrade"))).expect("release");
        assert_eq!(r.status, ReleaseStatus::PendingUpgrade);
        assert!(r.status.live());
        let plain =
            base64::engine::general_purpose::STANDARD.encode(release(1, "superseded").to_string());
        let r = from_configmap_data(&plain).expect("release");
        assert_eq!(r.status, ReleaseStatus::Superseded);
        assert!(!r.status.live());
    }

    #[test]
    fn a_manifest_that_turns_into_bad_yaml_keeps_what_came_before_and_ends() {
        // serde_yaml's documents do not move past a syntax error; reading stops there.
        let mut r = release(1, "deployed");
        r["manifest"] = json!(
            "---\nkind: Service\nmetadata:\n  name: a\n---\nkind: [\nmetadata: {\n---\nkind: Service\nmetadata:\n  name: b\n"
        );
        let got = from_configmap_data(&encode(&r)).expect("release");
        let names: Vec<&str> = got.objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn hostile_data_is_refused_with_a_reason_and_no_value() {
        assert_eq!(from_secret_data("not base64!"), Err(HelmError::NotBase64));
        // Valid base64 of broken gzip.
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert_eq!(
            from_configmap_data(&b64(&[0x1f, 0x8b, 0x08, 0, 1, 2, 3])),
            Err(HelmError::BadGzip)
        );
        // A gzip bomb: far more than the limit once unzipped, refused without reading it all.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..(MAX_RELEASE_BYTES >> 20) + 2 {
            std::io::Write::write_all(&mut gz, &zeros).expect("zip");
        }
        let bomb = gz.finish().expect("zip");
        assert!(bomb.len() < 1 << 20, "the bomb is small: {}", bomb.len());
        assert_eq!(from_configmap_data(&b64(&bomb)), Err(HelmError::TooLarge));
        // JSON whose fault is next to a secret: the error says where, not what.
        let bad = json!({"name": "x", "version": PLANTED});
        let e = from_configmap_data(&encode(&bad)).expect_err("refused");
        assert!(!e.to_string().contains(PLANTED), "{e}");
        assert!(e.to_string().contains("line 1"), "{e}");
    }
}
