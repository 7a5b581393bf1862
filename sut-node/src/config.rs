//! Command line and config file of the daemon. Flags win over the file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use netdiv_proto::codec::Codec;
use serde::Deserialize;

use crate::backend::onnx::{OnnxConfig, Provider};
use crate::backend::synthetic::SyntheticConfig;
use crate::backend::{BackendConfig, BackendKind};
use crate::batcher::BatchPolicy;

/// Which transports to serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Grpc,
    Quic,
    Both,
}

/// netdiv sut-node: serves inference queries from the LoadGen node.
#[derive(Debug, Parser)]
#[command(name = "sut-node", version, about)]
pub struct Cli {
    /// Address to listen on; port 0 picks a free port (gRPC on TCP, QUIC
    /// on UDP, the same port number when it is free on both).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// This node's name; unique among the nodes of a SUT.
    #[arg(long)]
    pub name: String,
    /// What runs the model [default: the config file's `backend`, else
    /// synthetic].
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// ONNX model file (implies --backend onnx).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// The model input that samples feed [default: its only input].
    #[arg(long, value_name = "NAME")]
    pub input_name: Option<String>,
    /// The ONNX Runtime shared library [default: $ORT_DYLIB_PATH, then
    /// libonnxruntime.so on the loader's path].
    #[arg(long, value_name = "FILE")]
    pub onnxruntime_lib: Option<PathBuf>,
    /// Where the ONNX model runs.
    #[arg(long, value_enum)]
    pub execution_provider: Option<Provider>,
    #[arg(long, value_enum)]
    pub transport: Option<Transport>,
    /// TOML file with backend, [synthetic], [onnx], [batching] and other
    /// settings.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Benchmark whose codec rules apply (resnet50, bert, gptj, ...).
    #[arg(long)]
    pub benchmark: Option<String>,
    /// Codec of responses: none or lz4 (if the benchmark allows it).
    #[arg(long)]
    pub response_codec: Option<Codec>,
    /// Largest batch the backend runs (along the model's batch dimension).
    #[arg(long, visible_alias = "max-batch", value_name = "N")]
    pub max_batch_size: Option<usize>,
    #[arg(long)]
    pub max_batch_wait_us: Option<u64>,
    /// TLS certificate chain (PEM); with --tls-key enables TLS on gRPC.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept only clients with a certificate signed by this CA (mTLS).
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Development TLS: generate (or reuse) a CA, server and client pair in DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "tls_cert")]
    pub dev_tls: Option<PathBuf>,
    /// With --dev-tls: require the generated client certificate (mTLS).
    #[arg(long, requires = "dev_tls")]
    pub require_client_cert: bool,
}

/// The config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    pub transport: Option<Transport>,
    pub benchmark: Option<String>,
    pub response_codec: Option<String>,
    pub max_sample_bytes: Option<u64>,
    pub backend: Option<BackendKind>,
    pub synthetic: SyntheticConfig,
    pub onnx: OnnxConfig,
    pub batching: BatchPolicy,
}

impl FileConfig {
    /// Reads a config file; paths in it are relative to its folder.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let mut file: FileConfig =
            toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?;
        // join keeps absolute paths as they are.
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [&mut file.onnx.model, &mut file.onnx.runtime_library]
            .into_iter()
            .flatten()
        {
            *p = base.join(&*p);
        }
        Ok(file)
    }

    /// The backend this file configures.
    pub fn backend_config(&self) -> BackendConfig {
        BackendConfig {
            kind: self.backend.unwrap_or_default(),
            synthetic: self.synthetic.clone(),
            onnx: self.onnx.clone(),
        }
    }
}

/// Everything the daemon runs with.
#[derive(Debug)]
pub struct NodeConfig {
    pub cli: Cli,
    pub transport: Transport,
    pub benchmark: String,
    pub response_codec: Codec,
    pub max_sample_bytes: u64,
    pub backend: BackendConfig,
    pub batching: BatchPolicy,
}

impl NodeConfig {
    pub fn from_cli(cli: Cli) -> Result<Self> {
        let file = cli
            .config
            .as_deref()
            .map(FileConfig::load)
            .transpose()?
            .unwrap_or_default();
        let mut backend = file.backend_config();
        let benchmark = cli
            .benchmark
            .clone()
            .or(file.benchmark)
            .unwrap_or_else(|| "resnet50".into());
        let response_codec = match (cli.response_codec, file.response_codec) {
            (Some(c), _) => c,
            (None, Some(s)) => s.parse().map_err(anyhow::Error::msg)?,
            (None, None) => Codec::None,
        };
        if !netdiv_proto::codec::allowed_codecs(&benchmark).contains(&response_codec) {
            bail!(
                "response codec {} is not allowed for benchmark {benchmark}",
                response_codec.name()
            );
        }
        if let Some(kind) = cli.backend {
            backend.kind = kind;
        }
        if let Some(model) = &cli.model {
            if cli.backend == Some(BackendKind::Synthetic) {
                bail!("--model needs --backend onnx, not synthetic");
            }
            backend.kind = BackendKind::Onnx;
            backend.onnx.model = Some(model.clone());
        }
        if let Some(name) = &cli.input_name {
            backend.onnx.input_name = Some(name.clone());
        }
        if let Some(lib) = &cli.onnxruntime_lib {
            backend.onnx.runtime_library = Some(lib.clone());
        }
        if let Some(provider) = cli.execution_provider {
            backend.onnx.execution_provider = provider;
        }
        let mut batching = file.batching;
        if let Some(n) = cli.max_batch_size {
            batching.max_batch_size = n;
        }
        if let Some(us) = cli.max_batch_wait_us {
            batching.max_wait_us = us;
        }
        if batching.max_batch_size == 0 {
            bail!("max batch size must be at least 1");
        }
        if cli.name.trim().is_empty() {
            bail!("--name must not be empty");
        }
        Ok(Self {
            transport: cli.transport.or(file.transport).unwrap_or(Transport::Both),
            benchmark,
            response_codec,
            max_sample_bytes: file.max_sample_bytes.unwrap_or(64 << 20),
            backend,
            batching,
            cli,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn file_errors_name_the_file_and_the_field() {
        let dir = std::env::temp_dir().join(format!("sut-node-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("node.toml");
        std::fs::write(&path, "[synthetic]\nbatch_cost = 5\n").unwrap();
        let err = format!("{:#}", FileConfig::load(&path).unwrap_err());
        assert!(
            err.contains("node.toml") && err.contains("batch_cost"),
            "{err}"
        );
        std::fs::write(
            &path,
            "[synthetic]\nbatch_cost_us = 5\ndevices = 2\n[batching]\nmax_batch_size = 8\n",
        )
        .unwrap();
        let f = FileConfig::load(&path).unwrap();
        assert_eq!(
            (
                f.synthetic.batch_cost_us,
                f.synthetic.devices,
                f.batching.max_batch_size
            ),
            (5, 2, 8)
        );
    }

    #[test]
    fn disallowed_response_codec_is_refused() {
        let cli = Cli::parse_from([
            "sut-node",
            "--name",
            "a",
            "--benchmark",
            "gptj",
            "--response-codec",
            "lz4",
        ]);
        let err = NodeConfig::from_cli(cli).unwrap_err().to_string();
        assert!(err.contains("not allowed for benchmark gptj"), "{err}");
    }
}
