//! The aggregated `Name()`: the rules require it to contain "Network SUT",
//! to come from a round trip to every node, and every node's name to be
//! unique.

/// Why the node names cannot form one SUT name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    /// Two nodes answered with the same name.
    #[error("nodes {first} and {second} both call themselves {name:?}; every SUT node needs a unique name")]
    Duplicate {
        /// The name both gave.
        name: String,
        /// Address of the node configured first.
        first: String,
        /// Address of the later node with the same name.
        second: String,
    },
    /// No node is configured.
    #[error("a Network SUT needs at least one node")]
    NoNodes,
}

/// Builds the SUT name from `(node address, name it answered)` pairs, in
/// the order the nodes were configured.
pub(crate) fn aggregate(answers: &[(String, String)]) -> Result<String, NameError> {
    if answers.is_empty() {
        return Err(NameError::NoNodes);
    }
    for (i, (addr, name)) in answers.iter().enumerate() {
        if let Some((first, _)) = answers[..i].iter().find(|(_, n)| n == name) {
            return Err(NameError::Duplicate {
                name: name.clone(),
                first: first.clone(),
                second: addr.clone(),
            });
        }
    }
    let names: Vec<&str> = answers.iter().map(|(_, n)| n.as_str()).collect();
    Ok(format!("Network SUT [{}]", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, n)| (a.to_string(), n.to_string()))
            .collect()
    }

    #[test]
    fn joins_every_unique_name() {
        let name = aggregate(&answers(&[
            ("grpc://a:1", "node-a"),
            ("quic://b:2", "node-b"),
        ]))
        .unwrap();
        assert_eq!(name, "Network SUT [node-a, node-b]");
        assert!(name.contains("Network SUT"));
    }

    #[test]
    fn duplicates_and_no_nodes_are_errors() {
        let err = aggregate(&answers(&[
            ("grpc://a:1", "x"),
            ("grpc://b:2", "y"),
            ("grpc://c:3", "x"),
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "nodes grpc://a:1 and grpc://c:3 both call themselves \"x\"; every SUT node needs a unique name"
        );
        assert_eq!(aggregate(&[]), Err(NameError::NoNodes));
    }
}
