//! HTTPS and WSS with rustls (`TLS_CERT_FILE`, `TLS_KEY_FILE`; client certificates with
//! `TLS_CA_FILE`, the oldest version with `TLS_MIN_VERSION`): a listener (axum's `Listener`
//! trait, which [`super::serve`] accepts from) that completes each TLS handshake in its own task,
//! so a slow or silent client never holds up the accept loop.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The oldest TLS version served (`TLS_MIN_VERSION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMinVersion {
    Tls12,
    Tls13,
}

/// Longest a client may take to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the TLS files cannot be served: the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS_CERT_FILE {}: {reason}", file.display())]
    Cert {
        file: std::path::PathBuf,
        reason: String,
    },
    #[error("TLS_KEY_FILE {}: {reason}", file.display())]
    Key {
        file: std::path::PathBuf,
        reason: String,
    },
    #[error("TLS: {0}")]
    Protocols(rustls::Error),
    #[error("TLS_CERT_FILE / TLS_KEY_FILE do not make a usable pair: {0}")]
    Pair(rustls::Error),
    #[error("TLS_CA_FILE {}: {reason}", file.display())]
    Ca {
        file: std::path::PathBuf,
        reason: String,
    },
}

/// The server's TLS files and choices.
pub struct TlsFiles<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
    /// CA certificates client certificates must be signed by; None: no client certificate asked.
    pub ca: Option<&'a Path>,
    pub min_version: TlsMinVersion,
}

/// The client verifier of TLS_CA_FILE: every client presents a certificate signed by one of its
/// CAs (webpki's verification, with rustls' ring provider).
fn client_verifier(
    ca: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let bad = |reason: String| TlsError::Ca {
        file: ca.to_path_buf(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))? {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| bad(e.to_string()))
}

/// The server's TLS settings from PEM files; the error names the file and what is wrong.
pub fn server_config(files: &TlsFiles<'_>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (cert, key) = (files.cert, files.key);
    let bad_cert = |reason: String| TlsError::Cert {
        file: cert.to_path_buf(),
        reason,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad_cert(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad_cert(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad_cert("no PEM certificate in it".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        file: key.to_path_buf(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match files.min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(TlsError::Protocols)?;
    let builder = match files.ca {
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(TlsError::Pair)?;
    // HTTP/1.1 only: WebSocket upgrades need it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepted connections whose TLS handshake completed.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Accept on `listener`, handshaking with `config`.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(256);
        let task = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors and the like: wait a little, as axum's listener does.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local, task })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
