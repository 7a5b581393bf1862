//! `--sut synthetic` and `--sut local`: sut-node cores (each a backend and
//! batcher) in this process, behind the QDL's in-process links. The samples
//! go through the same QDL as a node across the network (pieces, windows,
//! answers, first tokens), without the socket: comparing the two measures
//! the network tax and nothing else.

use std::sync::Arc;

use netdiv_proto::pb;
use qdl::{InProcessNode, NetworkSut, NodeAnswers, QueryPath};
use sut_node::node::{Node, ReplyTo};
use sut_node::server::{Answers, Unread};
use tokio::sync::mpsc;

use crate::sut::network::QdlSut;
use crate::sut::{QuerySample, SharedResponder, SutError, SystemUnderTest};

/// A sut-node core as the QDL's local link drives it: `Name`, `Info` and
/// query paths whose answers are batched as the node's servers batch them.
#[derive(Debug)]
pub struct NodeInProcess {
    node: Arc<Node>,
}

impl NodeInProcess {
    /// The QDL's view of `node`.
    pub fn new(node: Arc<Node>) -> Self {
        Self { node }
    }
}

impl InProcessNode for NodeInProcess {
    fn name(&self) -> String {
        self.node.settings().name.clone()
    }

    fn info(&self) -> pb::NodeInfo {
        // No network interface carries this node's data.
        self.node.info(Vec::new())
    }

    fn open(&self, answers: NodeAnswers) -> QueryPath {
        let (tx, rx) = mpsc::unbounded_channel();
        let reply = ReplyTo::new(tx);
        // Owed answers let a token model's progress go out between
        // completions, as on a network stream.
        let unread = Arc::new(Unread::new(usize::MAX));
        let owed = unread.clone();
        let node = self.node.clone();
        tokio::spawn(async move {
            let mut batches = Answers::new(rx, &node);
            while let Some(batch) = batches.next(&unread).await {
                let answered = Unread::answers(&batch);
                answers.send(batch);
                unread.written(answered);
            }
            // Every sender is gone: the path is closed and all answered.
            drop(answers);
        });
        let node = self.node.clone();
        Box::new(move |query: pb::Query| {
            owed.submitted(query.samples.len());
            node.submit_query(query, &reply);
        })
    }
}

/// The QDL over in-process nodes, as a SUT; the nodes stop with it.
#[derive(Debug)]
pub struct LocalSut {
    name: String,
    qdl: Option<QdlSut>,
    nodes: Vec<Arc<Node>>,
}

impl LocalSut {
    /// `qdl` drives `nodes` over its local links; the SUT is named `name`
    /// (it is not a Network SUT).
    pub fn new(name: String, qdl: QdlSut, nodes: Vec<Arc<Node>>) -> Self {
        Self {
            name,
            qdl: Some(qdl),
            nodes,
        }
    }

    /// The QDL, for its counters.
    pub fn network(&self) -> &NetworkSut {
        &self.qdl().network
    }

    fn qdl(&self) -> &QdlSut {
        self.qdl.as_ref().expect("the QDL lives until drop")
    }
}

impl SystemUnderTest for LocalSut {
    fn name(&self) -> Result<String, SutError> {
        // The live round trip still goes through the link.
        self.qdl().name()?;
        Ok(self.name.clone())
    }

    fn issue_query(&self, samples: &[QuerySample], responder: &SharedResponder) {
        self.qdl().issue_query(samples, responder);
    }

    fn flush_queries(&self) {}
}

impl Drop for LocalSut {
    fn drop(&mut self) {
        // The QDL first: it takes back what is outstanding and closes the
        // paths, then the nodes' devices stop.
        drop(self.qdl.take());
        for node in &self.nodes {
            node.begin_shutdown();
        }
        for node in &self.nodes {
            node.stop_devices();
        }
    }
}
