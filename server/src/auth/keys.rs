//! API keys: read from a file (a mounted Secret), kept and compared only as SHA-256 hashes.
//!
//! One key per line, fields separated by spaces: `NAME ROLE KEY [expires=RFC3339]
//! [namespaces=NS,NS…]`, where KEY is the key itself or `sha256:<64 hex digits>` (its hash, so the
//! file need not hold the key). A key with `namespaces=` sees the objects of those namespaces only,
//! in every datacenter, and no cluster-scoped kind (as a Kubernetes Role in each namespace would
//! grant); its mutations are refused outside them.
//! `#` starts a comment. A refused file names the line and the reason, never a key.

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Role;

/// One key, as its hash.
#[derive(Clone, Debug)]
pub struct ApiKey {
    /// Who holds it (shown in history and logs).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    /// When it stops working.
    pub expires: Option<jiff::Timestamp>,
    /// What it may see (`namespaces=`: only those namespaces).
    pub scope: crate::store::Scope,
}

/// Every key the server accepts now.
///
/// A presented key is hashed and looked up by its hash, then compared with the key found in
/// constant time. The lookup's time depends only on the presented key's own hash, which tells an
/// attacker nothing about the keys held (finding a key from its hash is the preimage problem), so
/// the cost is the same for 1 key or 1,000 (`cargo bench --bench auth_cost`: comparing with every
/// key in constant time took 40 µs per request at 1,000 keys).
#[derive(Clone, Debug, Default)]
pub struct KeySet {
    keys: Vec<ApiKey>,
    by_hash: std::collections::HashMap<[u8; 32], usize>,
}

/// Why a key file was not taken (the keys themselves are never in it).
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The file could not be read.
    #[error("API_KEYS_FILE {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A line of it is wrong.
    #[error("{origin}:{line}: {reason}")]
    Line {
        origin: String,
        line: usize,
        reason: String,
    },
}

/// The hash of a secret as a file gives it: the secret itself (at least 16 characters) or
/// `sha256:<64 hex digits>`; `what` (key, token) and `owner` name it in the reason, which never
/// holds the secret.
pub(crate) fn secret_hash(given: &str, what: &str, owner: &str) -> Result<[u8; 32], String> {
    match given.strip_prefix("sha256:") {
        Some(hex) => parse_hex(hex)
            .ok_or_else(|| format!("a `sha256:` {what} must be followed by 64 hexadecimal digits")),
        None if given.len() < 16 => Err(format!(
            "the {what} of `{owner}` is {} characters long; at least 16 are required",
            given.len()
        )),
        None => Ok(hash(given)),
    }
}

/// SHA-256 of a presented key.
pub fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl KeySet {
    /// The keys of a file's text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<KeySet, KeysError> {
        let mut keys: Vec<ApiKey> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let at = |reason: String| KeysError::Line {
                origin: origin.to_string(),
                line: n + 1,
                reason,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, role, key, rest @ ..] = fields.as_slice() else {
                return Err(at(
                    "expected `NAME ROLE KEY [expires=RFC3339]` (the key itself is not shown)"
                        .into(),
                ));
            };
            // No field but a valid name is ever quoted: a key written in the wrong column must
            // not end up in a log.
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@:".contains(c))
            {
                return Err(at(
                    "the name (first column) may hold letters, digits and - _ . @ : only".into(),
                ));
            }
            let role: Role = role.parse().map_err(|_| {
                at("the role (second column) must be viewer, operator or admin".into())
            })?;
            let hash = secret_hash(key, "key", name).map_err(at)?;
            let mut expires = None;
            let mut scope = crate::store::Scope::All;
            for option in rest {
                if let Some(t) = option.strip_prefix("expires=") {
                    expires =
                        Some(t.parse::<jiff::Timestamp>().map_err(|e| {
                            at(format!("`expires={t}` is not an RFC 3339 time: {e}"))
                        })?);
                } else if let Some(list) = option.strip_prefix("namespaces=") {
                    scope = namespaces_scope(list, role).map_err(at)?;
                } else {
                    return Err(at(
                        "after the key only `expires=RFC3339` and `namespaces=NS,NS…` may follow \
                         (the key itself holds no spaces)"
                            .into(),
                    ));
                }
            }
            if keys.iter().any(|k| k.name == *name) {
                return Err(at(format!("the name `{name}` is given twice")));
            }
            if keys.iter().any(|k| k.hash == hash) {
                return Err(at(format!("the key of `{name}` is given twice")));
            }
            keys.push(ApiKey {
                name: name.to_string(),
                role,
                hash,
                expires,
                scope,
            });
        }
        let by_hash = keys.iter().enumerate().map(|(i, k)| (k.hash, i)).collect();
        Ok(KeySet { keys, by_hash })
    }

    /// Read and parse a key file.
    pub fn read(path: &Path) -> Result<KeySet, KeysError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeysError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        KeySet::parse(&text, &path.display().to_string())
    }

    /// The key whose hash is `hash`, if it is valid at `now`.
    pub fn find(&self, hash: &[u8; 32], now: jiff::Timestamp) -> Option<&ApiKey> {
        self.holding(hash)
            .filter(|k| k.expires.is_none_or(|e| e > now))
    }

    fn holding(&self, hash: &[u8; 32]) -> Option<&ApiKey> {
        let k = self.keys.get(*self.by_hash.get(hash)?)?;
        bool::from(k.hash.ct_eq(hash)).then_some(k)
    }

    /// True when a key has this hash, expired or not.
    pub fn holds(&self, hash: &[u8; 32]) -> bool {
        self.holding(hash).is_some()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there is no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The earliest expiry still ahead of `now`.
    pub fn next_expiry(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        self.keys
            .iter()
            .filter_map(|k| k.expires)
            .filter(|e| *e > now)
            .min()
    }
}

/// The scope of `namespaces=LIST` on a key of `role`.
fn namespaces_scope(list: &str, role: Role) -> Result<crate::store::Scope, String> {
    if role == Role::Admin {
        return Err(
            "an admin key sees everything: `namespaces=` is for viewer and operator keys".into(),
        );
    }
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    if let Some(bad) = names.iter().find(|n| !is_namespace_name(n)) {
        return Err(format!(
            "`namespaces=`: `{bad}` is not a namespace name (lower-case letters, digits and `-`, \
             at most 63, starting and ending with a letter or digit)"
        ));
    }
    Ok(crate::store::Scope::limited(
        crate::store::Grants::namespaces(&names),
    ))
}

/// A DNS label, as Kubernetes requires of a namespace's name.
pub fn is_namespace_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Lower-case hexadecimal of a hash (for `sha256:` lines).
pub fn to_hex(hash: &[u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_hash_and_lines_are_checked() {
        let hashed = to_hex(&hash("operator-key-0123456789"));
        let text = format!(
            "# comment\nci viewer viewer-key-0123456789\nops operator sha256:{hashed} # trailing\n\
             old admin admin-key-0123456789 expires=2020-01-01T00:00:00Z\n"
        );
        let set = KeySet::parse(&text, "keys").expect("parses");
        assert_eq!(set.len(), 3);
        let now = jiff::Timestamp::now();
        let ci = set.find(&hash("viewer-key-0123456789"), now).expect("ci");
        assert_eq!((ci.name.as_str(), ci.role), ("ci", Role::Viewer));
        let ops = set
            .find(&hash("operator-key-0123456789"), now)
            .expect("ops");
        assert_eq!(ops.role, Role::Operator);
        assert!(
            set.find(&hash("admin-key-0123456789"), now).is_none(),
            "expired"
        );
        assert!(set.find(&hash("nobody-key-0123456789"), now).is_none());
        assert!(ci.scope.is_all(), "no namespaces= sees everything");

        let text = "t1 operator team1-key-0123456789 namespaces=team-1,team-2\n\
                    t2 viewer team2-key-0123456789 namespaces=team-2,team-1\n";
        let set = KeySet::parse(text, "keys").expect("parses");
        let t1 = set.find(&hash("team1-key-0123456789"), now).expect("t1");
        let t2 = set.find(&hash("team2-key-0123456789"), now).expect("t2");
        let dc = crate::model::Datacenter::default();
        use crate::model::Kind;
        assert!(t1.scope.sees(&dc, Kind::KubernetesCluster, "team-2"));
        assert!(!t1.scope.sees(&dc, Kind::KubernetesCluster, "team-3"));
        assert!(
            !t1.scope.sees(&dc, Kind::Node, ""),
            "no cluster-scoped kind"
        );
        assert_eq!(t1.scope, t2.scope, "equal grants are one scope");
        assert_ne!(t1.scope.id(), 0);

        for (text, reason) in [
            ("a viewer", "keys:1: expected `NAME ROLE KEY"),
            (
                "a king k0123456789abcdef",
                "keys:1: the role (second column) must be",
            ),
            (
                "a k0123456789abcdef viewer",
                "keys:1: the role (second column) must be",
            ),
            (
                "a viewer short",
                "keys:1: the key of `a` is 5 characters long",
            ),
            (
                "a viewer sha256:abc",
                "keys:1: a `sha256:` key must be followed by 64",
            ),
            (
                "a viewer k0123456789abcdef\na admin k0123456789abcdeg",
                "keys:2: the name `a` is given twice",
            ),
            (
                "a viewer k0123456789abcdef\nb admin k0123456789abcdef",
                "keys:2: the key of `b` is given twice",
            ),
            (
                "a viewer k0123456789abcdef expires=soon",
                "keys:1: `expires=soon` is not",
            ),
            (
                "a viewer k0123456789abcdef until=x",
                "keys:1: after the key only `expires=",
            ),
            (
                "a viewer k0123456789abcdef namespaces=team-1,Team_2",
                "keys:1: `namespaces=`: `Team_2` is not a namespace name",
            ),
            (
                "a viewer k0123456789abcdef namespaces=",
                "keys:1: `namespaces=`: `` is not a namespace name",
            ),
            (
                "a admin k0123456789abcdef namespaces=team-1",
                "keys:1: an admin key sees everything",
            ),
            (
                "a viewer k0123456789abcdef k0123456789abcdefgh",
                "keys:1: after the key only",
            ),
            (
                "a k0123456789abcdef viewer",
                "keys:1: the role (second column) must be",
            ),
            (
                "a/b viewer k0123456789abcdef",
                "keys:1: the name (first column) may hold",
            ),
        ] {
            let e = KeySet::parse(text, "keys").expect_err(text).to_string();
            assert!(e.starts_with(reason), "{text}: {e}");
            assert!(!e.contains("k0123456789abcde"), "a key in an error: {e}");
        }
    }
}
