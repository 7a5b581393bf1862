//! The system description JSON of a submission: the fields only a person
//! knows (`--system-json`), merged with the Network-division fields this
//! node measures (`sysdesc`). A field still marked TODO stops the run.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

use crate::cli::sysdesc::FILL_IN;

/// Whether a value still asks a person for something (an empty string
/// is an answer: the checker takes it for notes and similar fields).
fn is_todo(value: &Value) -> bool {
    value.as_str().is_some_and(|s| s.contains("TODO"))
}

/// The person's file as a JSON object.
pub(crate) fn read_user_fields(path: &Path) -> Result<Map<String, Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    match serde_json::from_str::<Value>(&text)
        .with_context(|| format!("{} is not JSON", path.display()))?
    {
        Value::Object(map) => Ok(map),
        _ => bail!(
            "{}: the system description must be a JSON object",
            path.display()
        ),
    }
}

/// The person's fields, the network fields netdiv measured (they win:
/// a person's value left empty or TODO is replaced, one that differs is
/// refused naming both, since a stale template would contradict the
/// runs), the fields it cannot measure as the person wrote them, and
/// `division = network`. Errors list every field still to fill in.
pub(crate) fn merge(
    user: Map<String, Value>,
    measured: &Value,
    submitter: &str,
    origin: &Path,
) -> Result<Value> {
    let mut merged = user;
    let mut contradicted = Vec::new();
    if let Some(measured) = measured.as_object() {
        for (key, value) in measured {
            let given = merged
                .get(key)
                .filter(|v| !is_todo(v) && v.as_str() != Some(""));
            match given {
                // A field netdiv cannot measure: the person's.
                Some(_) if is_todo(value) => {}
                Some(user) if user != value => {
                    contradicted.push(format!("{key}: {user} in the file, {value} measured"))
                }
                _ => {
                    merged.insert(key.clone(), value.clone());
                }
            }
        }
    }
    if !contradicted.is_empty() {
        bail!(
            "{}: fields netdiv measures differ from what the runs' nodes show ({}); remove \
             them from the file (the measured values are written) or correct them",
            origin.display(),
            contradicted.join("; ")
        );
    }
    match merged.get("division").and_then(Value::as_str) {
        None | Some("network") => {}
        Some(other) => bail!(
            "{}: division is {other:?}; a netdiv submission is for the network division",
            origin.display()
        ),
    }
    merged.insert("division".into(), "network".into());
    match merged.get("submitter").and_then(Value::as_str) {
        Some(s) if s != submitter && !is_todo(&Value::from(s)) => bail!(
            "{}: submitter is {s:?} but --submitter is {submitter:?}",
            origin.display()
        ),
        _ => {
            merged.insert("submitter".into(), submitter.into());
        }
    }
    let todo: Vec<&str> = merged
        .iter()
        .filter(|(_, v)| is_todo(v))
        .map(|(k, _)| k.as_str())
        .collect();
    if !todo.is_empty() {
        bail!(
            "the system description still has fields to fill in ({} of them: {}); write them \
             in {} (fields marked {FILL_IN:?} are the ones netdiv cannot measure)",
            todo.len(),
            todo.join(", "),
            origin.display()
        );
    }
    Ok(Value::Object(merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn measured_fields_fill_the_gaps_and_todo_fields_stop_the_run() {
        let measured = json!({"is_network": "True", "nic_sut": "a: eth0", "network_type": FILL_IN});
        let user =
            map(json!({"system_name": "lab", "network_type": "Ethernet", "nic_sut": "TODO"}));
        let v = merge(user, &measured, "acme", Path::new("sys.json")).unwrap();
        assert_eq!(v["network_type"], "Ethernet");
        assert_eq!(v["nic_sut"], "a: eth0");
        assert_eq!(v["division"], "network");
        assert_eq!(v["submitter"], "acme");

        let user = map(json!({"system_name": "TODO: fill in", "hw_notes": ""}));
        let err = merge(user, &measured, "acme", Path::new("sys.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 of them"), "{err}");
        for field in ["network_type", "system_name"] {
            assert!(err.contains(field), "{err}");
        }
    }

    /// A template made over gRPC, a submission run over QUIC: the file's
    /// protocol contradicts the runs and is refused with both values; an
    /// empty field takes the measured value.
    #[test]
    fn a_measured_field_the_file_contradicts_is_refused_with_both_values() {
        let measured = json!({"network_protocol": "QUIC (UDP/IP)", "number_connections": "2"});
        let user = map(json!({"network_protocol": "gRPC (HTTP/2 over TCP/IP)",
                               "number_connections": ""}));
        let err = merge(user, &measured, "acme", Path::new("sys.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(r#"network_protocol: "gRPC (HTTP/2 over TCP/IP)" in the file, "QUIC (UDP/IP)" measured"#),
            "{err}"
        );
        assert!(!err.contains("number_connections"), "{err}");
        let user = map(json!({"network_protocol": "QUIC (UDP/IP)", "number_connections": ""}));
        let v = merge(user, &measured, "acme", Path::new("sys.json")).unwrap();
        assert_eq!(v["number_connections"], "2");
    }

    #[test]
    fn another_division_or_submitter_is_refused() {
        let user = map(json!({"division": "closed"}));
        assert!(merge(user, &json!({}), "acme", Path::new("s.json")).is_err());
        let user = map(json!({"submitter": "other"}));
        assert!(merge(user, &json!({}), "acme", Path::new("s.json")).is_err());
    }
}
