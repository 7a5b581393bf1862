//! TLS on the client side of both transports: the CA that node
//! certificates chain to, and optionally a client certificate for nodes
//! that require one (mTLS).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::CipherSuite;

/// The QDL's TLS crypto: ring's, offering AES-128-GCM first. A TLS 1.3
/// server takes the client's order, so this picks the cipher of every
/// link; AES-128 does 10 rounds per block to AES-256's 14, and encryption
/// was most of each end's CPU on a busy TLS link (docs/benchmarks.md,
/// "Bytes per CPU-second"). Both are TLS 1.3's standard ciphers.
fn crypto_provider() -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort: the others keep ring's order.
    provider
        .cipher_suites
        .sort_by_key(|suite| suite.suite() != CipherSuite::TLS13_AES_128_GCM_SHA256);
    provider
}

/// Where the client's trust anchors and identity come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM file of the CA that signed the nodes' certificates.
    pub ca: PathBuf,
    /// PEM certificate and key presented to nodes that require mTLS.
    pub identity: Option<(PathBuf, PathBuf)>,
    /// Name checked against node certificates instead of the URL's host.
    pub server_name: Option<String>,
}

/// A TLS file that could not be used; names the file.
#[derive(Debug, thiserror::Error)]
#[error("TLS file {path}: {reason}")]
pub struct TlsError {
    /// The file that could not be used.
    pub path: PathBuf,
    /// Why: the read or parse error, or what the file lacks.
    pub reason: String,
}

fn tls_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

impl ClientTls {
    /// The files a sut-node's `--dev-tls DIR` wrote: trust its CA and
    /// present its client pair.
    pub fn dev(dir: &Path) -> ClientTls {
        ClientTls {
            ca: dir.join("ca.pem"),
            identity: Some((dir.join("client.pem"), dir.join("client.key"))),
            server_name: None,
        }
    }

    /// For gRPC over netdiv's TLS record layer (TLS 1.3, HTTP/2 by ALPN).
    pub fn grpc(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        Ok(netdiv_proto::tls_stream::client_config(self.rustls(b"h2")?))
    }

    /// For quinn (QUIC always runs TLS 1.3), offering `alpn`.
    pub fn rustls(&self, alpn: &[u8]) -> Result<rustls::ClientConfig, TlsError> {
        let provider = Arc::new(crypto_provider());
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(&self.ca).map_err(|e| tls_error(&self.ca, e))?;
        for cert in certs {
            let cert = cert.map_err(|e| tls_error(&self.ca, e))?;
            roots.add(cert).map_err(|e| tls_error(&self.ca, e))?;
        }
        if roots.is_empty() {
            return Err(tls_error(&self.ca, "holds no certificate"));
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error(&self.ca, e))?
            .with_root_certificates(roots);
        let mut config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .map_err(|e| tls_error(cert, e))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| tls_error(cert, e))?;
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_error(key, e))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| tls_error(cert, e))?
            }
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AES-128-GCM is offered first, and nothing is dropped.
    #[test]
    fn aes_128_gcm_is_offered_first() {
        let ours = crypto_provider().cipher_suites;
        assert_eq!(ours[0].suite(), CipherSuite::TLS13_AES_128_GCM_SHA256);
        assert_eq!(
            ours.len(),
            rustls::crypto::ring::default_provider().cipher_suites.len()
        );
    }

    #[test]
    fn missing_files_are_named() {
        let tls = ClientTls::dev(Path::new("/nonexistent/netdiv-certs"));
        let err = tls.rustls(b"x").unwrap_err().to_string();
        assert!(
            err.starts_with("TLS file /nonexistent/netdiv-certs/ca.pem:"),
            "{err}"
        );
        let err = tls.grpc().unwrap_err().to_string();
        assert!(err.contains("ca.pem"), "{err}");
    }
}
