//! TLS for both transports: certificate files, optional client-certificate
//! verification (mTLS, so only the LoadGen node can submit work), and a
//! development mode that generates a CA, a server and a client pair.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// PEM files of the node's identity, and of the CA its clients must chain
/// to when mTLS is on.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The node's certificate chain (PEM).
    pub cert: PathBuf,
    /// The node's private key (PEM).
    pub key: PathBuf,
    /// CA that client certificates must chain to; `None` means no client
    /// certificate is required.
    pub client_ca: Option<PathBuf>,
}

/// Writes a development CA with a server pair (localhost, 127.0.0.1, ::1)
/// and a client pair into `dir`: `ca.pem`, `server.pem`, `server.key`,
/// `client.pem`, `client.key`. Existing files are reused, so clients that
/// trust `ca.pem` keep working across restarts.
pub fn dev_certificates(dir: &Path, require_client_cert: bool) -> Result<TlsFiles> {
    let files = TlsFiles {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        client_ca: require_client_cert.then(|| dir.join("ca.pem")),
    };
    if files.cert.is_file() && files.key.is_file() && dir.join("ca.pem").is_file() {
        return Ok(files);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "netdiv development CA");
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<String>| -> Result<(String, String)> {
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(names)?.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (server_pem, server_key) =
        leaf(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])?;
    let (client_pem, client_key) = leaf(vec!["netdiv-loadgen-node".into()])?;
    for (name, text) in [
        ("ca.pem", ca_cert.pem()),
        ("server.pem", server_pem),
        ("server.key", server_key),
        ("client.pem", client_pem),
        ("client.key", client_key),
    ] {
        let path = dir.join(name);
        // Keys are readable by their owner only; certificates by anyone.
        let mode = if name.ends_with(".key") { 0o600 } else { 0o644 };
        write_with_mode(&path, text.as_bytes(), mode)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(files)
}

fn write_with_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?
        .write_all(bytes)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The PEM texts, for tonic's TLS configuration.
#[derive(Debug)]
pub struct TlsPem {
    /// The node's certificate chain.
    pub cert: Vec<u8>,
    /// The node's private key.
    pub key: Vec<u8>,
    /// The client CA, when mTLS is on.
    pub client_ca: Option<Vec<u8>>,
}

impl TlsFiles {
    /// Reads the three files; the error names the one that failed.
    pub fn pem(&self) -> Result<TlsPem> {
        Ok(TlsPem {
            cert: read(&self.cert)?,
            key: read(&self.key)?,
            client_ca: self.client_ca.as_deref().map(read).transpose()?,
        })
    }

    /// A rustls server configuration (TLS 1.3, ring) with `alpn`.
    pub fn rustls_server(&self, alpn: &[u8]) -> Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .with_context(|| format!("cannot read certificates from {}", self.cert.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("bad certificate in {}", self.cert.display()))?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .with_context(|| format!("cannot read private key from {}", self.key.display()))?;
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let builder = match &self.client_ca {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(ca)
                    .with_context(|| format!("cannot read client CA {}", ca.display()))?
                {
                    roots.add(cert?)?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(certs, key)?;
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn development_keys_are_readable_by_their_owner_only() {
        let dir = std::env::temp_dir().join(format!("sut-node-dev-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dev_certificates(&dir, true).unwrap();
        let mode = |name: &str| {
            std::fs::metadata(dir.join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        for key in ["server.key", "client.key"] {
            assert_eq!(mode(key) & 0o077, 0, "{key} is open to others");
        }
    }
}
