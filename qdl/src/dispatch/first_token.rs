//! A node's time to a first token, as a straight line in the prompt tokens
//! it prefills with or before the sample, fitted as the run goes: a fixed
//! part (the step under way, the node's own step) and a part per prompt
//! token. A prompt ahead on a node then costs its prefill, not a multiple
//! of the new piece's.

/// The weight of each new first token in a node's running means: the last
/// few dozen samples count, so a node that slows is seen within a fraction
/// of a second of a Server run.
pub(crate) const FIRST_TOKEN_WEIGHT: f64 = 1.0 / 32.0;

/// What one first token says about its node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FirstToken {
    /// Seconds from sending the sample to its first token.
    pub secs: f64,
    /// The prompt tokens the node had not started when the sample was
    /// sent, the sample's own (and its piece's) included.
    pub prompt_tokens: f64,
    /// The node held nothing when the sample was sent: its first token
    /// came after the prefill alone, which says nothing of the node
    /// once it runs sequences.
    pub node_was_idle: bool,
}

/// Running means of a node's first tokens, from which the line is read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct FirstTokenFit {
    tokens: f64,
    secs: f64,
    tokens_squared: f64,
    tokens_by_secs: f64,
    seen: bool,
}

impl FirstTokenFit {
    /// Takes in a first token of the node (one sent to an idle node is
    /// left out).
    pub(crate) fn observe(&mut self, first: FirstToken) {
        if first.node_was_idle {
            return;
        }
        let weight = if self.seen { FIRST_TOKEN_WEIGHT } else { 1.0 };
        self.seen = true;
        let (x, y) = (first.prompt_tokens.max(0.0), first.secs.max(0.0));
        for (mean, value) in [
            (&mut self.tokens, x),
            (&mut self.secs, y),
            (&mut self.tokens_squared, x * x),
            (&mut self.tokens_by_secs, x * y),
        ] {
            *mean += (value - *mean) * weight;
        }
    }

    /// Seconds per prompt token: the line's slope, never below 0, and 0
    /// until prompt lengths have varied.
    pub(crate) fn secs_per_token(&self) -> f64 {
        let variance = self.tokens_squared - self.tokens * self.tokens;
        if variance < 1.0 {
            return 0.0;
        }
        ((self.tokens_by_secs - self.tokens * self.secs) / variance).max(0.0)
    }

    /// When the first token of a sample with `prompt_tokens` to prefill
    /// with or before it would come, in seconds; `None` before the node
    /// has shown any.
    pub(crate) fn predict(&self, prompt_tokens: f64) -> Option<f64> {
        self.seen
            .then(|| (self.secs + self.secs_per_token() * (prompt_tokens - self.tokens)).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(secs: f64, prompt_tokens: f64) -> FirstToken {
        FirstToken {
            secs,
            prompt_tokens,
            node_was_idle: false,
        }
    }

    #[test]
    fn the_fit_finds_the_fixed_part_and_the_part_per_token() {
        let mut fit = FirstTokenFit::default();
        assert_eq!(fit.predict(100.0), None);
        // 15 ms plus 10 µs per prompt token.
        for k in 0..400 {
            let tokens = f64::from(8 + (k * 37) % 1000);
            fit.observe(first(0.015 + tokens * 10e-6, tokens));
        }
        assert!((fit.secs_per_token() - 10e-6).abs() < 1e-9);
        let at = |tokens| fit.predict(tokens).unwrap();
        assert!((at(0.0) - 0.015).abs() < 1e-6, "{}", at(0.0));
        assert!((at(1000.0) - 0.025).abs() < 1e-6, "{}", at(1000.0));
    }

    #[test]
    fn one_length_gives_no_slope_and_an_idle_node_is_left_out() {
        let mut fit = FirstTokenFit::default();
        for _ in 0..10 {
            fit.observe(first(0.02, 300.0));
        }
        assert_eq!(fit.secs_per_token(), 0.0);
        assert_eq!(fit.predict(3000.0), Some(0.02));
        // A first token after the prefill alone does not pull it down.
        fit.observe(FirstToken {
            node_was_idle: true,
            ..first(0.003, 300.0)
        });
        assert_eq!(fit.predict(300.0), Some(0.02));
    }
}
