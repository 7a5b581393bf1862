//! The node's per-request policies, one set for both transports. Every
//! request (a gRPC call, a QUIC stream) passes the same tower layers before
//! it reaches the node: a tracing span and a count by outcome, load
//! shedding over a limit on requests being started (one per transport,
//! like the connection limit), and a time limit on starting the answer. The transports differ only in how a
//! refusal reaches the client: a gRPC status, a QUIC error frame.
//!
//! A request is "being started" until its answer starts: a unary call
//! until its answer is ready, a query stream until the node has taken it.
//! After that its samples are bounded by `max_samples_held` and
//! `max_bytes_held`, and its unread answers by `max_unread_answers`.
//! Streams per connection are the transports' own stream limits (HTTP/2
//! MAX_CONCURRENT_STREAMS, QUIC stream credit); connections are admitted
//! at accept ([`super::connections`]), before any request exists.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::layer::util::{Identity, Stack};
use tower::limit::ConcurrencyLimitLayer;
use tower::load_shed::error::Overloaded;
use tower::load_shed::LoadShedLayer;
use tower::timeout::error::Elapsed;
use tower::timeout::TimeoutLayer;
use tower::{BoxError, Layer, Service, ServiceBuilder};
use tracing::Instrument;

use crate::limits::Limits;
use crate::metrics::NodeMetrics;

/// Why the policy ended a request before the node answered it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum Refused {
    /// Too many requests were being started at once.
    #[error(
        "node overloaded: {0} requests are being started, its limit \
         (limits.max_pending_requests); try again"
    )]
    Overloaded(usize),
    /// The request did not start its answer in time.
    #[error("the request did not start its answer within {0:?} (limits.request_timeout_ms)")]
    TimedOut(Duration),
}

/// What a request is, for its span and its count.
pub(super) trait PolicyRequest {
    /// The method, from a small fixed set (it is a metric label).
    fn method(&self) -> &'static str;
}

/// What the service answered, for the count.
pub(super) trait PolicyResponse {
    /// The answer is an error the service wrote itself.
    fn failed(&self) -> bool {
        false
    }
    /// The method, when only the answer knows it (a QUIC stream names its
    /// request in its first frame).
    fn method(&self) -> Option<&'static str> {
        None
    }
}

/// The policies every request to the node passes, whatever its transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RequestPolicy {
    /// Requests being started at once on one transport; more are shed.
    pub max_pending: usize,
    /// Longest a request may take to start its answer.
    pub timeout: Duration,
}

/// The layers of [`RequestPolicy::layers`], outermost first.
pub(super) type PolicyLayers = Stack<
    TimeoutLayer,
    Stack<ConcurrencyLimitLayer, Stack<LoadShedLayer, Stack<RequestLogLayer, Identity>>>,
>;

impl RequestPolicy {
    /// The policy of a node with `limits`.
    pub(super) fn from_limits(limits: &Limits) -> RequestPolicy {
        RequestPolicy {
            max_pending: limits.max_pending_requests,
            timeout: limits.request_timeout,
        }
    }

    /// The layers, outermost first: the span and count (outermost, so it
    /// sees shed requests too), load shedding, the limit on requests being
    /// started, the time limit. Build them once per server: the limit's
    /// semaphore is shared by every clone of the service they wrap.
    pub(super) fn layers(
        &self,
        transport: &'static str,
        metrics: Arc<NodeMetrics>,
    ) -> ServiceBuilder<PolicyLayers> {
        ServiceBuilder::new()
            .layer(RequestLogLayer {
                transport,
                metrics,
                policy: *self,
            })
            .load_shed()
            .concurrency_limit(self.max_pending)
            .timeout(self.timeout)
    }
}

/// Opens a span per request and counts it by outcome; turns the inner
/// layers' refusals into [`Refused`].
#[derive(Debug, Clone)]
pub(super) struct RequestLogLayer {
    transport: &'static str,
    metrics: Arc<NodeMetrics>,
    policy: RequestPolicy,
}

impl<S> Layer<S> for RequestLogLayer {
    type Service = RequestLog<S>;

    fn layer(&self, inner: S) -> RequestLog<S> {
        RequestLog {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`RequestLogLayer`].
#[derive(Debug, Clone)]
pub(super) struct RequestLog<S> {
    inner: S,
    layer: RequestLogLayer,
}

/// Where an answer's start ended, as the `outcome` label says it.
fn outcome<R: PolicyResponse>(
    result: Result<R, BoxError>,
    policy: &RequestPolicy,
) -> (&'static str, Result<R, BoxError>) {
    match result {
        Ok(response) if response.failed() => ("error", Ok(response)),
        Ok(response) => ("ok", Ok(response)),
        Err(e) if e.is::<Overloaded>() => {
            ("shed", Err(Refused::Overloaded(policy.max_pending).into()))
        }
        Err(e) if e.is::<Elapsed>() => ("timeout", Err(Refused::TimedOut(policy.timeout).into())),
        Err(e) => ("error", Err(e)),
    }
}

impl<S, R> Service<R> for RequestLog<S>
where
    S: Service<R>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: PolicyResponse + Send,
    R: PolicyRequest,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let method = request.method();
        let transport = self.layer.transport;
        let span = tracing::info_span!("request", transport, method);
        let started = self.inner.call(request);
        let layer = self.layer.clone();
        Box::pin(
            async move {
                let result = started.await.map_err(Into::into);
                let method = match &result {
                    Ok(response) => response.method().unwrap_or(method),
                    Err(_) => method,
                };
                let (outcome, result) = outcome(result, &layer.policy);
                layer.metrics.request(transport, method, outcome);
                if let Err(e) = &result {
                    // Shed and timed-out requests can come in floods: not
                    // a warning each.
                    tracing::debug!(outcome, "request ended: {e}");
                }
                result
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;
    use tower::ServiceExt;

    struct Call(&'static str);
    impl PolicyRequest for Call {
        fn method(&self) -> &'static str {
            self.0
        }
    }
    struct Answer;
    impl PolicyResponse for Answer {}

    fn policy() -> RequestPolicy {
        RequestPolicy {
            max_pending: 1,
            timeout: Duration::from_millis(200),
        }
    }

    fn count(metrics: &Arc<NodeMetrics>, outcome: &str) -> usize {
        let registry = metrics.registry("n", "synthetic", "resnet50");
        let text = crate::metrics::render(&registry);
        let line = format!("outcome=\"{outcome}\"");
        text.lines()
            .filter(|l| l.starts_with("netdiv_node_requests_total") && l.contains(&line))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as usize)
            .sum()
    }

    #[tokio::test]
    async fn a_second_request_past_the_limit_is_shed_and_a_slow_one_times_out() {
        let metrics = Arc::new(NodeMetrics::default());
        let (release, held) = oneshot::channel::<()>();
        let held = Arc::new(tokio::sync::Mutex::new(Some(held)));
        let service = policy()
            .layers("test", metrics.clone())
            .service_fn(move |call: Call| {
                let held = held.clone();
                async move {
                    if call.0 == "hold" {
                        let waiting = held.lock().await.take();
                        if let Some(waiting) = waiting {
                            let _ = waiting.await;
                        }
                    }
                    Ok::<_, BoxError>(Answer)
                }
            });
        // The first request holds the only slot until released.
        let first = tokio::spawn(service.clone().oneshot(Call("hold")));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let shed = service.clone().oneshot(Call("quick")).await.err().unwrap();
        assert_eq!(
            shed.downcast_ref::<Refused>(),
            Some(&Refused::Overloaded(1)),
            "{shed}"
        );
        assert!(shed.to_string().contains("limits.max_pending_requests"));
        release.send(()).unwrap();
        assert!(first.await.unwrap().is_ok());
        // The slot came back with the answer.
        assert!(service.clone().oneshot(Call("quick")).await.is_ok());
        assert_eq!((count(&metrics, "ok"), count(&metrics, "shed")), (2, 1));

        // A request whose answer never starts is ended by the time limit,
        // and its slot comes back too.
        let slow = policy()
            .layers("test", metrics.clone())
            .service_fn(|_: Call| futures::future::pending::<Result<Answer, BoxError>>());
        let timed_out = slow.clone().oneshot(Call("slow")).await.err().unwrap();
        assert_eq!(
            timed_out.downcast_ref::<Refused>(),
            Some(&Refused::TimedOut(Duration::from_millis(200)))
        );
        assert_eq!(count(&metrics, "timeout"), 1);
        assert!(matches!(
            slow.oneshot(Call("slow"))
                .await
                .err()
                .unwrap()
                .downcast_ref::<Refused>(),
            Some(Refused::TimedOut(_))
        ));
    }
}
