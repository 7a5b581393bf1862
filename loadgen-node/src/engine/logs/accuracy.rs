//! `mlperf_log_accuracy.json`: the responses kept for accuracy checking.

use std::io::{self, Write};

use super::format::hex_upper;

/// The token fields of a token model's entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokenFields<'a> {
    /// The first token's bytes (`token_data`), in every scenario but
    /// Offline.
    pub first_token: Option<&'a [u8]>,
    /// `n_tokens` as the SUT reported it (`token_count`).
    pub count: i64,
}

/// Streams accuracy entries in the official layout.
#[derive(Debug)]
pub(crate) struct AccuracyLog<W: Write> {
    out: W,
    needs_comma: bool,
}

impl<W: Write> AccuracyLog<W> {
    /// Starts the JSON array in `out`.
    pub(crate) fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"[")?;
        Ok(Self {
            out,
            needs_comma: false,
        })
    }

    /// Appends one response: its sequence id, its QSL index and its bytes
    /// (written as upper-case hex), and for token models its token fields.
    pub(crate) fn entry(
        &mut self,
        seq_id: u64,
        qsl_idx: usize,
        data: &[u8],
        tokens: Option<TokenFields<'_>>,
    ) -> io::Result<()> {
        let sep = if self.needs_comma { ",\n{ " } else { "\n{ " };
        self.needs_comma = true;
        write!(
            self.out,
            "{sep}\"seq_id\" : {seq_id}, \"qsl_idx\" : {qsl_idx}, \"data\" : \"{}\"",
            hex_upper(data)
        )?;
        if let Some(tokens) = tokens {
            if let Some(first) = tokens.first_token {
                write!(self.out, ", \"token_data\" : \"{}\"", hex_upper(first))?;
            }
            write!(self.out, ", \"token_count\" : {}", tokens.count)?;
        }
        self.out.write_all(b" }")
    }

    /// Closes the array, flushes, and gives back the writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.out.write_all(b"\n]\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_official_file() {
        let mut log = AccuracyLog::new(Vec::new()).unwrap();
        log.entry(0, 3155, &[0x53, 0x0c, 0, 0], None).unwrap();
        log.entry(1, 7, &[], None).unwrap();
        let text = String::from_utf8(log.finish().unwrap()).unwrap();
        assert_eq!(
            text,
            "[\n{ \"seq_id\" : 0, \"qsl_idx\" : 3155, \"data\" : \"530C0000\" },\n{ \"seq_id\" : 1, \"qsl_idx\" : 7, \"data\" : \"\" }\n]\n"
        );
        let mut log = AccuracyLog::new(Vec::new()).unwrap();
        let server = TokenFields {
            first_token: Some(&[0xab]),
            count: 12,
        };
        log.entry(2, 5, &[1], Some(server)).unwrap();
        let offline = TokenFields {
            first_token: None,
            count: 3,
        };
        log.entry(3, 6, &[2], Some(offline)).unwrap();
        let text = String::from_utf8(log.finish().unwrap()).unwrap();
        assert_eq!(
            text,
            "[\n{ \"seq_id\" : 2, \"qsl_idx\" : 5, \"data\" : \"01\", \"token_data\" : \"AB\", \"token_count\" : 12 },\n{ \"seq_id\" : 3, \"qsl_idx\" : 6, \"data\" : \"02\", \"token_count\" : 3 }\n]\n"
        );
        let empty = AccuracyLog::new(Vec::new()).unwrap().finish().unwrap();
        assert_eq!(empty, b"[\n]\n");
    }
}
