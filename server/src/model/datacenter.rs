//! Which datacenter an object was read from. Viti Stack runs one management cluster per
//! datacenter; one server can watch several, so an object's identity is its datacenter, kind,
//! namespace and name, and relationships resolve within one datacenter.

use std::sync::Arc;

/// The key of a datacenter: the kubeconfig's file name (`DATACENTERS_DIR`), the context
/// (`KUBE_CONTEXTS`), the demo's generated name, or the hub agent's datacenter. Empty is the one
/// datacenter of a single-cluster deployment, so everything a single-cluster server wrote before
/// (global ids, cursors, history rows) keeps its meaning.
///
/// Cheap to clone (one shared string); every object of a datacenter shares it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Datacenter(Arc<str>);

impl Datacenter {
    /// The datacenter with this key.
    pub fn new(key: &str) -> Self {
        Datacenter(Arc::from(key))
    }

    /// The key ("" for the one datacenter of a single-cluster deployment).
    pub fn key(&self) -> &str {
        &self.0
    }

    /// True for the one datacenter of a single-cluster deployment.
    pub fn is_single(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Datacenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Datacenter {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Datacenter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let key = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Datacenter::new(&key))
    }
}

/// Why a text is not a datacenter key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Empty or too long.
    #[error("a datacenter key has 1 to 63 characters; `{0}` has {1}")]
    Length(String, usize),
    /// A character a key does not hold.
    #[error("a datacenter key holds letters, digits, `-`, `_` and `.`; `{0}` has `{1}`")]
    Character(String, char),
    /// Starts with a dot (hidden files are not datacenters).
    #[error("a datacenter key does not start with `.`: `{0}`")]
    Dot(String),
}

/// A datacenter key read from configuration or a request: 1–63 characters of letters, digits,
/// `-`, `_` and `.`, as a file name mounted from a Secret or a kubeconfig context can be and as a
/// metrics label and a URL can carry unescaped.
pub fn valid_key(key: &str) -> Result<(), KeyError> {
    if key.is_empty() || key.len() > 63 {
        return Err(KeyError::Length(key.to_string(), key.len()));
    }
    if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(KeyError::Character(key.to_string(), c));
    }
    if key.starts_with('.') {
        return Err(KeyError::Dot(key.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_and_the_single_datacenter_is_empty() {
        assert!(Datacenter::default().is_single());
        assert!(!Datacenter::new("no-west-az1").is_single());
        assert!(valid_key("no-west-az1").is_ok());
        assert!(valid_key("dc_2.prod").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(64)] {
            assert!(valid_key(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
