use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    cfg: super::ServeConfig,
}

#[test]
fn debug_of_the_settings_shows_no_secret() {
    let cfg = Cli::try_parse_from([
        "vitistack",
        "--database-url",
        "postgres://app:hunter2@db:5432/v?sslpassword=k3yp4ss",
        "--webhook-urls",
        "https://hooks.example.com/services/T0/B0/XOXOsecretpath,https://other.example.org/h?token=qu3ry",
        "--webhook-secret",
        "hm4c-key",
    ])
    .expect("args")
    .cfg;
    let text = format!("{cfg:?} {:?} {:?}", cfg.webhook_settings(), cfg.db.pool());
    for secret in ["hunter2", "k3yp4ss", "XOXOsecretpath", "qu3ry", "hm4c-key"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains("https://hooks.example.com"), "{text}");
    // The values themselves are intact for use.
    assert_eq!(cfg.webhook_settings().secret.as_deref(), Some("hm4c-key"));
    assert!(cfg.db.database_url.contains("hunter2"));
}

#[test]
fn leader_election_needs_the_kube_source_and_names_the_lease_and_replica() {
    let parse = |args: &[&str]| {
        let mut argv = vec!["vitistack"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("args").cfg
    };
    let embedded = parse(&["--leader-election", "--source", "embedded"]);
    let e = embedded.validate().expect_err("refused").to_string();
    assert!(
        e.contains("LEADER_ELECTION") && e.contains("kube source"),
        "{e}"
    );
    let short = parse(&[
        "--leader-election",
        "--source",
        "kube",
        "--lease-duration-seconds",
        "1",
    ]);
    let e = short.validate().expect_err("refused").to_string();
    assert!(
        e.contains("LEASE_DURATION_SECONDS") && e.contains('1'),
        "{e}"
    );
    let cfg = parse(&[
        "--leader-election",
        "--source",
        "kube",
        "--pod-name",
        "web-7f9c-x2",
        "--pod-namespace",
        "infra",
    ]);
    cfg.validate().expect("valid");
    let lease = cfg.lease_settings("default").expect("on");
    assert_eq!(
        (
            lease.name.as_str(),
            lease.namespace.as_str(),
            lease.identity.as_str()
        ),
        ("vitistack-graphql", "infra", "web-7f9c-x2")
    );
    // Without the downward API: the client's namespace, and a name of the host's.
    let cfg = parse(&["--leader-election", "--source", "kube"]);
    let lease = cfg.lease_settings("team-ops").expect("on");
    assert_eq!(lease.namespace, "team-ops");
    assert!(!lease.identity.is_empty());
    assert!(parse(&[]).lease_settings("x").is_none());
}
