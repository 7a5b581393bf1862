//! Brings failed nodes back: a node whose connection failed, which stopped
//! making progress or which declined work is reconnected with exponential
//! backoff, asked for its Info and Name, and takes work again only if it
//! is the same node as before (same name, protocol, benchmark, backend and
//! codecs). A node that comes back as something else is refused and
//! logged, and tried again later. Samples it held were moved to the other
//! nodes when it failed; its old connection is no longer heard (see
//! [`super::router::CurrentLink`]), so every sample still completes once.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use netdiv_proto::pb;
use netdiv_proto::transport::QDL_CLOSE_TIMEOUT;

use super::router::{CurrentLink, NodeState, QueryRouter};
use crate::link::{Link, LinkError, Target};

/// How long to wait between attempts to bring a node back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first attempt after a failure.
    pub first: Duration,
    /// The longest wait; each failed attempt doubles it up to this.
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms, doubling up to 5 s (`defaults`).
    fn default() -> Backoff {
        Backoff {
            first: super::defaults::REJOIN_FIRST_BACKOFF,
            max: super::defaults::REJOIN_MAX_BACKOFF,
        }
    }
}

/// A node that stays up this long after rejoining starts its next backoff
/// from the beginning; one that fails sooner keeps backing off (a node that
/// declines everything is not reconnected in a tight loop).
const STABLE_AFTER: Duration = Duration::from_secs(10);

/// How often an idle watcher looks at its node's health.
const POLL: Duration = Duration::from_millis(50);

/// What makes a node the same node: everything the run was checked
/// against when it started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Identity {
    name: String,
    protocol_version: u32,
    benchmark: String,
    backend: String,
    codecs: Vec<i32>,
    response_codec: i32,
}

impl Identity {
    pub(super) fn of(info: &pb::NodeInfo) -> Identity {
        let mut codecs = info.codecs.clone();
        codecs.sort_unstable();
        Identity {
            name: info.name.clone(),
            protocol_version: info.protocol_version,
            benchmark: info.benchmark.clone(),
            backend: info.backend.clone(),
            codecs,
            response_codec: info.response_codec,
        }
    }

    /// What differs in `other`, or `None` if it is the same node.
    fn difference(&self, other: &Identity) -> Option<String> {
        let mut differences = Vec::new();
        let mut compare = |what: &str, ours: String, theirs: String| {
            if ours != theirs {
                differences.push(format!("{what} {theirs:?}, was {ours:?}"));
            }
        };
        compare("name", self.name.clone(), other.name.clone());
        compare(
            "protocol version",
            self.protocol_version.to_string(),
            other.protocol_version.to_string(),
        );
        compare("benchmark", self.benchmark.clone(), other.benchmark.clone());
        compare("backend", self.backend.clone(), other.backend.clone());
        compare(
            "codecs",
            format!("{:?}", self.codecs),
            format!("{:?}", other.codecs),
        );
        compare(
            "response codec",
            self.response_codec.to_string(),
            other.response_codec.to_string(),
        );
        (!differences.is_empty()).then(|| differences.join(", "))
    }
}

/// How to reach one node again.
pub(super) struct Reconnect {
    pub(super) node: usize,
    pub(super) target: Target,
    pub(super) identity: Identity,
    pub(super) backoff: Backoff,
}

/// Why one attempt did not bring the node back.
enum Attempt {
    /// Unreachable or not answering: try again later.
    Unreachable(LinkError),
    /// It answered as another node.
    Other(String),
}

/// Watches one node until the router is gone, bringing it back each time
/// it fails.
pub(super) async fn watch(router: Weak<QueryRouter>, reconnect: Reconnect) {
    let node = reconnect.node;
    let mut delay = reconnect.backoff.first;
    let mut rejoined_at: Option<Instant> = None;
    // The last impostor seen: it is logged and recorded once, not at
    // every attempt.
    let mut refused: Option<String> = None;
    loop {
        tokio::time::sleep(POLL).await;
        if !needs_rejoin(&router, node) {
            if router.strong_count() == 0 {
                return;
            }
            continue;
        }
        if rejoined_at.is_some_and(|at| at.elapsed() >= STABLE_AFTER) {
            delay = reconnect.backoff.first;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(reconnect.backoff.max);
        if !needs_rejoin(&router, node) {
            continue;
        }
        let attempt = attempt(&reconnect).await;
        let Some(current) = router.upgrade() else {
            return;
        };
        if current.is_over() {
            continue;
        }
        let url = &current.urls[node];
        match attempt {
            Ok(link) => {
                let link = Arc::new(link);
                let generation = current.next_generation(node);
                let events = Arc::new(CurrentLink {
                    router: current.clone(),
                    generation,
                });
                // The new connection becomes current before its query path
                // opens, so nothing it reports is mistaken for the old one.
                // What the old connection still held (a declining node's
                // undeclined samples) is taken back below: the node drops
                // it first.
                let held = current.lock_pool().outstanding_ids(node);
                current.cancel_at(node, &held);
                let old = current.replace_link(node, link.clone(), generation);
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(QDL_CLOSE_TIMEOUT, old.close()).await;
                });
                if let Err(e) = link.start(node, events).await {
                    tracing::warn!(node = %url, event = "rejoin_failed", "cannot rejoin: {e}");
                    continue;
                }
                current.rejoined(node);
                current.record_change(node, NodeState::Rejoined, String::new());
                tracing::info!(
                    node = %url,
                    event = "node_rejoined",
                    "node is back and takes work again"
                );
                rejoined_at = Some(Instant::now());
                refused = None;
            }
            Err(Attempt::Unreachable(e)) => {
                tracing::debug!(node = %url, event = "rejoin_attempt", "not back yet: {e}");
            }
            Err(Attempt::Other(difference)) if refused.as_ref() == Some(&difference) => {
                tracing::debug!(node = %url, event = "node_refused", "still not the node: {difference}");
            }
            Err(Attempt::Other(difference)) => {
                refused = Some(difference.clone());
                tracing::warn!(
                    node = %url,
                    event = "node_refused",
                    "a node answers at this address but it is not the node of this run \
                     ({difference}); it gets no work"
                );
                current.record_change(node, NodeState::Refused, difference);
            }
        }
    }
}

/// Whether `node` is down while the run goes on.
fn needs_rejoin(router: &Weak<QueryRouter>, node: usize) -> bool {
    router
        .upgrade()
        .is_some_and(|r| !r.is_over() && !r.lock_pool().is_healthy(node))
}

/// One reconnection: connect, then check the node's Info and Name.
async fn attempt(reconnect: &Reconnect) -> Result<Link, Attempt> {
    let link = reconnect
        .target
        .connect()
        .await
        .map_err(Attempt::Unreachable)?;
    let checked = async {
        let info = link.info().await.map_err(Attempt::Unreachable)?;
        let mut identity = Identity::of(&info);
        // Name() is what the LoadGen sees; it must agree with Info.
        identity.name = link.name().await.map_err(Attempt::Unreachable)?;
        match reconnect.identity.difference(&identity) {
            None => Ok(()),
            Some(difference) => Err(Attempt::Other(difference)),
        }
    }
    .await;
    if let Err(e) = checked {
        let _ = tokio::time::timeout(QDL_CLOSE_TIMEOUT, link.close()).await;
        return Err(e);
    }
    Ok(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> pb::NodeInfo {
        pb::NodeInfo {
            name: "node-a".into(),
            protocol_version: 2,
            benchmark: "resnet50".into(),
            backend: "synthetic".into(),
            codecs: vec![2, 1],
            ..Default::default()
        }
    }

    #[test]
    fn the_same_node_has_no_difference_whatever_the_codec_order() {
        let mut again = info();
        again.codecs = vec![1, 2];
        again.samples_run = 99;
        assert_eq!(
            Identity::of(&info()).difference(&Identity::of(&again)),
            None
        );
    }

    #[test]
    fn another_node_is_told_apart_by_what_differs() {
        let mut other = info();
        other.name = "node-b".into();
        other.benchmark = "bert-99".into();
        let difference = Identity::of(&info())
            .difference(&Identity::of(&other))
            .unwrap();
        assert!(
            difference.contains("name \"node-b\", was \"node-a\""),
            "{difference}"
        );
        assert!(difference.contains("benchmark"), "{difference}");
        assert!(!difference.contains("codecs"), "{difference}");
    }
}
