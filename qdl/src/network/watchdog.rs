//! Fails nodes that hold samples but show no progress for a while — no
//! completion, no first token, and (token models) no growth of the token
//! count the node reports: a node that keeps its connection (and answers
//! keep-alives) but whose backend is stuck would otherwise stall the run
//! forever, while a node streaming answers that last minutes is alive.

use std::sync::Weak;
use std::time::{Duration, Instant};

use super::router::QueryRouter;
use crate::link::LinkError;

/// Checks every node's progress a few times per `timeout` until the router
/// is gone.
pub(super) async fn watch(router: Weak<QueryRouter>, timeout: Duration) {
    let tick = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    // Per node: its progress count last seen, and since when nothing
    // changed.
    let mut seen: Vec<(u64, Instant)> = Vec::new();
    loop {
        tokio::time::sleep(tick).await;
        let Some(router) = router.upgrade() else {
            return;
        };
        let now = Instant::now();
        seen.resize(router.node_count(), (0, now));
        let mut stuck = Vec::new();
        {
            let pool = router.lock_pool();
            for (node, (last, since)) in seen.iter_mut().enumerate() {
                let Some((in_flight, progress)) = pool.progress(node) else {
                    // Down: a node that rejoins starts its clock afresh,
                    // not from before it failed.
                    *since = now;
                    continue;
                };
                if in_flight == 0 || progress != *last {
                    // Idle, or progressing: the clock starts again.
                    (*last, *since) = (progress, now);
                } else if now - *since >= timeout {
                    stuck.push(node);
                }
            }
        }
        for node in stuck {
            router.fail_node(node, LinkError::Stuck { after: timeout });
        }
    }
}
