//! Who an object or an application record is, for the timeline's numbering of them.

use super::applications::Record;

/// Who an object is, for numbering it: a digest of its datacenter, kind, API version, namespace,
/// name and uid. A digest rather than the six strings: the writer holds one per object of the
/// graph, and at a million objects the strings took about 250 B each (`cargo bench --bench
/// kube_sync`); 128 bits of SHA-256 over the length-prefixed fields cannot be made to collide by
/// naming objects, and do not by chance (about 10^-27 for a million objects).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Ident(u128);

impl Ident {
    pub(super) fn digest(fields: [&str; 6]) -> Self {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        for f in fields {
            h.update((f.len() as u64).to_le_bytes());
            h.update(f.as_bytes());
        }
        let d = h.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&d[..16]);
        Ident(u128::from_le_bytes(first))
    }

    pub(super) fn of(r: &crate::model::Resource) -> Self {
        Self::digest([
            r.datacenter().key(),
            r.kind().name(),
            r.version(),
            r.namespace(),
            r.name(),
            &r.uid(),
        ])
    }

    pub(super) fn of_record(r: &Record) -> Self {
        let (dc, kind, ns, name) = r.ident();
        Self::digest([&dc, kind, "", &ns, &name, ""])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_field_and_its_bounds_tell_objects_apart() {
        let base = Ident::digest(["dc", "Machine", "v1alpha1", "ns", "m1", "u1"]);
        assert_eq!(
            base,
            Ident::digest(["dc", "Machine", "v1alpha1", "ns", "m1", "u1"])
        );
        for other in [
            ["dc2", "Machine", "v1alpha1", "ns", "m1", "u1"],
            ["dc", "Node", "v1alpha1", "ns", "m1", "u1"],
            ["dc", "Machine", "v1", "ns", "m1", "u1"],
            ["dc", "Machine", "v1alpha1", "ns", "m2", "u1"],
            ["dc", "Machine", "v1alpha1", "ns", "m1", "u2"],
            // The same letters, split elsewhere.
            ["dc", "Machine", "v1alpha1", "nsm", "1", "u1"],
            ["dc", "Machine", "v1alpha1", "n", "sm1", "u1"],
        ] {
            assert_ne!(base, Ident::digest(other), "{other:?}");
        }
    }
}
