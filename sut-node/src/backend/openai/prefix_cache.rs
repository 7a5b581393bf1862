//! What an engine's own Prometheus metrics say of its prefix cache (pure:
//! the text of `/metrics` in, the findings out). vLLM states the setting
//! (`vllm:cache_config_info{enable_prefix_caching="True"}`) and counts the
//! cache's queries and hits in prompt tokens
//! (`vllm:prefix_cache_queries_total`, `vllm:prefix_cache_hits_total`);
//! SGLang counts `sglang:cache_hit_rate`. The node reads them beside its
//! timing check at start, and again whenever the engine comes back after a
//! restart, so an engine restarted with caching on is caught while a run
//! goes on.

/// An engine's prefix-cache metrics; each `None` where it exports none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CacheMetrics {
    /// The setting, where the engine states it.
    pub enabled: Option<bool>,
    /// Prompt tokens looked up in the cache, since the engine started.
    pub queries: Option<f64>,
    /// Prompt tokens found there.
    pub hits: Option<f64>,
}

impl CacheMetrics {
    /// Reads `text`, the body of an engine's `/metrics`.
    pub fn parse(text: &str) -> CacheMetrics {
        let mut found = CacheMetrics::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let name = series.split('{').next().unwrap_or(series);
            let number = value.trim().parse::<f64>().ok();
            match name {
                "vllm:cache_config_info" => {
                    if let Some(setting) = label(series, "enable_prefix_caching") {
                        found.enabled = Some(setting.eq_ignore_ascii_case("true"));
                    }
                }
                "vllm:prefix_cache_queries_total" | "vllm:prefix_cache_queries" => {
                    found.queries = sum(found.queries, number);
                }
                "vllm:prefix_cache_hits_total" | "vllm:prefix_cache_hits" => {
                    found.hits = sum(found.hits, number);
                }
                _ => {}
            }
        }
        found
    }

    /// Hits counted since `before`, where both counted any.
    pub fn hits_since(&self, before: &CacheMetrics) -> Option<f64> {
        Some(self.hits? - before.hits.unwrap_or(0.0))
    }

    /// What they say, for the node's evidence line; `None` if nothing.
    pub fn describe(&self, before: Option<&CacheMetrics>) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(on) = self.enabled {
            parts.push(format!(
                "enable_prefix_caching={}",
                if on { "True" } else { "False" }
            ));
        }
        if let Some(hits) = before.and_then(|b| self.hits_since(b)) {
            parts.push(format!(
                "{hits:.0} prefix-cache hit tokens during the check"
            ));
        }
        (!parts.is_empty()).then(|| format!("/metrics: {}", parts.join(", ")))
    }

    /// Whether they show the cache on: the setting, or hits counted since
    /// `before`.
    pub fn caches(&self, before: Option<&CacheMetrics>) -> bool {
        self.enabled == Some(true)
            || before
                .and_then(|b| self.hits_since(b))
                .is_some_and(|hits| hits > 0.0)
    }
}

/// The value of `name` among `series`' labels.
fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let labels = series.split_once('{')?.1.strip_suffix('}')?;
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let rest = &labels[start..];
    Some(&rest[..rest.find('"')?])
}

/// Counters summed over engines (a data-parallel vLLM labels each).
fn sum(total: Option<f64>, value: Option<f64>) -> Option<f64> {
    match (total, value) {
        (Some(t), Some(v)) => Some(t + v),
        (t, v) => t.or(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as vLLM 0.32.0 writes them (shortened).
    const VLLM: &str = r#"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0"} 1.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1536.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 1024.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.79e+09
"#;

    #[test]
    fn vllms_setting_and_counters_are_read() {
        let m = CacheMetrics::parse(VLLM);
        assert_eq!(
            m,
            CacheMetrics {
                enabled: Some(true),
                queries: Some(1536.0),
                hits: Some(1024.0),
            }
        );
        let off = CacheMetrics::parse(&VLLM.replace("\"True\"", "\"False\""));
        assert_eq!(off.enabled, Some(false));
        let before = CacheMetrics {
            hits: Some(1024.0),
            ..off
        };
        assert!(!off.caches(Some(&before)), "no hits during the check");
        let later = CacheMetrics {
            hits: Some(1536.0),
            ..off
        };
        assert!(later.caches(Some(&before)), "hits during the check");
        assert_eq!(
            later.describe(Some(&before)).unwrap(),
            "/metrics: enable_prefix_caching=False, 512 prefix-cache hit tokens during the check"
        );
    }

    #[test]
    fn an_engine_without_the_metrics_says_nothing() {
        let m = CacheMetrics::parse("llamacpp:prompt_tokens_total 10\nno value\n");
        assert_eq!(m, CacheMetrics::default());
        assert!(!m.caches(None));
        assert_eq!(m.describe(None), None);
    }
}
