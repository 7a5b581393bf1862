//! gRPC's TLS with netdiv's own record layer: rustls runs the handshake
//! (certificates, mTLS, TLS 1.3 only) through its unbuffered API and then
//! hands over the traffic keys, as it does for kernel TLS; netdiv seals
//! and opens the records with AWS-LC's AEADs (aws-lc-rs: its AVX-512
//! AES-GCM is twice ring's speed where the CPU has it, and it seals out of
//! place; rustls's handshake and QUIC keep ring).
//!
//! Why not rustls's buffered connection (tokio-rustls, as tonic uses it):
//! it reads the socket 4 to 17 KiB at a time, copies each record's
//! content out of its receive buffer into a queue and from there into the
//! caller's, and moves the partial record left behind to the front after
//! every read. On a busy link those copies and system calls were most of
//! what TLS cost beyond the cipher itself (docs/benchmarks.md, "Bytes per
//! CPU-second"). Here the socket is read straight into the caller's buffer
//! when it has room for a large read, and each record is opened there, its
//! content moved into place in the same pass as the decryption
//! (`open_within`): no copy but the kernel's. A smaller buffer is served
//! from a receive buffer of up to 256 KiB, one copy. Writes are sealed
//! into one buffer and sent in one call; a large part of a write (a
//! sample) is sealed from where it lies, straight into that buffer, and
//! only small parts (frame headers, small fields) are copied first.
//!
//! What stays with rustls: the whole handshake and the key schedule
//! (its `KernelConnection` derives the next keys when either side
//! updates its own). What this module does itself, after RFC 8446 §5:
//! nonces from the sequence numbers, the inner content type and its
//! padding, key updates both ways (its own before a key wears out, well
//! inside the cipher's limit), close_notify, and refusing anything else
//! (any alert but close_notify, a handshake message other than
//! key_update or a ticket, a record of the wrong size or that fails its
//! tag). Both ends speak standard TLS 1.3: a node takes tonic's or any
//! other client, and the QDL any TLS 1.3 server that sends its tickets
//! whole.

mod handshake;
mod outbox;
mod records;
mod stream;
#[cfg(test)]
mod tests;

use std::io;
use std::sync::Arc;

use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::server::UnbufferedServerConnection;
use tokio::io::{AsyncRead, AsyncWrite};

pub use stream::TlsStream;

/// The settings this record layer needs of a client configuration:
/// TLS 1.3 only and the keys handed over after the handshake.
pub fn client_config(mut config: rustls::ClientConfig) -> Arc<rustls::ClientConfig> {
    config.enable_secret_extraction = true;
    Arc::new(config)
}

/// The same for a server configuration; it also sends no session
/// tickets (netdiv never resumes a session, and a ticket is a record its
/// client would only drop).
pub fn server_config(mut config: rustls::ServerConfig) -> Arc<rustls::ServerConfig> {
    config.enable_secret_extraction = true;
    config.send_tls13_tickets = 0;
    Arc::new(config)
}

/// Runs a client's handshake over `io` toward `server_name`. `config`
/// comes from [`client_config`] and offers TLS 1.3 only.
pub async fn connect<IO>(
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
    mut io: IO,
) -> io::Result<TlsStream<IO>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let conn =
        UnbufferedClientConnection::new(config, server_name).map_err(handshake::tls_error)?;
    let established = handshake::drive(conn, &mut io).await?;
    TlsStream::new(io, established)
}

/// Runs a server's handshake over `io`. `config` comes from
/// [`server_config`] and offers TLS 1.3 only.
pub async fn accept<IO>(config: Arc<rustls::ServerConfig>, mut io: IO) -> io::Result<TlsStream<IO>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let conn = UnbufferedServerConnection::new(config).map_err(handshake::tls_error)?;
    let established = handshake::drive(conn, &mut io).await?;
    TlsStream::new(io, established)
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected
    for TlsStream<IO>
{
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.get_ref().connect_info()
    }
}
