//! Both ends of the record layer over real sockets, and each end against
//! rustls's own buffered connection (tokio-rustls, what tonic uses): the
//! bytes arrive exact both ways, key updates from either side are taken,
//! and a tampered record ends the connection with an error.

use std::sync::Arc;

use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

struct Pair {
    client: rustls::ClientConfig,
    server: rustls::ServerConfig,
}

/// A self-signed certificate for "localhost", trusted by the client.
fn configs() -> Pair {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der = CertificateDer::from(cert.der().to_vec());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![der],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    Pair { client, server }
}

/// A connected pair of TCP sockets on loopback.
async fn sockets() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), server.unwrap().0)
}

fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").unwrap()
}

/// `len` bytes no two runs of which repeat soon.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

/// Writes `data` in pieces of odd sizes, some vectored, then shuts down.
async fn send_all<W: AsyncWriteExt + Unpin>(mut w: W, data: Vec<u8>) -> W {
    let mut at = 0;
    let mut size = 1;
    while at < data.len() {
        let end = (at + size).min(data.len());
        if size % 2 == 0 {
            let mid = at + (end - at) / 2;
            let bufs = [
                std::io::IoSlice::new(&data[at..mid]),
                std::io::IoSlice::new(&data[mid..end]),
            ];
            let n = w.write_vectored(&bufs).await.unwrap();
            at += n;
        } else {
            w.write_all(&data[at..end]).await.unwrap();
            at = end;
        }
        size = (size * 7 + 3) % 300_000 + 1;
    }
    w.flush().await.unwrap();
    w.shutdown().await.unwrap();
    w
}

async fn receive_all<R: AsyncReadExt + Unpin>(mut r: R) -> (R, Vec<u8>) {
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    (r, got)
}

/// Our client and our server, connected over loopback.
async fn both_ours() -> (TlsStream<TcpStream>, TlsStream<TcpStream>) {
    let pair = configs();
    let (c, s) = sockets().await;
    let (client, server) = tokio::join!(
        connect(client_config(pair.client), localhost(), c),
        accept(server_config(pair.server), s)
    );
    (client.unwrap(), server.unwrap())
}

#[tokio::test]
async fn both_ends_ours_carry_every_byte_both_ways_across_key_updates() {
    let (mut client, mut server) = both_ours().await;
    // A new key every 7 records each way: dozens of updates in 3 MB.
    client.change_sending_key_every(7);
    server.change_sending_key_every(7);
    let up = pattern(3 << 20, 1);
    let down = pattern(2 << 20, 2);
    let (client_r, client_w) = tokio::io::split(client);
    let (server_r, server_w) = tokio::io::split(server);
    let (client_w, (server_r, at_server), server_w, (client_r, at_client)) = tokio::join!(
        send_all(client_w, up.clone()),
        receive_all(server_r),
        send_all(server_w, down.clone()),
        receive_all(client_r),
    );
    assert!(at_server == up, "the server received other bytes");
    assert!(at_client == down, "the client received other bytes");
    let (client, server) = (client_r.unsplit(client_w), server_r.unsplit(server_w));
    // 3 MB is about 190 records, 2 MB about 130: a change every 7.
    let (client_took, client_made) = client.key_changes();
    let (server_took, server_made) = server.key_changes();
    assert!(
        client_made >= 25 && server_took == client_made,
        "{:?} {:?}",
        client.key_changes(),
        server.key_changes()
    );
    assert!(
        server_made >= 15 && client_took == server_made,
        "{:?} {:?}",
        client.key_changes(),
        server.key_changes()
    );
}

#[tokio::test]
async fn our_client_and_a_rustls_server_agree_across_key_updates() {
    let pair = configs();
    let (c, s) = sockets().await;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(pair.server));
    let (client, server) = tokio::join!(
        connect(client_config(pair.client), localhost(), c),
        acceptor.accept(s)
    );
    let (mut client, mut server) = (client.unwrap(), server.unwrap());
    // Our client changes its key every 5 records: rustls must open all.
    client.change_sending_key_every(5);
    let up = pattern(1 << 20, 3);
    let down = pattern(1 << 20, 4);
    let client_task = {
        let up = up.clone();
        tokio::spawn(async move {
            client.write_all(&up).await.unwrap();
            client.flush().await.unwrap();
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            client.shutdown().await.unwrap();
            (got, client.key_changes())
        })
    };
    let mut at_server = vec![0; up.len()];
    server.read_exact(&mut at_server).await.unwrap();
    // The rustls server changes its key and asks for ours to change too
    // (update_requested): our client must take the new key, or it fails
    // to open what follows; what it sends after, under its new key, the
    // rustls server must open.
    server.get_mut().1.refresh_traffic_keys().unwrap();
    server.write_all(&down).await.unwrap();
    server.shutdown().await.unwrap();
    let mut rest = Vec::new();
    server.read_to_end(&mut rest).await.unwrap();
    let (at_client, (took, made)) = client_task.await.unwrap();
    assert!(at_server == up, "the rustls server received other bytes");
    assert!(rest.is_empty(), "bytes after the data");
    assert!(at_client == down, "our client received other bytes");
    assert_eq!(took, 1, "the server's key update");
    assert!(
        made >= 10,
        "1 MB in records of 16 KiB, a new key every 5: {made}"
    );
}

#[tokio::test]
async fn a_rustls_client_and_our_server_agree_when_it_asks_for_new_keys() {
    let pair = configs();
    let (c, s) = sockets().await;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(pair.client));
    let (client, server) = tokio::join!(
        connector.connect(localhost(), c),
        accept(server_config(pair.server), s)
    );
    let (mut client, mut server) = (client.unwrap(), server.unwrap());
    let up = pattern(1 << 20, 5);
    let down = pattern(1 << 20, 6);
    let half = up.len() / 2;
    client.write_all(&up[..half]).await.unwrap();
    // key_update with update_requested: our server must take the new key
    // and answer with one of its own.
    client.get_mut().1.refresh_traffic_keys().unwrap();
    client.write_all(&up[half..]).await.unwrap();
    client.flush().await.unwrap();
    let mut at_server = vec![0; up.len()];
    server.read_exact(&mut at_server).await.unwrap();
    assert!(at_server == up, "our server received other bytes");
    let key_changes = server.key_changes();
    server.write_all(&down).await.unwrap();
    server.shutdown().await.unwrap();
    let mut at_client = Vec::new();
    client.read_to_end(&mut at_client).await.unwrap();
    assert!(at_client == down, "the rustls client received other bytes");
    assert_eq!(
        key_changes,
        (1, 1),
        "the client's key update was not taken, or not answered by one of the server's"
    );
}

#[tokio::test]
async fn a_tampered_record_ends_the_connection_with_an_error() {
    let pair = configs();
    let (c, relay_in) = sockets().await;
    let (relay_out, s) = sockets().await;
    // Passes the server's bytes through, and the client's with one bit
    // flipped well past the handshake.
    let relay = tokio::spawn(async move {
        let (mut from_client, mut to_client) = relay_in.into_split();
        let (mut from_server, mut to_server) = relay_out.into_split();
        let back = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        });
        let mut seen = 0usize;
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = match from_client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let flip = 100_000usize;
            if (seen..seen + n).contains(&flip) {
                buf[flip - seen] ^= 0x40;
            }
            seen += n;
            if to_server.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        back.abort();
    });
    let (client, server) = tokio::join!(
        connect(client_config(pair.client), localhost(), c),
        accept(server_config(pair.server), s)
    );
    let (mut client, mut server) = (client.unwrap(), server.unwrap());
    let writer = tokio::spawn(async move {
        let _ = client.write_all(&pattern(400_000, 7)).await;
        let _ = client.flush().await;
        client
    });
    let mut got = Vec::new();
    let err = server.read_to_end(&mut got).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    assert!(err.to_string().contains("bad_record_mac"), "{err}");
    assert!(
        got.len() < 100_000,
        "bytes past the tampered record were taken"
    );
    drop(writer.await);
    relay.abort();
}

/// A client's first flight, as rustls writes it.
fn client_hello(config: rustls::ClientConfig) -> Vec<u8> {
    let mut conn = rustls::ClientConnection::new(Arc::new(config), localhost()).unwrap();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    hello
}

#[tokio::test]
async fn a_server_handshake_refuses_what_is_not_tls_and_what_stops_halfway() {
    let pair = configs();
    let server = server_config(pair.server);
    let hello = client_hello(pair.client);
    let garbage: Vec<u8> = pattern(2000, 9);
    let cases: [(&str, Vec<u8>); 3] = [
        ("bytes that are not TLS", garbage),
        ("half a client hello", hello[..hello.len() / 2].to_vec()),
        ("a client hello, then nothing", hello),
    ];
    for (what, bytes) in cases {
        let (mut c, s) = sockets().await;
        c.write_all(&bytes).await.unwrap();
        c.shutdown().await.unwrap();
        let accepted = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            accept(server.clone(), s),
        )
        .await
        .unwrap_or_else(|_| panic!("{what}: the handshake hung"));
        let err = accepted.expect_err(what);
        assert!(err.to_string().starts_with("TLS: "), "{what}: {err}");
    }
}

#[tokio::test]
async fn reads_into_small_and_large_buffers_alike_take_every_byte_once() {
    let (mut client, mut server) = both_ours().await;
    // Key updates among the data: control records in both read paths.
    client.change_sending_key_every(3);
    let up = pattern(4 << 20, 8);
    let sender = tokio::spawn(send_all(client, up.clone()));
    // Buffers below and above the size read into directly, in turn.
    let mut got = Vec::with_capacity(up.len());
    let mut small = vec![0u8; 700];
    let mut large = vec![0u8; 300_000];
    for turn in 0.. {
        let buf = if turn % 2 == 0 {
            &mut small[..]
        } else {
            &mut large[..]
        };
        let n = server.read(buf).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let client = sender.await.unwrap();
    assert!(got == up, "{} bytes received of {}", got.len(), up.len());
    let (took, _) = server.key_changes();
    assert_eq!(took, client.key_changes().1);
    assert!(took > 50, "{took}");
}
