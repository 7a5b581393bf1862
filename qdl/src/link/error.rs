//! What can go wrong on one node's link, as values: callers check the
//! kind by type and follow `source()` for the cause, never by wording.

use std::fmt;
use std::time::Duration;

use netdiv_proto::codec::Codec;
use netdiv_proto::framing::FrameError;

use crate::tls::TlsError;

/// What a link was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Resolving the node's host name.
    Resolve,
    /// Opening the connection (TCP and HTTP/2, or the QUIC handshake).
    Connect,
    /// The `Name` round trip.
    Name,
    /// The `Info` call.
    Info,
    /// The query path: gRPC's `Infer` stream, or one QUIC query stream.
    Infer,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Call::Resolve => "resolving",
            Call::Connect => "connecting",
            Call::Name => "Name",
            Call::Info => "Info",
            Call::Infer => "Infer",
        })
    }
}

/// Why one node's link failed, or why the node cannot serve this run.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The host name resolved to no address.
    #[error("cannot resolve {host}: it has no address")]
    NoAddress {
        /// The host name.
        host: String,
    },
    /// A call got no answer in time.
    #[error("{call}: no answer within {after:?}")]
    Timeout {
        /// What was asked.
        call: Call,
        /// How long the link waited.
        after: Duration,
    },
    /// The client's TLS files cannot be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The name a node's certificate is checked against cannot be one.
    #[error("TLS server name {0:?} is neither a DNS name nor an IP address")]
    ServerName(String),
    /// A QUIC node was given without TLS settings.
    #[error(
        "QUIC always runs over TLS: give the CA of the nodes' certificates \
         (--tls-ca, or --dev-tls DIR)"
    )]
    TlsRequired,
    /// The TLS settings do not suit QUIC (e.g. no TLS 1.3 suite).
    #[error("QUIC TLS configuration: {0}")]
    QuicTls(#[from] quinn::crypto::rustls::NoInitialCipherSuite),
    /// The gRPC connection could not be made.
    #[error("{}", error_chain(.0))]
    GrpcConnect(#[source] tonic::transport::Error),
    /// The node answered a gRPC call with an error status.
    #[error("{call}: {:?}: {}", .status.code(), .status.message())]
    Status {
        /// The call.
        call: Call,
        /// The node's answer.
        #[source]
        status: tonic::Status,
    },
    /// No UDP socket could be opened for QUIC.
    #[error("cannot open a UDP socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The QUIC handshake could not start.
    #[error("QUIC handshake: {0}")]
    QuicConnect(#[from] quinn::ConnectError),
    /// The QUIC connection failed or was closed.
    #[error("QUIC connection: {0}")]
    QuicConnection(#[from] quinn::ConnectionError),
    /// Writing to a QUIC stream failed.
    #[error("QUIC stream: {0}")]
    QuicWrite(#[from] quinn::WriteError),
    /// The QUIC stream was already finished.
    #[error("QUIC stream: {0}")]
    QuicClosed(#[from] quinn::ClosedStream),
    /// Reading from a QUIC stream failed.
    #[error("QUIC stream: {0}")]
    QuicRead(#[from] quinn::ReadError),
    /// Reading a whole QUIC answer failed.
    #[error("QUIC stream: {0}")]
    QuicReadToEnd(#[from] quinn::ReadToEndError),
    /// A QUIC frame was oversized, truncated or malformed.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The node refused a request with an error of its own.
    #[error("the node refused {call}: {reason}")]
    Refused {
        /// The call.
        call: Call,
        /// The node's words.
        reason: String,
    },
    /// The node answered with a message of the wrong kind, or none.
    #[error("the node answered {call} with {got}")]
    UnexpectedAnswer {
        /// The call.
        call: Call,
        /// What came instead.
        got: &'static str,
    },
    /// The node ended the gRPC query stream.
    #[error("the node ended the Infer stream")]
    InferEnded,
    /// The node ended a QUIC query stream the QDL had not finished.
    #[error("the node ended a QUIC query stream with {unanswered} samples unanswered")]
    QueryStreamEnded {
        /// Samples sent on the stream and not yet answered.
        unanswered: usize,
    },
    /// The node held samples and showed no progress for too long: no
    /// completion, no first token, no token streamed.
    #[error(
        "it showed no progress for {after:?} while holding samples (no completion, \
         no first token, no token streamed)"
    )]
    Stuck {
        /// How long it made no progress.
        after: Duration,
    },
    /// The node speaks another version of the session-layer protocol.
    #[error("speaks netdiv protocol version {node}, this QDL speaks {ours}")]
    Version {
        /// The node's version.
        node: u32,
        /// This QDL's version.
        ours: u32,
    },
    /// The node serves another benchmark than this run's.
    #[error(
        "serves benchmark {node:?}, but this run is {run:?} (start it with --benchmark {run})"
    )]
    OtherBenchmark {
        /// What the node serves.
        node: String,
        /// What this run is.
        run: String,
    },
    /// The node does not accept the codec the samples are stored in.
    #[error("does not accept {codec} samples for {benchmark}")]
    CodecRefused {
        /// The samples' codec.
        codec: Codec,
        /// This run's benchmark.
        benchmark: String,
    },
}

/// A transport error with its causes: the useful part of a connection
/// error is at the end of its chain.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_failed_and_after_how_long() {
        let e = LinkError::Timeout {
            call: Call::Name,
            after: Duration::from_secs(10),
        };
        assert_eq!(e.to_string(), "Name: no answer within 10s");
        let e = LinkError::Status {
            call: Call::Info,
            status: tonic::Status::unavailable("draining"),
        };
        assert_eq!(e.to_string(), "Info: Unavailable: draining");
        assert!(std::error::Error::source(&e).is_some());
        let e = LinkError::OtherBenchmark {
            node: "gptj".into(),
            run: "resnet50".into(),
        };
        assert!(e
            .to_string()
            .ends_with("(start it with --benchmark resnet50)"));
    }
}
