//! Typed settings from the environment (and flags), with the old operator's names and defaults.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

/// Settings of `vitistack serve`. Every flag can also be set by the environment variable shown.
#[derive(Args, Clone, Debug)]
pub struct ServeConfig {
    /// Port to listen on (the old vitistack-operator's port).
    #[arg(long, env = "PORT", default_value_t = 9991)]
    pub port: u16,

    /// Address to bind. Default: all interfaces, or 127.0.0.1 when DEVELOPMENT=true (as the old operator did).
    #[arg(long, env = "BIND_ADDRESS")]
    pub bind_address: Option<IpAddr>,

    /// Development mode: bind to localhost only unless BIND_ADDRESS says otherwise.
    #[arg(long, env = "DEVELOPMENT", default_value_t = false)]
    pub development: bool,

    /// Log level filter (error, warn, info, debug, trace, or a tracing directive like `vitistack=debug`).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Log as JSON lines (the old operator's default); `false` for human-readable text.
    #[arg(long, env = "LOG_JSON_LOGGING", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_json: bool,

    /// Database for history and embedded-mode persistence: `sqlite://FILE` or `postgres://…`.
    /// Read and checked now; the history store that uses it is not built yet.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://vitistack.db")]
    pub database_url: String,

    /// Name of the Vitistack singleton (the old operator's VITISTACKCRDNAME).
    #[arg(long, env = "VITISTACKCRDNAME", default_value = "vitistack")]
    pub vitistack_name: String,

    /// Load the generated demo fleet (every pipeline stage represented) into the embedded store.
    #[arg(long, env = "DEMO", default_value_t = false)]
    pub demo: bool,

    /// Number of clusters in the demo fleet (0 = the small dashboard demo).
    #[arg(long, env = "DEMO_CLUSTERS", default_value_t = 0)]
    pub demo_clusters: usize,

    /// Largest `first`/`last` a connection accepts.
    #[arg(long, env = "MAX_PAGE_SIZE", default_value_t = 500)]
    pub max_page_size: usize,

    /// Deepest query selection accepted.
    #[arg(long, env = "MAX_QUERY_DEPTH", default_value_t = 16)]
    pub max_query_depth: usize,

    /// Manifest files or directories to load at start-up (multi-document YAML or JSON).
    #[arg(env = "MANIFESTS", value_delimiter = ',')]
    pub manifests: Vec<PathBuf>,
}

impl ServeConfig {
    /// The socket address to listen on.
    pub fn listen_addr(&self) -> SocketAddr {
        let ip = self.bind_address.unwrap_or(if self.development {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        });
        SocketAddr::new(ip, self.port)
    }

    /// Check settings that clap cannot; the error names the variable and what it accepts.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.database_url.starts_with("sqlite:")
            || self.database_url.starts_with("postgres://")
            || self.database_url.starts_with("postgresql://"))
        {
            return Err(format!(
                "DATABASE_URL `{}` must start with sqlite: or postgres://",
                redact_url(&self.database_url)
            ));
        }
        if self.max_page_size == 0 {
            return Err("MAX_PAGE_SIZE must be at least 1".into());
        }
        Ok(())
    }
}

/// A database URL with its password blanked, for messages and logs.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let cred = &url[s + 3..at];
            match cred.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_passwords_are_blanked() {
        assert_eq!(
            redact_url("postgres://app:hunter2@db:5432/v"),
            "postgres://app:***@db:5432/v"
        );
        assert_eq!(redact_url("sqlite://vitistack.db"), "sqlite://vitistack.db");
    }
}
