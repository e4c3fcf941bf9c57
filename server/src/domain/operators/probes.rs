//! The operators' endpoints, probed on their intervals (`*_OPERATOR_ENDPOINT`,
//! `*_SYNC_INTERVAL`): the latest answer of each, what the judgment reads besides the graph.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::Operator;

/// What the last probe of an operator's endpoint found.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Scheme, host and port probed (no path, no credentials).
    pub endpoint: String,
    /// When it was last probed (RFC 3339); None before the first probe ended.
    pub at: Option<String>,
    /// The HTTP status it answered; None when it did not answer.
    pub status: Option<u16>,
    /// Why it is not healthy (connection refused, timeout, HTTP 500).
    pub error: Option<String>,
    /// The `version` of a JSON answer, when it gave one.
    pub version: Option<String>,
    /// When it last answered 2xx (RFC 3339), kept across failed probes.
    pub last_ok: Option<String>,
}

/// What judging the operators needs besides the graph: the probes and the stall time.
#[derive(Clone, Debug)]
pub struct Judge {
    /// The latest probes.
    pub probes: Arc<Probes>,
    /// How long an object may go without status before its operator is unhealthy.
    pub stall: Duration,
}

impl Default for Judge {
    fn default() -> Self {
        Judge {
            probes: Probes::none(),
            stall: Duration::from_secs(300),
        }
    }
}

/// Where and how often to probe one operator.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    /// The operator.
    pub operator: Operator,
    /// Its endpoint URL.
    pub url: String,
    /// How often.
    pub interval: Duration,
}

/// The latest probe of each operator with a configured endpoint.
#[derive(Debug, Default)]
pub struct Probes {
    latest: Mutex<Vec<(Operator, Probe)>>,
}

impl Probes {
    /// No endpoint configured: operators are judged from the graph alone.
    pub fn none() -> Arc<Self> {
        Arc::new(Probes::default())
    }

    /// Probe each target every `interval` until `stop` turns true.
    pub fn start(targets: Vec<ProbeTarget>, stop: tokio::sync::watch::Receiver<bool>) -> Arc<Self> {
        let probes = Arc::new(Probes {
            latest: Mutex::new(
                targets
                    .iter()
                    .map(|t| {
                        (
                            t.operator,
                            Probe {
                                endpoint: origin(&t.url),
                                ..Probe::default()
                            },
                        )
                    })
                    .collect(),
            ),
        });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build();
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "operator probes cannot start");
                return probes;
            }
        };
        for t in targets {
            let (probes, client, mut stop) = (probes.clone(), client.clone(), stop.clone());
            tokio::spawn(async move {
                loop {
                    let found = probe(&client, &t.url).await;
                    if found.error.is_some() {
                        tracing::warn!(operator = t.operator.name(), endpoint = %found.endpoint, error = ?found.error, "operator probe failed");
                    }
                    probes.set(t.operator, found);
                    tokio::select! {
                        _ = tokio::time::sleep(t.interval) => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            });
        }
        probes
    }

    fn set(&self, operator: Operator, mut probe: Probe) {
        let mut latest = self.latest.lock();
        if let Some(slot) = latest.iter_mut().find(|(o, _)| *o == operator) {
            probe.last_ok = if probe.error.is_none() {
                probe.at.clone()
            } else {
                slot.1.last_ok.take()
            };
            slot.1 = probe;
        }
    }

    /// The latest probe of `operator`; None when its endpoint is not configured.
    pub fn get(&self, operator: Operator) -> Option<Probe> {
        self.latest
            .lock()
            .iter()
            .find(|(o, _)| *o == operator)
            .map(|(_, p)| p.clone())
    }
}

/// `scheme://host:port` of a URL: what may be shown of an endpoint (a path or user info may
/// carry a token).
fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or_default();
            match u.port() {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        }
        Err(_) => "(not a URL)".into(),
    }
}

async fn probe(client: &reqwest::Client, url: &str) -> Probe {
    let endpoint = origin(url);
    let at = Some(jiff::Timestamp::now().to_string());
    match client.get(url).send().await {
        Ok(response) => {
            let status = response.status();
            let version = if status.is_success() {
                response
                    .json::<serde_json::Value>()
                    .await
                    .ok()
                    .and_then(|v| {
                        v.get("version")?
                            .as_str()
                            .map(|s| s.chars().take(64).collect())
                    })
            } else {
                None
            };
            Probe {
                endpoint,
                at,
                status: Some(status.as_u16()),
                error: (!status.is_success()).then(|| format!("answered HTTP {}", status.as_u16())),
                version,
                last_ok: None,
            }
        }
        Err(e) => Probe {
            endpoint,
            at,
            status: None,
            error: Some(if e.is_timeout() {
                "no answer within 5 s".to_string()
            } else if e.is_connect() {
                "cannot connect".to_string()
            } else {
                "request failed".to_string()
            }),
            version: None,
            last_ok: None,
        },
    }
}
