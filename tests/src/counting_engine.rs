//! A test-only serving engine that answers well, speaks HTTP/1.1 and
//! HTTP/2 (prior knowledge) on one port, and counts what the node did:
//! the HTTP version of each completion request and the TCP connections
//! they came on. It answers llama.cpp's `/completion` like
//! [`crate::misbehaving_engine`]'s good prompts: `id+1`, `id+2`, `id+3`
//! for a prompt starting with `id` (fewer if fewer are asked for).

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use axum::extract::{ConnectInfo, State};
use axum::http::Version;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use serde_json::{json, Value};

/// What the node asked for.
#[derive(Debug, Default)]
pub struct Seen {
    /// The HTTP version of each completion request.
    pub versions: Vec<Version>,
    /// The client ends of the connections those came on.
    pub connections: HashSet<SocketAddr>,
}

/// The engine, serving on its own runtime thread until the process ends.
pub struct CountingEngine {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl CountingEngine {
    /// Starts it on a free port of 127.0.0.1.
    pub fn start() -> Result<CountingEngine> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let app = Router::new()
            .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
            .route(
                "/v1/models",
                get(|| async { Json(json!({"data": [{"id": "counting"}]})) }),
            )
            .route("/completion", post(complete))
            .with_state(seen.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let service = app.into_make_service_with_connect_info::<SocketAddr>();
                axum::serve(listener, service).await
            })
        });
        Ok(CountingEngine { addr, seen })
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The versions and connections of the completion requests so far.
    pub fn seen(&self) -> (Vec<Version>, usize) {
        let seen = self.seen.lock().expect("seen");
        (seen.versions.clone(), seen.connections.len())
    }
}

async fn complete(
    State(seen): State<Arc<Mutex<Seen>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    version: Version,
    Json(request): Json<Value>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    {
        let mut seen = seen.lock().expect("seen");
        seen.versions.push(version);
        seen.connections.insert(peer);
    }
    let first = request["prompt"][0].as_u64().unwrap_or(0) as u32;
    let n = request["n_predict"].as_u64().unwrap_or(3).min(3) as u32;
    let mut events: Vec<Value> = (1..=n)
        .map(|k| json!({"tokens": [first + k], "stop": false, "tokens_predicted": k}))
        .collect();
    events.push(json!({"tokens": [], "stop": true, "tokens_predicted": n}));
    Sse::new(futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok(Event::default().data(e.to_string()))),
    ))
}
