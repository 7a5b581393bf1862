//! What one execution of a target reached, as a set of features: the
//! fuzzer keeps an input when it shows a feature no earlier input showed.
//! There is no compiler coverage on stable, so the targets name their own
//! branch points ("which message", "which error") instead.
//!
//! An error's text is normalized (digits and quoted text replaced) so that
//! "frame of 17 bytes" and "frame of 18 bytes" are one feature: otherwise
//! every input would look new and the corpus would grow without end. Texts
//! are kept apart from the other features, as the fuzzer caps how many of
//! each site it counts.

use std::collections::hash_map::DefaultHasher;
use std::fmt::Display;
use std::hash::{Hash, Hasher};

/// Most characters of an error text that count toward its feature.
const MAX_NORMALIZED: usize = 96;

/// The features of one execution. A trace that is off records nothing and
/// costs next to nothing: the plain targets run with one.
#[derive(Debug, Default)]
pub struct Trace {
    on: bool,
    features: Vec<u64>,
    errors: Vec<(u64, u64)>,
    last: u64,
}

impl Trace {
    /// A trace that records.
    pub fn recording() -> Trace {
        Trace {
            on: true,
            ..Trace::default()
        }
    }

    /// A trace that records nothing.
    pub fn off() -> Trace {
        Trace::default()
    }

    /// Forgets the last execution's features.
    pub fn clear(&mut self) {
        self.features.clear();
        self.errors.clear();
        self.last = 0;
    }

    /// The features recorded since the last [`Trace::clear`].
    pub fn features(&self) -> &[u64] {
        &self.features
    }

    /// The errors recorded since the last [`Trace::clear`], each as its
    /// site's feature and a hash of its normalized text. The fuzzer counts
    /// only so many texts per site as new (see `engine`): some texts quote
    /// the input, which no normalization fully tames.
    pub fn errors(&self) -> &[(u64, u64)] {
        &self.errors
    }

    /// The input reached `site`.
    pub fn hit(&mut self, site: &str) {
        if self.on {
            self.push(hash(&(site, "")));
        }
    }

    /// The input reached `site` with a value; values count by order of
    /// magnitude (0, 1, 2-3, 4-7, ...), so sizes and counts are features
    /// without each number being one.
    pub fn value(&mut self, site: &str, value: u64) {
        if self.on {
            self.push(hash(&(site, 64 - value.leading_zeros())));
        }
    }

    /// The input ended at `site` with this error.
    pub fn error(&mut self, site: &str, error: &dyn Display) {
        if self.on {
            let text = normalize(&error.to_string());
            let site = hash(&(site, "error"));
            self.push(site);
            self.errors.push((site, hash(&text)));
        }
    }

    /// Each feature alone and after the one before it, so the same events
    /// in another order count as new (a rough stand-in for edge coverage).
    fn push(&mut self, feature: u64) {
        self.features.push(feature);
        self.features.push(hash(&(self.last, feature)));
        self.last = feature;
    }
}

fn hash<T: Hash>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// An error text with runs of digits as `#` and quoted text as `"…"`,
/// without characters outside printable ASCII, cut at its first line
/// break or at [`MAX_NORMALIZED`] characters. Quotes are `"`, backquotes,
/// and `'` where it opens a word (not the one of "can't").
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_NORMALIZED));
    let mut chars = text.chars().peekable();
    let mut previous = ' ';
    let mut count = 0;
    while let Some(c) = chars.next() {
        if count >= MAX_NORMALIZED {
            break;
        }
        count += 1;
        match c {
            d if d.is_ascii_digit() => {
                while chars.peek().is_some_and(|c| c.is_ascii_digit()) {
                    chars.next();
                }
                out.push('#');
            }
            '"' | '`' => out.push_str(&quoted(&mut chars, c)),
            '\'' if !previous.is_alphanumeric() => out.push_str(&quoted(&mut chars, c)),
            // What follows a line break is context (the offending line).
            '\n' => break,
            c if c == ' ' || c.is_ascii_graphic() => out.push(c),
            _ => {}
        }
        previous = c;
    }
    out
}

/// Reads to the end of a quoted text, past escaped quotes if the quote is
/// `"` (Debug quoting; the others quote raw text). A quoted character
/// (`'{'`, `':'`) stays, being part of the grammar; longer text is `"…"`.
fn quoted(chars: &mut impl Iterator<Item = char>, quote: char) -> String {
    let mut inner = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' && quote == '"' {
            chars.next();
            inner.push('?');
        } else if c == quote {
            break;
        } else {
            inner.push(c);
        }
    }
    match inner.chars().next() {
        Some(c) if inner.len() == 1 && c.is_ascii_graphic() => format!("'{c}'"),
        _ => "\"…\"".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_quoted_text_do_not_make_new_features() {
        assert_eq!(
            normalize("frame of 17 bytes exceeds the limit of 16"),
            "frame of # bytes exceeds the limit of #"
        );
        assert_eq!(
            normalize("key \"abc\" has no value `xy`"),
            "key \"…\" has no value \"…\""
        );
        assert_eq!(normalize(r#"found "a\"b\\" at 3"#), "found \"…\" at #");
        assert_eq!(
            normalize(r"variant `a\`, expected `b`"),
            "variant \"…\", expected 'b'"
        );
        assert_eq!(normalize("expected ':' at 3"), "expected ':' at #");
        assert_eq!(
            normalize("f.conf:3: bad line\n    the line"),
            "f.conf:#: bad line"
        );
        assert_eq!(
            normalize("descr 'x\u{ff}y' can't \u{1}be"),
            "descr \"…\" can't be"
        );
        let long = "x".repeat(500);
        assert_eq!(normalize(&long).len(), MAX_NORMALIZED);
    }

    #[test]
    fn an_off_trace_records_nothing() {
        let mut t = Trace::off();
        t.hit("a");
        t.error("b", &"c");
        assert!(t.features().is_empty() && t.errors().is_empty());
        let mut t = Trace::recording();
        t.hit("a");
        t.value("n", 5);
        t.error("b", &"c 1");
        t.error("b", &"c 2");
        assert_eq!(t.features().len(), 8);
        assert_eq!(t.errors()[0], t.errors()[1]);
    }
}
