use super::*;

fn settings(anonymous: &[&str], proxies: &[&str]) -> AuthSettings {
    AuthSettings {
        anonymous_from: anonymous.iter().map(|n| n.parse().expect("net")).collect(),
        trusted_proxies: proxies.iter().map(|n| n.parse().expect("net")).collect(),
        reload: Duration::from_secs(5),
        ..Default::default()
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[tokio::test]
async fn keys_anonymous_networks_and_revocation() {
    let auth = Auth::new(settings(&["10.0.0.0/8"], &[]), None).expect("auth");
    auth.set_keys(KeySet::parse("ops operator operator-key-0123456789\n", "keys").expect("keys"));
    let ops = auth
        .authenticate(Some("operator-key-0123456789"), ip("192.0.2.1"))
        .await
        .expect("a known key");
    assert_eq!((&*ops.name, ops.role), ("key:ops", Role::Operator));
    // A wrong key is refused even from the anonymous network: no silent downgrade.
    assert_eq!(
        auth.authenticate(Some("wrong-key-0123456789"), ip("10.1.1.1"))
            .await
            .expect_err("wrong key"),
        Refusal::Invalid
    );
    let anon = auth
        .authenticate(None, ip("10.1.1.1"))
        .await
        .expect("anonymous");
    assert_eq!((anon.role, anon.is_anonymous()), (Role::Viewer, true));
    assert_eq!(anon.rate_key().to_string(), "anonymous@10.1.1.1");
    assert_eq!(
        auth.authenticate(None, ip("192.0.2.1"))
            .await
            .expect_err("outside"),
        Refusal::Missing
    );

    let mut changes = auth.changes();
    assert_eq!(auth.standing(&ops).await, Standing::Kept);
    // The key is demoted: a socket opened as operator must connect again (as a viewer).
    auth.set_keys(KeySet::parse("ops viewer operator-key-0123456789\n", "keys").expect("keys"));
    assert!(changes.has_changed().expect("open"));
    changes.borrow_and_update();
    assert_eq!(auth.standing(&ops).await, Standing::Changed);
    auth.set_keys(KeySet::default());
    assert!(changes.has_changed().expect("open"));
    assert_eq!(auth.standing(&ops).await, Standing::Ended);
    assert_eq!(auth.standing(&anon).await, Standing::Kept);
}

#[test]
fn forwarded_for_is_believed_from_trusted_proxies_only() {
    let auth = Auth::new(settings(&[], &["10.0.0.0/8"]), None).expect("auth");
    // A direct client cannot claim another address.
    assert_eq!(
        auth.client_address(ip("192.0.2.7"), Some("127.0.0.1")),
        ip("192.0.2.7")
    );
    // Through the trusted proxy: the last hop that is not a trusted proxy.
    assert_eq!(
        auth.client_address(ip("10.0.0.2"), Some("127.0.0.1, 198.51.100.9, 10.0.0.3")),
        ip("198.51.100.9")
    );
    assert_eq!(auth.client_address(ip("10.0.0.2"), None), ip("10.0.0.2"));
    assert_eq!(
        auth.client_address(ip("10.0.0.2"), Some("garbage")),
        ip("10.0.0.2")
    );
}

#[test]
fn bearer_values() {
    assert_eq!(bearer("Bearer abc"), Some("abc"));
    assert_eq!(bearer("bearer   abc "), Some("abc"));
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer "), None);
    assert_eq!("ADMIN".parse::<Role>(), Ok(Role::Admin));
    assert!(Role::Admin > Role::Operator && Role::Operator > Role::Viewer);
}
