//! Small text helpers: the end of a long output for an error message
//! ([`tail`], [`clip`]), and [`replace_once`], an edit of a file's text
//! that fails instead of silently doing nothing when the text it expects
//! has changed.

use anyhow::{bail, Result};

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `text` cut to at most `max` characters, with a marker when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}... ({} chars)", text.chars().count())
    }
}

/// `text` with `from` replaced by `to`; an error unless `from` occurs
/// exactly once, so a test that edits a file it does not own (a unit file,
/// say) notices when that file changes under it instead of testing the
/// unedited text.
pub fn replace_once(text: &str, from: &str, to: &str) -> Result<String> {
    match text.matches(from).count() {
        1 => Ok(text.replacen(from, to, 1)),
        0 => bail!("{from:?} is not in the text:\n{}", clip(text, 2000)),
        n => bail!("{from:?} occurs {n} times in the text, not once"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_clip() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(clip("abcdef", 10), "abcdef");
        assert_eq!(clip("abcdef", 3), "abc... (6 chars)");
    }

    #[test]
    fn replace_once_needs_exactly_one_match() {
        assert_eq!(
            replace_once("a=yes\nb=yes\n", "a=yes", "a=no").unwrap(),
            "a=no\nb=yes\n"
        );
        let missing = replace_once("a=yes\n", "c=yes", "c=no").unwrap_err();
        assert!(
            missing.to_string().contains("\"c=yes\" is not in the text"),
            "{missing}"
        );
        let twice = replace_once("x=yes\nx=yes\n", "x=yes", "x=no").unwrap_err();
        assert!(twice.to_string().contains("occurs 2 times"), "{twice}");
    }
}
