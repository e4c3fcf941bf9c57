use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    cfg: super::ServeConfig,
}

/// The settings `vitistack serve ARGS` starts with.
fn parse(args: &[&str]) -> super::ServeConfig {
    let mut argv = vec!["vitistack"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).expect("args").cfg
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

#[test]
fn api_timeout_is_the_operation_limit_under_the_old_name() {
    let secs = |args: &[&str]| {
        parse(args)
            .access
            .operation_timeout()
            .map(|d| d.as_secs_f64())
    };
    assert_eq!(secs(&[]).expect("default"), 30.0);
    assert_eq!(secs(&["--api-timeout", "2m"]).expect("2m"), 120.0);
    assert_eq!(secs(&["--api-timeout", "750ms"]).expect("ms"), 0.75);
    assert_eq!(secs(&["--operation-timeout-seconds", "5"]).expect("s"), 5.0);
    let both = secs(&["--api-timeout", "10s", "--operation-timeout-seconds", "5"])
        .expect_err("one setting, two names");
    assert!(both.to_string().contains("set one of them"), "{both}");
    let bad = secs(&["--api-timeout", "soon"]).expect_err("not a duration");
    assert!(
        bad.to_string().contains("API_TIMEOUT") && bad.to_string().contains("soon"),
        "{bad}"
    );
    assert!(secs(&["--api-timeout", "0s"]).is_err());
}

#[test]
fn tls_min_version_and_ca_file_are_checked_with_a_reason() {
    use crate::http::tls::TlsMinVersion;
    assert_eq!(
        parse(&[]).access.tls_min_version().expect("default"),
        TlsMinVersion::Tls12
    );
    assert_eq!(
        parse(&["--tls-min-version", "TLS1.3"])
            .access
            .tls_min_version()
            .expect("1.3"),
        TlsMinVersion::Tls13
    );
    let old = parse(&["--tls-min-version", "1.1"])
        .access
        .validate()
        .expect_err("1.1 refused");
    assert!(old.to_string().contains("TLS_MIN_VERSION"), "{old}");
    assert!(old.to_string().contains("1.2 or 1.3"), "{old}");
    let lone = parse(&["--tls-ca-file", "/etc/ca.pem"])
        .access
        .validate()
        .expect_err("a CA file without TLS");
    assert!(lone.to_string().contains("TLS_CERT_FILE"), "{lone}");
}

#[test]
fn the_old_cache_settings_are_accepted_checked_and_keep_their_secret() {
    assert!(parse(&["--cache-ttl", "5m"]).validate().is_ok());
    let bad = parse(&["--cache-ttl", "forever"])
        .validate()
        .expect_err("not a duration");
    assert!(
        bad.to_string().contains("CACHE_TTL") && bad.to_string().contains("forever"),
        "{bad}"
    );
    let cfg = parse(&["--redis-url", "redis://:s3cr3t-pass@cache:6379/0"]);
    assert!(cfg.validate().is_ok(), "REDIS_URL does not stop the start");
    assert!(cfg.redis_url.is_some());
    assert!(!format!("{cfg:?}").contains("s3cr3t-pass"));
}

#[test]
fn the_health_check_interval_is_a_duration_above_zero() {
    assert_eq!(
        parse(&[]).health_check_interval().expect("default"),
        std::time::Duration::from_secs(30),
        "the old operator's default"
    );
    assert_eq!(
        parse(&["--health-check-interval", "500ms"])
            .health_check_interval()
            .expect("set"),
        std::time::Duration::from_millis(500)
    );
    for bad in ["0s", "soon"] {
        let e = parse(&["--health-check-interval", bad])
            .validate()
            .expect_err("refused");
        assert!(
            e.to_string().contains("HEALTH_CHECK_INTERVAL") && e.to_string().contains(bad),
            "{e}"
        );
    }
}

#[test]
fn the_connection_limits_default_to_the_old_servers_and_refuse_what_would_serve_nothing() {
    let limits = parse(&[]).connection_limits().expect("defaults");
    assert_eq!(
        (
            limits.read,
            limits.write,
            limits.idle,
            limits.max_header_bytes
        ),
        (
            std::time::Duration::from_secs(20),
            std::time::Duration::from_secs(20),
            std::time::Duration::from_secs(120),
            1 << 20
        ),
        "20 s as the old server read and wrote; Go's header limit"
    );
    for (flag, bad, setting) in [
        ("--server-read-timeout", "0s", "SERVER_READ_TIMEOUT"),
        ("--server-write-timeout", "never", "SERVER_WRITE_TIMEOUT"),
        ("--server-idle-timeout", "0", "SERVER_IDLE_TIMEOUT"),
        (
            "--server-max-header-bytes",
            "100",
            "SERVER_MAX_HEADER_BYTES",
        ),
    ] {
        let e = parse(&[flag, bad]).validate().expect_err("refused");
        assert!(
            e.to_string().contains(setting) && e.to_string().contains(bad),
            "{e}"
        );
    }
}
