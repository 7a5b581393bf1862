//! Prometheus metrics: the sut-node's own ([`NodeMetrics`], counted as
//! samples come and go: relaxed atomics, cheap enough to keep on when
//! nobody scrapes) and the `/metrics` endpoint both daemons serve when
//! `--metrics-listen` asks for it ([`serve`]).

use std::net::SocketAddr;
use std::sync::Arc;

use netdiv_proto::pb;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// A label set: (name, value) pairs.
pub type Labels = Vec<(String, String)>;

/// What a sut-node counts.
#[derive(Debug)]
pub struct NodeMetrics {
    queries: Counter,
    samples_received: Counter,
    sample_bytes_in: Counter,
    answer_bytes_out: Counter,
    samples_completed: Counter,
    first_tokens: Counter,
    declined: Counter,
    cancelled: Counter,
    tokens_generated: Counter,
    sample_errors: Counter,
    in_flight: Gauge,
    batch_size: Histogram,
    inference_seconds: Histogram,
    open_connections: Family<Labels, Gauge>,
    connections: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics {
            queries: Counter::default(),
            samples_received: Counter::default(),
            sample_bytes_in: Counter::default(),
            answer_bytes_out: Counter::default(),
            samples_completed: Counter::default(),
            first_tokens: Counter::default(),
            declined: Counter::default(),
            cancelled: Counter::default(),
            tokens_generated: Counter::default(),
            sample_errors: Counter::default(),
            in_flight: Gauge::default(),
            // 1, 2, 4, ... 4096 samples.
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            // 10 µs to about 5 minutes.
            inference_seconds: Histogram::new(exponential_buckets(1e-5, 2.0, 25)),
            open_connections: Family::default(),
            connections: Family::default(),
            requests: Family::default(),
        }
    }
}

fn transport(name: &str) -> Labels {
    vec![("transport".to_string(), name.to_string())]
}

impl NodeMetrics {
    /// A registry (prefix `netdiv_node`) that reads these metrics, with an
    /// info metric naming the node.
    pub fn registry(self: &Arc<Self>, name: &str, backend: &str, benchmark: &str) -> Registry {
        let mut registry = Registry::with_prefix_and_labels(
            "netdiv_node",
            [(
                std::borrow::Cow::Borrowed("node"),
                std::borrow::Cow::Owned(name.to_string()),
            )]
            .into_iter(),
        );
        let info = prometheus_client::metrics::info::Info::new(vec![
            ("backend".to_string(), backend.to_string()),
            ("benchmark".to_string(), benchmark.to_string()),
            ("version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ]);
        registry.register("build", "What this node runs", info);
        let m = self.as_ref();
        registry.register("queries", "Query messages received", m.queries.clone());
        registry.register(
            "samples_received",
            "Samples received (each gets one completion)",
            m.samples_received.clone(),
        );
        registry.register(
            "sample_bytes_in",
            "Sample bytes as they arrived (before any decoding)",
            m.sample_bytes_in.clone(),
        );
        registry.register(
            "answer_bytes_out",
            "Answer bytes sent (completions and first tokens, as encoded)",
            m.answer_bytes_out.clone(),
        );
        registry.register(
            "samples_completed",
            "Samples answered with an output",
            m.samples_completed.clone(),
        );
        registry.register(
            "first_tokens",
            "First-token messages sent (token benchmarks)",
            m.first_tokens.clone(),
        );
        registry.register(
            "declined",
            "Samples declined as retryable (full or shutting down)",
            m.declined.clone(),
        );
        registry.register(
            "cancelled",
            "Samples dropped because their client cancelled them or left (token benchmarks)",
            m.cancelled.clone(),
        );
        registry.register(
            "tokens_generated",
            "Tokens generated, of all samples (token benchmarks)",
            m.tokens_generated.clone(),
        );
        registry.register(
            "sample_errors",
            "Samples answered with an error (bad input, backend or engine failure)",
            m.sample_errors.clone(),
        );
        registry.register(
            "in_flight_samples",
            "Samples held: queued for a device or running",
            m.in_flight.clone(),
        );
        registry.register(
            "batch_size",
            "Samples per backend batch (per step for token backends)",
            m.batch_size.clone(),
        );
        registry.register(
            "inference_seconds",
            "Time the backend took per batch",
            m.inference_seconds.clone(),
        );
        registry.register(
            "open_connections",
            "Connections (QUIC) and query streams (gRPC) open now",
            m.open_connections.clone(),
        );
        registry.register(
            "connections",
            "Connections (QUIC) and query streams (gRPC) opened",
            m.connections.clone(),
        );
        registry.register(
            "requests",
            "Requests (gRPC calls, QUIC streams) by transport, method and outcome \
             (ok, error, shed, timeout)",
            m.requests.clone(),
        );
        registry
    }

    /// A request on `transport` ended its start with `outcome`.
    pub fn request(&self, transport: &str, method: &str, outcome: &str) {
        let labels = vec![
            ("transport".to_string(), transport.to_string()),
            ("method".to_string(), method.to_string()),
            ("outcome".to_string(), outcome.to_string()),
        ];
        self.requests.get_or_create(&labels).inc();
    }

    /// A query of `samples` samples, `bytes` of sample data, arrived.
    pub fn query(&self, samples: usize, bytes: usize) {
        self.queries.inc();
        self.samples_received.inc_by(samples as u64);
        self.sample_bytes_in.inc_by(bytes as u64);
    }

    /// An answer is sent: counted by what it is.
    pub fn answer(&self, message: &pb::Completion) {
        self.answer_bytes_out.inc_by(message.data.len() as u64);
        if message.cancelled {
            // Counted by `cancelled`, sent or not.
        } else if message.first_token {
            self.first_tokens.inc();
        } else if message.retryable {
            self.declined.inc();
        } else if !message.error.is_empty() {
            self.sample_errors.inc();
        } else {
            self.samples_completed.inc();
        }
    }

    /// A sample was dropped: its client cancelled it or left.
    pub fn cancelled(&self) {
        self.cancelled.inc();
    }

    /// The backend generated `tokens` more tokens.
    pub fn tokens(&self, tokens: u64) {
        self.tokens_generated.inc_by(tokens);
    }

    /// The node now holds `samples`.
    pub fn set_in_flight(&self, samples: u64) {
        self.in_flight.set(samples as i64);
    }

    /// The backend ran a batch of `samples` in `seconds`.
    pub fn batch(&self, samples: usize, seconds: Option<f64>) {
        self.batch_size.observe(samples as f64);
        if let Some(seconds) = seconds {
            self.inference_seconds.observe(seconds);
        }
    }

    /// A connection or query stream opened on `transport`; it counts as
    /// open until the returned guard is dropped.
    pub fn connection(self: &Arc<Self>, transport_name: &'static str) -> OpenConnection {
        self.connections
            .get_or_create(&transport(transport_name))
            .inc();
        self.open_connections
            .get_or_create(&transport(transport_name))
            .inc();
        OpenConnection {
            metrics: self.clone(),
            transport: transport_name,
        }
    }
}

/// An open connection, counted in `open_connections` while it lives.
#[derive(Debug)]
pub struct OpenConnection {
    metrics: Arc<NodeMetrics>,
    transport: &'static str,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.metrics
            .open_connections
            .get_or_create(&transport(self.transport))
            .dec();
    }
}

/// The metrics text of `registry`, as Prometheus scrapes it.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut text, registry);
    text
}

/// Serves `GET /metrics` for `registry` on `listen` until `stop` turns
/// true; returns the bound address (port 0 picks one).
pub async fn serve(
    listen: SocketAddr,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    render(&registry),
                )
            }
        }),
    );
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!("metrics endpoint failed: {e}");
        }
    });
    Ok((addr, task))
}
