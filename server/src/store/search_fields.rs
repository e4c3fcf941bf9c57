//! What search finds an object by, besides its name: each searchable value of each kind (its
//! namespace, labels, IP and MAC addresses, host, image and cluster id), with the field it is,
//! and how a value compares with a word and is hashed for the index (`search.rs`).

use std::hash::{Hash, Hasher};

use crate::model::{LABEL_CLUSTER_ID, Resource};

/// What a search matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, async_graphql::Enum)]
#[graphql(name = "SearchField")]
pub enum Field {
    /// The name (whole, its start, or the start of one of its words).
    Name,
    /// The namespace.
    Namespace,
    /// A label, as `key` or `key=value`.
    Label,
    /// An IP address (v4 or v6) the object reports or was given.
    IpAddress,
    /// A MAC address.
    MacAddress,
    /// The host (Kubernetes Node) it runs on, or its own host name.
    Host,
    /// An operating system or disk image.
    Image,
    /// The clusterId of the Kubernetes cluster it belongs to.
    ClusterId,
}

/// A searchable value: a string, or a label's `key=value` (not put together unless shown).
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// The value itself.
    Plain(&'a str),
    /// A label: `key=value`.
    Label(&'a str, &'a str),
}

impl Value<'_> {
    /// Whether it is `word`, ASCII case-insensitively.
    pub(super) fn is(&self, word: &str) -> bool {
        match *self {
            Value::Plain(v) => v.eq_ignore_ascii_case(word),
            Value::Label(k, v) => {
                word.len() == k.len() + 1 + v.len() && {
                    let (wk, rest) = word.split_at(k.len());
                    wk.eq_ignore_ascii_case(k)
                        && rest.as_bytes().first() == Some(&b'=')
                        && rest[1..].eq_ignore_ascii_case(v)
                }
            }
        }
    }

    pub(super) fn hash(&self) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        let mut len = 0;
        let parts: [&str; 3] = match *self {
            Value::Plain(v) => [v, "", ""],
            Value::Label(k, v) => [k, "=", v],
        };
        for part in parts {
            for b in part.bytes() {
                h.write_u8(b.to_ascii_lowercase());
            }
            len += part.len();
        }
        len.hash(&mut h);
        h.finish()
    }
}

impl std::fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Plain(v) => f.write_str(v),
            Value::Label(k, v) => write!(f, "{k}={v}"),
        }
    }
}

/// Every searchable value of an object other than its name, with its field.
pub fn fields<'r>(r: &'r Resource, out: &mut dyn FnMut(Field, Value<'r>)) {
    if !r.namespace().is_empty() {
        out(Field::Namespace, Value::Plain(r.namespace()));
    }
    if let Some(labels) = &r.meta().labels {
        for (k, v) in labels.iter() {
            out(Field::Label, Value::Plain(k));
            out(Field::Label, Value::Label(k, v));
            if k == LABEL_CLUSTER_ID {
                out(Field::ClusterId, Value::Plain(v));
            }
        }
    }
    match r {
        Resource::Machine(m) => {
            if let Some(s) = &m.status {
                each(out, Field::IpAddress, s.ip_addresses.as_deref());
                each(out, Field::IpAddress, s.ipv6_addresses.as_deref());
                each(out, Field::IpAddress, s.public_ip_addresses.as_deref());
                each(out, Field::IpAddress, s.private_ip_addresses.as_deref());
                for i in s.network_interfaces.iter().flatten() {
                    each(out, Field::IpAddress, i.ip_addresses.as_deref());
                    each(out, Field::IpAddress, i.ipv6_addresses.as_deref());
                    if let Some(mac) = &i.mac_address {
                        out(Field::MacAddress, Value::Plain(mac));
                    }
                }
                if let Some(h) = &s.hostname {
                    out(Field::Host, Value::Plain(h));
                }
            }
            if let Some(os) = &m.spec.os {
                for image in [&os.image_id, &os.image_family].into_iter().flatten() {
                    out(Field::Image, Value::Plain(image));
                }
            }
        }
        Resource::KubernetesCluster(kc) => {
            out(Field::ClusterId, Value::Plain(&kc.spec.data.cluster_id))
        }
        Resource::NetworkConfiguration(nc) => {
            // The spec's interfaces and the status's: two generated types, the same fields.
            let spec = nc.spec.network_interfaces.iter().flatten();
            let spec = spec.map(|i| (&i.ipv4_addresses, &i.ipv6_addresses, &i.mac_address));
            let status = nc.status.iter();
            let status = status.flat_map(|s| s.network_interfaces.iter().flatten());
            let status = status.map(|i| (&i.ipv4_addresses, &i.ipv6_addresses, &i.mac_address));
            for (v4, v6, mac) in spec.chain(status) {
                each(out, Field::IpAddress, v4.as_deref());
                each(out, Field::IpAddress, v6.as_deref());
                if let Some(mac) = mac {
                    out(Field::MacAddress, Value::Plain(mac));
                }
            }
        }
        Resource::ControlPlaneVirtualSharedIp(vip) => {
            out(Field::ClusterId, Value::Plain(&vip.spec.cluster_identifier));
            if let Some(s) = &vip.status {
                each(out, Field::IpAddress, s.load_balancer_ips.as_deref());
            }
        }
        Resource::IpAllocation(a) => {
            let addresses = [
                a.spec.requested_address.as_ref(),
                a.status.as_ref().and_then(|s| s.address.as_ref()),
            ];
            for address in addresses.into_iter().flatten() {
                out(Field::IpAddress, Value::Plain(address));
            }
        }
        Resource::ClusterStorage(cs) => out(Field::ClusterId, Value::Plain(&cs.spec.cluster_id)),
        Resource::VirtualMachineInstance(vmi) => {
            if let Some(s) = &vmi.status {
                if let Some(node) = &s.node_name {
                    out(Field::Host, Value::Plain(node));
                }
                for i in s.interfaces.iter().flatten() {
                    each(out, Field::IpAddress, i.ip_addresses.as_deref());
                }
            }
        }
        Resource::Node(n) => {
            if let Some(s) = &n.status {
                for a in s.addresses.iter().flatten() {
                    let field = if a.type_ == "Hostname" {
                        Field::Host
                    } else {
                        Field::IpAddress
                    };
                    out(field, Value::Plain(&a.address));
                }
                if let Some(info) = &s.node_info {
                    out(Field::Image, Value::Plain(&info.os_image));
                }
            }
        }
        _ => {}
    }
}

/// Each of `values` as `field`.
fn each<'r, S: AsRef<str>>(
    out: &mut dyn FnMut(Field, Value<'r>),
    field: Field,
    values: Option<&'r [S]>,
) {
    for v in values.into_iter().flatten() {
        out(field, Value::Plain(v.as_ref()));
    }
}
