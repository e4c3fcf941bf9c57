//! What counts as a credential by its name, and what a blanked one reads as: the rule both the
//! schema checks ([`super::validation`]) and the redaction ([`super::redact`]) apply.

/// What a redacted value reads as.
pub const REDACTED: &str = "<redacted>";

/// Endings of a (normalised) field name that say it holds a credential.
const SECRET_SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "token",
    "secret",
    "privatekey",
    "apikey",
    "accesskey",
    "secretkey",
    "signingkey",
    "encryptionkey",
    "kubeconfig",
    "credentials",
    "credential",
];

/// Endings that make a name a *reference* to a credential (a Secret's name, a key within it, a
/// file path), which is not secret and is worth showing.
const REFERENCE_SUFFIXES: &[&str] = &["ref", "refs", "name", "names", "namespace", "path", "file"];

/// True when a field (or map key) named `name` holds a credential: its name, lowercased and
/// without `-`, `_` or `.`, ends with one of the credential words (`token`, `password`,
/// `secret`, `privateKey`, `kubeconfig`, `credentials`, …) or starts with `userdata`, and is
/// not a reference (`…Ref`, `…Name`, `…Namespace`, `…Path`, `…File`). Keys with a prefix
/// (`example.com/token`) are judged by their last segment.
pub fn is_secret_name(name: &str) -> bool {
    let last = name.rsplit('/').next().unwrap_or(name);
    let n: String = last
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    if n.is_empty() || REFERENCE_SUFFIXES.iter().any(|s| n.ends_with(s)) {
        return false;
    }
    n.starts_with("userdata") || SECRET_SUFFIXES.iter().any(|s| n.ends_with(s))
}
