//! Sealed records waiting for the socket.

use std::ops::{Deref, DerefMut};

/// Sealed records not yet written: one buffer, sent from the front and
/// emptied once all of it is sent. Unlike a `Vec` cleared after each
/// send, its bytes stay written (initialized) up to the most it has held,
/// so a record sealed from the caller's memory is written straight into
/// them; a `Vec` would have to zero that room before every such record.
/// Dereferences to the records it holds.
#[derive(Default)]
pub(super) struct Outbox {
    /// Written bytes: records from `sent` to `end`, old ones after that.
    buf: Vec<u8>,
    end: usize,
    sent: usize,
}

impl Outbox {
    /// Makes `additional` more bytes of records cheap to add: no
    /// reallocation while they are.
    pub(super) fn reserve(&mut self, additional: usize) {
        let want = self.end + additional;
        self.buf.reserve(want.saturating_sub(self.buf.len()));
    }

    /// The next `len` bytes, now part of the outbox, for the caller to
    /// fill: what they held before (zeros, or records already sent)
    /// until it does.
    pub(super) fn room(&mut self, len: usize) -> &mut [u8] {
        let start = self.end;
        self.end += len;
        if self.buf.len() < self.end {
            self.buf.resize(self.end, 0);
        }
        &mut self.buf[start..self.end]
    }

    pub(super) fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.room(bytes.len()).copy_from_slice(bytes);
    }

    pub(super) fn push(&mut self, byte: u8) {
        self.room(1)[0] = byte;
    }

    /// Records sealed and not yet written.
    pub(super) fn unsent(&self) -> &[u8] {
        &self.buf[self.sent..self.end]
    }

    /// The socket took `len` more bytes; once it has taken all, the
    /// outbox starts again from the front.
    pub(super) fn mark_sent(&mut self, len: usize) {
        self.sent += len;
        debug_assert!(self.sent <= self.end);
        if self.sent >= self.end {
            self.sent = 0;
            self.end = 0;
        }
    }
}

impl Deref for Outbox {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[..self.end]
    }
}

impl DerefMut for Outbox {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_holds_what_was_written_and_empties_once_all_is_sent() {
        let mut out = Outbox::default();
        out.extend_from_slice(b"abc");
        out.push(b'd');
        out.room(2).copy_from_slice(b"ef");
        assert_eq!(&*out, b"abcdef");
        out.mark_sent(4);
        assert_eq!(out.unsent(), b"ef");
        assert_eq!(out.len(), 6, "the records stay until all are sent");
        out.mark_sent(2);
        assert!(out.is_empty() && out.unsent().is_empty());
        // Room reused after a send holds the old bytes until written.
        assert_eq!(out.room(3), b"abc");
        out.extend_from_slice(b"xyz");
        assert_eq!(&*out, b"abcxyz");
    }
}
