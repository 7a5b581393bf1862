//! Scraping a Prometheus endpoint the way a Prometheus server does (HTTP
//! GET /metrics) and reading the samples of its text format.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// One sample line: `name{label="value",...} number`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of one scrape.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// The values of metric `name` whose labels include every `(key, value)`
    /// of `labels`.
    pub fn values(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
            })
            .map(|s| s.value)
            .collect()
    }

    /// The one value of `name` (with `labels`); an error when there is
    /// none or several.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
        match self.values(name, labels)[..] {
            [v] => Ok(v),
            ref other => bail!("{name} {labels:?}: {} values, expected 1", other.len()),
        }
    }

    /// The sum of `name` over every label set.
    pub fn sum(&self, name: &str) -> f64 {
        self.values(name, &[]).iter().sum()
    }
}

/// Parses the text exposition format (comments skipped).
pub fn parse(text: &str) -> Result<Scrape> {
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .with_context(|| format!("line {}: no value: {line:?}", n + 1))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .with_context(|| format!("line {}: bad value {v:?}", n + 1))?,
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .with_context(|| format!("line {}: unclosed labels", n + 1))?;
                (name.to_string(), parse_labels(body, n + 1)?)
            }
        };
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    Ok(Scrape { samples })
}

/// `a="x",b="y"` (values without escaped quotes or commas, as netdiv's
/// labels are).
fn parse_labels(body: &str, line: usize) -> Result<BTreeMap<String, String>> {
    body.split("\",")
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once("=\"")
                .with_context(|| format!("line {line}: bad label {pair:?}"))?;
            Ok((k.to_string(), v.trim_end_matches('"').to_string()))
        })
        .collect()
}

/// GET http://addr/metrics and parse it.
pub fn scrape(addr: SocketAddr) -> Result<Scrape> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("cannot connect to the metrics endpoint {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("no HTTP header end")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!(
            "GET /metrics from {addr}: {}",
            head.lines().next().unwrap_or("")
        );
    }
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)?
    } else {
        body.to_string()
    };
    parse(&body)
}

fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("bad chunk")?;
        let size = usize::from_str_radix(size.trim(), 16).context("bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("short chunk")?);
        body = rest.get(size + 2..).context("short chunk")?;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_samples_with_and_without_labels() {
        let text = "# HELP a x\na_total 3\nb{node=\"grpc://1.2.3.4:5\",name=\"n\"} 2.5\n# EOF\n";
        let scrape = super::parse(text).unwrap();
        assert_eq!(scrape.value("a_total", &[]).unwrap(), 3.0);
        assert_eq!(scrape.value("b", &[("name", "n")]).unwrap(), 2.5);
        assert_eq!(
            scrape.values("b", &[("node", "grpc://1.2.3.4:5")]),
            vec![2.5]
        );
        assert!(scrape.value("b", &[("name", "other")]).is_err());
    }
}
