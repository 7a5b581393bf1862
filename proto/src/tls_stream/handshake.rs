//! The handshake, by rustls's unbuffered API over an async socket, up to
//! the point where rustls hands over the traffic keys (its "kernel
//! connection", made for kTLS) and keeps only the key schedule.

use std::io;

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, InsufficientSizeError, UnbufferedStatus,
};
use rustls::{ConnectionTrafficSecrets, ExtractedSecrets, SupportedCipherSuite};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest handshake flight taken (rustls's own bound on a handshake
/// message is 64 KiB).
const MAX_FLIGHT: usize = 64 * 1024 + super::records::MAX_RECORD;

/// A rustls error as the I/O error the caller sees.
pub(super) fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// rustls's state after one look at the received bytes.
type Status<'c, 'i, D> = UnbufferedStatus<'c, 'i, D>;
/// What a finished handshake hands over: the keys and the key schedule.
type Kernel<D> = (ExtractedSecrets, KernelConnection<D>);

/// A client or server connection driven through its handshake.
pub(super) trait Unbuffered: Sized {
    type Data;
    fn process<'c, 'i>(&'c mut self, bytes: &'i mut [u8]) -> Status<'c, 'i, Self::Data>;
    fn into_kernel(self) -> Result<Kernel<Self::Data>, rustls::Error>;
}

macro_rules! unbuffered {
    ($conn:ty, $data:ty) => {
        impl Unbuffered for $conn {
            type Data = $data;
            fn process<'c, 'i>(&'c mut self, bytes: &'i mut [u8]) -> Status<'c, 'i, Self::Data> {
                self.process_tls_records(bytes)
            }
            fn into_kernel(self) -> Result<Kernel<Self::Data>, rustls::Error> {
                self.dangerous_into_kernel_connection()
            }
        }
    };
}
unbuffered!(UnbufferedClientConnection, ClientConnectionData);
unbuffered!(UnbufferedServerConnection, ServerConnectionData);

/// What rustls keeps after the handshake: the next traffic keys when
/// either side updates its own (§4.6.3).
pub(super) trait KeySchedule: Send + Sync {
    fn next_tx(&mut self) -> io::Result<(u64, ConnectionTrafficSecrets)>;
    fn next_rx(&mut self) -> io::Result<(u64, ConnectionTrafficSecrets)>;
    /// Whether session tickets may arrive (servers send them, clients do
    /// not). They are dropped: netdiv never resumes a session.
    fn takes_tickets(&self) -> bool;
    /// Records one key may protect before it must be changed.
    fn confidentiality_limit(&self) -> u64;
}

macro_rules! key_schedule {
    ($data:ty, $tickets:expr) => {
        impl KeySchedule for KernelConnection<$data> {
            fn next_tx(&mut self) -> io::Result<(u64, ConnectionTrafficSecrets)> {
                self.update_tx_secret().map_err(tls_error)
            }
            fn next_rx(&mut self) -> io::Result<(u64, ConnectionTrafficSecrets)> {
                self.update_rx_secret().map_err(tls_error)
            }
            fn takes_tickets(&self) -> bool {
                $tickets
            }
            fn confidentiality_limit(&self) -> u64 {
                match self.negotiated_cipher_suite() {
                    SupportedCipherSuite::Tls13(suite) => suite.common.confidentiality_limit,
                    #[allow(unreachable_patterns)]
                    _ => 0,
                }
            }
        }
    };
}
key_schedule!(ClientConnectionData, true);
key_schedule!(ServerConnectionData, false);

/// A finished handshake: the traffic keys, the key schedule, and what the
/// peer sent past the handshake before it was over.
pub(super) struct Established {
    pub(super) secrets: ExtractedSecrets,
    pub(super) schedule: Box<dyn KeySchedule>,
    /// Application data rustls already opened (a client may send its first
    /// request with its last handshake flight).
    pub(super) early_data: Vec<u8>,
    /// Bytes read past the last whole record: the start of the next one.
    pub(super) leftover: Vec<u8>,
}

/// What to do once rustls's state has been handled.
enum Next {
    Process,
    Send,
    Receive,
    Done,
}

/// Appends the handshake records rustls has ready to `outgoing`.
fn encode<Data>(data: &mut EncodeTlsData<'_, Data>, outgoing: &mut Vec<u8>) -> io::Result<()> {
    let start = outgoing.len();
    outgoing.resize(start + 4096, 0);
    loop {
        match data.encode(&mut outgoing[start..]) {
            Ok(n) => {
                outgoing.truncate(start + n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                outgoing.resize(start + required_size, 0)
            }
            Err(e) => return Err(io::Error::other(format!("TLS: {e}"))),
        }
    }
}

/// After a failed handshake: sends the alert rustls queued, if any.
/// `incoming` is what is left of the receive buffer (rustls must be given
/// the same bytes). The connection is being dropped, so a failure here
/// changes nothing.
async fn send_alert<C, IO>(conn: &mut C, incoming: &mut [u8], io: &mut IO)
where
    C: Unbuffered,
    IO: AsyncWrite + Unpin,
{
    let mut outgoing = Vec::new();
    // One call: rustls hands out what it queued (the alert) before it
    // looks at the received bytes again, and looking again would fail
    // again.
    if let Ok(ConnectionState::EncodeTlsData(mut data)) = conn.process(incoming).state {
        let _ = encode(&mut data, &mut outgoing);
    }
    if !outgoing.is_empty() {
        let _ = io.write_all(&outgoing).await;
        let _ = io.flush().await;
    }
}

/// Runs the handshake of `conn` over `io`.
pub(super) async fn drive<C, IO>(mut conn: C, io: &mut IO) -> io::Result<Established>
where
    C: Unbuffered,
    KernelConnection<C::Data>: KeySchedule + 'static,
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut incoming = vec![0u8; 16 * 1024];
    let mut received = 0;
    let mut outgoing = Vec::new();
    let mut early_data = Vec::new();
    loop {
        let UnbufferedStatus { discard, state } = conn.process(&mut incoming[..received]);
        let state = match state {
            Ok(state) => state,
            Err(e) => {
                // The alert that says why (a client without the certificate
                // required, say) goes to the peer before the connection ends.
                incoming.copy_within(discard..received, 0);
                received -= discard;
                send_alert(&mut conn, &mut incoming[..received], io).await;
                return Err(tls_error(e));
            }
        };
        let next = match state {
            ConnectionState::EncodeTlsData(mut data) => {
                encode(&mut data, &mut outgoing)?;
                Next::Process
            }
            ConnectionState::TransmitTlsData(data) => {
                // Sent right below, before rustls is asked again.
                data.done();
                Next::Send
            }
            ConnectionState::BlockedHandshake => Next::Receive,
            ConnectionState::ReadTraffic(mut traffic) => {
                while let Some(record) = traffic.next_record() {
                    early_data.extend_from_slice(record.map_err(tls_error)?.payload);
                }
                Next::Process
            }
            ConnectionState::WriteTraffic(_) => Next::Done,
            ConnectionState::PeerClosed | ConnectionState::Closed => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS: the peer closed the connection during the handshake",
                ))
            }
            other => {
                return Err(io::Error::other(format!(
                    "TLS: unexpected state {other:?} during the handshake"
                )))
            }
        };
        incoming.copy_within(discard..received, 0);
        received -= discard;
        match next {
            Next::Process => {}
            Next::Send => {
                io.write_all(&outgoing).await?;
                outgoing.clear();
            }
            Next::Receive => {
                if received == incoming.len() {
                    if incoming.len() >= MAX_FLIGHT {
                        return Err(super::records::bad_record("a handshake flight over 64 KiB"));
                    }
                    incoming.resize((incoming.len() * 2).min(MAX_FLIGHT), 0);
                }
                let n = io.read(&mut incoming[received..]).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "TLS: the peer closed the connection during the handshake",
                    ));
                }
                received += n;
            }
            Next::Done => break,
        }
    }
    if !outgoing.is_empty() {
        io.write_all(&outgoing).await?;
    }
    io.flush().await?;
    let (secrets, kernel) = conn.into_kernel().map_err(tls_error)?;
    incoming.truncate(received);
    Ok(Established {
        secrets,
        schedule: Box::new(kernel),
        early_data,
        leftover: incoming,
    })
}
