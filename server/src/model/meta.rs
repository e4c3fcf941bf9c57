//! Every stored object's `metadata`, kept compactly: the fields of Kubernetes' `ObjectMeta` the
//! API serves, with labels and annotations as one sorted slice whose keys are interned.
//!
//! Why not `k8s_openapi`'s `ObjectMeta`: its labels and annotations are `BTreeMap<String,
//! String>`, and a B-tree's first leaf takes room for eleven entries (about 540 bytes) however few
//! it holds, each key a string of its own. A Machine carries four labels and two annotations whose
//! keys are the same dozen in every object: in the store its metadata took 1,260 bytes, as much as
//! its whole JSON (`cargo bench --bench fleet_memory`, BENCHMARKS.md). Here a label is 24 bytes,
//! with its value inline when it has 15 bytes or fewer; the key is shared.
//!
//! It reads and writes the same JSON as `ObjectMeta` (the fields in the same order, absent ones
//! left out, labels and annotations in key order), but for `managedFields`, which the store never
//! keeps (the API server's bookkeeping; every write cleared it) and which is read as absent.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use super::labels::Labels;
use super::packed::{OptInt, OptTime};
pub use super::pairs::Pairs;
use super::text::Str;
use super::uid::Uid;

/// An object's metadata (Kubernetes' `ObjectMeta`, less `managedFields`). The fields most
/// objects leave out (deletion, finalizers, owners, generateName, selfLink) are kept in one box,
/// absent when all of them are: 8 bytes in most objects where they took 136.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectMeta {
    /// `metadata.annotations`.
    pub annotations: Option<Pairs>,
    /// `metadata.creationTimestamp` (written at a second's precision, as Kubernetes does).
    pub creation_timestamp: OptTime,
    /// `metadata.generation`.
    pub generation: OptInt,
    /// `metadata.labels`, shared with every object that has the same ones.
    pub labels: Option<Labels>,
    /// `metadata.name`.
    pub name: Option<Str>,
    /// `metadata.namespace`.
    pub namespace: Option<Str>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<Str>,
    /// `metadata.uid`.
    pub uid: Option<Uid>,
    /// The rest, when any of it is set (see [`ObjectMeta::rare`]).
    rare: Option<Box<RareMeta>>,
}

/// The metadata fields few objects carry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RareMeta {
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<Time>,
    /// `metadata.finalizers`.
    pub finalizers: Option<Vec<String>>,
    /// `metadata.generateName`.
    pub generate_name: Option<String>,
    /// `metadata.ownerReferences`.
    pub owner_references: Option<Vec<OwnerReference>>,
    /// `metadata.selfLink`.
    pub self_link: Option<String>,
}

static NO_RARE: RareMeta = RareMeta {
    deletion_grace_period_seconds: None,
    deletion_timestamp: None,
    finalizers: None,
    generate_name: None,
    owner_references: None,
    self_link: None,
};

impl ObjectMeta {
    /// The fields few objects carry (all absent when none is set).
    pub fn rare(&self) -> &RareMeta {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }

    /// `metadata.deletionTimestamp`: set while the object is being deleted.
    pub fn deletion_timestamp(&self) -> Option<&Time> {
        self.rare().deletion_timestamp.as_ref()
    }
}

/// The JSON form, as Kubernetes' `ObjectMeta` reads and writes it: every field in name order.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default)]
    annotations: Option<Pairs>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    generation: OptInt,
    #[serde(default)]
    labels: Option<Labels>,
    #[serde(default)]
    name: Option<Str>,
    #[serde(default)]
    namespace: Option<Str>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    resource_version: Option<Str>,
    #[serde(default)]
    self_link: Option<String>,
    #[serde(default)]
    uid: Option<Uid>,
}

impl<'de> Deserialize<'de> for ObjectMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(deserializer)?;
        let rare = RareMeta {
            deletion_grace_period_seconds: w.deletion_grace_period_seconds,
            deletion_timestamp: w.deletion_timestamp,
            finalizers: w.finalizers,
            generate_name: w.generate_name,
            owner_references: w.owner_references,
            self_link: w.self_link,
        };
        Ok(ObjectMeta {
            annotations: w.annotations,
            creation_timestamp: OptTime::from(w.creation_timestamp.map(|t| t.0)),
            generation: w.generation,
            labels: w.labels,
            name: w.name,
            namespace: w.namespace,
            resource_version: w.resource_version,
            uid: w.uid,
            rare: (rare != NO_RARE).then(|| Box::new(rare)),
        })
    }
}

impl Serialize for ObjectMeta {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Field by field in name order, as Kubernetes' `ObjectMeta` writes them.
        let rare = self.rare();
        let mut map = serializer.serialize_map(None)?;
        macro_rules! field {
            ($name:literal, $value:expr) => {
                if let Some(v) = &$value {
                    map.serialize_entry($name, v)?;
                }
            };
        }
        field!("annotations", self.annotations);
        field!("creationTimestamp", self.creation_timestamp.get().map(Time));
        field!(
            "deletionGracePeriodSeconds",
            rare.deletion_grace_period_seconds
        );
        field!("deletionTimestamp", rare.deletion_timestamp);
        field!("finalizers", rare.finalizers);
        field!("generateName", rare.generate_name);
        field!("generation", self.generation.get());
        field!("labels", self.labels);
        field!("name", self.name);
        field!("namespace", self.namespace);
        field!("ownerReferences", rare.owner_references);
        field!("resourceVersion", self.resource_version);
        field!("selfLink", rare.self_link);
        field!("uid", self.uid);
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_reads_and_writes_the_json_kubernetes_objectmeta_does() {
        let v = json!({
            "annotations": {"b": "2", "a": "1"},
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "deletionGracePeriodSeconds": 30,
            "deletionTimestamp": "2026-01-02T03:05:05Z",
            "finalizers": ["x/y"],
            "generateName": "m-",
            "generation": 3,
            "labels": {"vitistack.io/clusterid": "c1", "app": "web"},
            "name": "m1",
            "namespace": "ns",
            "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}],
            "resourceVersion": "42",
            "selfLink": "/x",
            "uid": "0000-1111"
        });
        let ours: ObjectMeta = serde_json::from_value(v.clone()).unwrap();
        let theirs: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
            serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&theirs).unwrap()
        );
        assert_eq!(serde_json::to_value(&ours).unwrap(), v);
        assert_eq!(ours.labels.as_ref().unwrap().get("app"), Some("web"));
        assert_eq!(
            ours.rare().finalizers.as_deref(),
            Some(&["x/y".to_string()][..])
        );
        assert!(ours.deletion_timestamp().is_some());
        assert_eq!(ours.labels.as_ref().unwrap().get("nope"), None);
        // Empty maps stay empty maps; null is absent.
        let e: ObjectMeta =
            serde_json::from_value(json!({"labels": {}, "annotations": null})).unwrap();
        assert_eq!(serde_json::to_value(&e).unwrap(), json!({"labels": {}}));
        assert!(e.rare.is_none(), "no box for fields none of which is set");
        assert!(e.deletion_timestamp().is_none());
    }

    #[test]
    fn managed_fields_are_read_as_absent() {
        let m: ObjectMeta = serde_json::from_value(json!({
            "name": "m",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
        }))
        .unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap(), json!({"name": "m"}));
    }
}
