//! A Kubernetes client built the way kubectl builds one, and why one cannot be built, in one line
//! naming the file.

use kube::Client;

use super::KubeSettings;

/// Why no client could be built for the cluster (one line, naming the file where there is one).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "KUBE_CONTEXT is set but there is no KUBECONFIG and no home directory to find ~/.kube/config in"
    )]
    NoHome,
    #[error("no cluster configuration found: {0}")]
    NoConfig(kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {0}")]
    Build(kube::Error),
    #[error("KUBECONFIG is set but names no file")]
    NoFile,
    /// A kubeconfig that cannot be used: the file(s) and what is wrong.
    #[error("kubeconfig {file}: {reason}")]
    Kubeconfig { file: String, reason: String },
    #[error("cannot start the source's thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot connect: {0}")]
    Join(tokio::task::JoinError),
}

impl ClientError {
    fn kubeconfig(file: impl std::fmt::Display, reason: String) -> Self {
        ClientError::Kubeconfig {
            file: file.to_string(),
            reason,
        }
    }
}

/// Build a client the way kubectl would: `KUBECONFIG` (with `KUBE_CONTEXT`), else in-cluster
/// service account, else `~/.kube/config`. A kubeconfig that cannot be used is refused with one
/// line naming the file and what is wrong with it.
pub async fn client(settings: &KubeSettings) -> Result<Client, ClientError> {
    Client::try_from(config(settings).await?).map_err(ClientError::Build)
}

/// The configuration [`client`] builds its client from (for a client with other timeouts).
pub async fn config(settings: &KubeSettings) -> Result<kube::Config, ClientError> {
    let opts = kube::config::KubeConfigOptions {
        context: settings.context.clone(),
        ..Default::default()
    };
    let files: Vec<std::path::PathBuf> = match (&settings.kubeconfig, &settings.context) {
        (Some(paths), _) => std::env::split_paths(paths)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        // A context names an entry of the default kubeconfig.
        (None, Some(_)) => vec![default_kubeconfig().ok_or(ClientError::NoHome)?],
        (None, None) => {
            return kube::Config::infer().await.map_err(ClientError::NoConfig);
        }
    };
    let named = files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in &files {
        let kc = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| ClientError::kubeconfig(path.display(), explain(&e, None)))?;
        merged = Some(match merged {
            None => kc,
            Some(m) => m
                .merge(kc)
                .map_err(|e| ClientError::kubeconfig(&named, explain(&e, None)))?,
        });
    }
    let kc = merged.ok_or(ClientError::NoFile)?;
    let contexts: Vec<String> = kc.contexts.iter().map(|c| c.name.clone()).collect();
    kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| ClientError::kubeconfig(&named, explain(&e, Some(&contexts))))
}

/// `~/.kube/config`, as kubectl finds it.
pub(super) fn default_kubeconfig() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::path::PathBuf::from(h).join(".kube").join("config"))
}

/// What is wrong with a kubeconfig, in words (the file is named by the caller); `contexts`:
/// the contexts it has, named when the one asked for is not among them.
pub(super) fn explain(e: &kube::config::KubeconfigError, contexts: Option<&[String]>) -> String {
    use kube::config::KubeconfigError as K;
    let known = || match contexts {
        Some([]) | None => "it has no context at all".to_string(),
        Some(names) => format!("it has {}", names.join(", ")),
    };
    match e {
        K::ReadConfig(io, _) => format!("cannot read it: {io}"),
        // The parser's message goes on with a picture of the line: its first line says it.
        K::Parse(p) => format!(
            "not a kubeconfig (YAML): {}",
            p.to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
        ),
        K::CurrentContextNotSet => format!(
            "it names no current-context (set current-context in it, or KUBE_CONTEXT); {}",
            known()
        ),
        K::LoadContext(name) => format!("no context named {name:?} (KUBE_CONTEXT); {}", known()),
        K::LoadClusterOfContext(name) => {
            format!("context {name:?} names a cluster the file does not have")
        }
        other => other.to_string(),
    }
}
