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
