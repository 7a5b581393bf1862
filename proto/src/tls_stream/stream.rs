//! The connection after the handshake: reads the peer's records in large
//! socket reads and opens them where they landed; seals what the caller
//! writes into records in one buffer and sends it in one write.

use std::io::{self, IoSlice};
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::handshake::{Established, KeySchedule};
use super::outbox::Outbox;
use super::records::{
    self, bad_record, Content, PostHandshake, RecordKey, CLOSE_NOTIFY, HEADER_LEN,
    KEY_UPDATE_NOT_REQUESTED, MAX_CONTENT, MAX_RECORD,
};

/// The receive buffer's first size: enough for a few records, so that an
/// idle or small-message connection holds little.
const INBOX_START: usize = 4 * MAX_RECORD;
/// Its largest: a socket read of up to this many bytes at a time on a busy
/// link (rustls's own reads are 4 to 17 KiB).
const INBOX_MAX: usize = 256 * 1024;
/// A caller's buffer with this much room is read into directly
/// ([`TlsStream::poll_read_direct`]); a smaller one through the inbox.
const DIRECT_READ_MIN: usize = 4 * MAX_RECORD;
/// The most of the caller's bytes sealed per write call: one send each.
const OUTBOX_MAX: usize = 256 * 1024;
/// A part of a write shorter than this is copied into a record with its
/// neighbours, so that a frame's 9-byte header does not cost a record of
/// its own; a longer one is sealed from the caller's memory.
const COPIED_BELOW: usize = 2048;

/// A TLS 1.3 connection over `IO` whose records netdiv seals and opens
/// itself with the keys rustls agreed (see the module's documentation).
pub struct TlsStream<IO> {
    io: IO,
    rx: RecordKey,
    tx: RecordKey,
    schedule: Box<dyn KeySchedule>,
    /// Records the sending key may seal before netdiv changes it.
    tx_records_per_key: u64,
    /// Bytes read from the socket: opened records before `read_at`,
    /// unopened bytes from `read_at` to `filled`.
    inbox: Vec<u8>,
    read_at: usize,
    filled: usize,
    /// Opened content within `inbox` not yet handed to the caller.
    unread: Range<usize>,
    /// The peer closed its side (close_notify, or the socket's end).
    read_closed: bool,
    /// Sealed records not yet written.
    outbox: Outbox,
    close_notify_sealed: bool,
    /// Keys changed so far: the peer's, ours.
    key_changes: (u64, u64),
}

impl<IO> std::fmt::Debug for TlsStream<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("records_received", &self.rx.records())
            .field("records_sent", &self.tx.records())
            .finish_non_exhaustive()
    }
}

impl<IO> TlsStream<IO> {
    pub(super) fn new(io: IO, established: Established) -> io::Result<TlsStream<IO>> {
        let Established {
            secrets,
            schedule,
            early_data,
            leftover,
        } = established;
        let limit = schedule.confidentiality_limit();
        if limit == 0 {
            return Err(io::Error::other("TLS: a protocol version other than 1.3"));
        }
        let mut inbox = vec![0; INBOX_START.max(early_data.len() + leftover.len() + MAX_RECORD)];
        inbox[..early_data.len()].copy_from_slice(&early_data);
        let filled = early_data.len() + leftover.len();
        inbox[early_data.len()..filled].copy_from_slice(&leftover);
        Ok(TlsStream {
            io,
            rx: RecordKey::new(secrets.rx)?,
            tx: RecordKey::new(secrets.tx)?,
            schedule,
            // Well inside the limit: the key changes long before it wears.
            tx_records_per_key: limit / 2,
            inbox,
            read_at: early_data.len(),
            filled,
            unread: 0..early_data.len(),
            read_closed: false,
            outbox: Outbox::default(),
            close_notify_sealed: false,
            key_changes: (0, 0),
        })
    }

    /// The socket under the TLS.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Changes the sending key after `records` records instead of well
    /// inside the cipher's limit (tests).
    #[doc(hidden)]
    pub fn change_sending_key_every(&mut self, records: u64) {
        self.tx_records_per_key = records.max(1);
    }

    /// How many times the peer changed its sending key, and this end its
    /// own (tests).
    #[doc(hidden)]
    pub fn key_changes(&self) -> (u64, u64) {
        self.key_changes
    }

    /// Opens the next whole record in the inbox, if one has arrived.
    fn open_next(&mut self) -> io::Result<bool> {
        let pending = &self.inbox[self.read_at..self.filled];
        let Some(len) = records::record_len(pending)? else {
            return Ok(false);
        };
        if pending.len() < len {
            return Ok(false);
        }
        let start = self.read_at;
        self.read_at += len;
        let to = start + records::HEADER_LEN;
        let (kind, content_len) = self.rx.open(&mut self.inbox, start..start + len, to)?;
        let content = to..to + content_len;
        match kind {
            Content::ApplicationData => self.unread = content,
            control => {
                let content = self.inbox[content].to_vec();
                self.on_control(control, &content)?;
            }
        }
        Ok(true)
    }

    /// An alert or a handshake message from the peer.
    fn on_control(&mut self, kind: Content, content: &[u8]) -> io::Result<()> {
        match kind {
            Content::Alert => self.on_alert(content),
            _ => self.on_handshake(content),
        }
    }

    fn on_alert(&mut self, content: &[u8]) -> io::Result<()> {
        match *content {
            [_, 0] => {
                self.read_closed = true;
                Ok(())
            }
            // user_canceled: a warning, close_notify follows.
            [_, 90] => Ok(()),
            [_, description] => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("TLS: the peer sent alert {description}"),
            )),
            _ => Err(bad_record("a malformed alert")),
        }
    }

    fn on_handshake(&mut self, content: &[u8]) -> io::Result<()> {
        for message in records::post_handshake(content)? {
            match message {
                PostHandshake::KeyUpdate { update_requested } => {
                    self.rx = RecordKey::new(self.schedule.next_rx()?)?;
                    self.key_changes.0 += 1;
                    if update_requested {
                        self.change_sending_key()?;
                    }
                }
                PostHandshake::NewSessionTicket if self.schedule.takes_tickets() => {}
                PostHandshake::NewSessionTicket => {
                    return Err(bad_record("a session ticket sent to a server"))
                }
            }
        }
        Ok(())
    }

    /// Tells the peer, under the old key, that the next records use a new
    /// one, then takes it (§4.6.3). Sent with the next write or flush.
    fn change_sending_key(&mut self) -> io::Result<()> {
        let start = records::begin(&mut self.outbox);
        self.outbox.extend_from_slice(&KEY_UPDATE_NOT_REQUESTED);
        self.tx.seal(Content::Handshake, &mut self.outbox, start)?;
        self.tx = RecordKey::new(self.schedule.next_tx()?)?;
        self.key_changes.1 += 1;
        Ok(())
    }

    /// Seals the first `len` bytes of `bufs` into records of at most
    /// [`MAX_CONTENT`] bytes each. A part of [`COPIED_BELOW`] bytes or
    /// more is sealed where it lies, in records of its own; smaller parts
    /// (frame headers, a message's small fields) are copied into a record
    /// together.
    fn seal_application_data(&mut self, bufs: &[IoSlice<'_>], len: usize) -> io::Result<()> {
        self.outbox
            .reserve(len + len.div_ceil(MAX_CONTENT) * (MAX_RECORD - MAX_CONTENT));
        let mut left = len;
        // Where the record being filled with copied parts starts.
        let mut open: Option<usize> = None;
        for part in bufs {
            let mut part = &part[..part.len().min(left)];
            left -= part.len();
            if part.len() >= COPIED_BELOW {
                self.seal_open_record(&mut open)?;
                for content in part.chunks(MAX_CONTENT) {
                    self.key_for_next_record()?;
                    self.tx
                        .seal_from(Content::ApplicationData, content, &mut self.outbox)?;
                }
                continue;
            }
            while !part.is_empty() {
                let start = match open {
                    Some(start) => start,
                    None => {
                        self.key_for_next_record()?;
                        *open.insert(records::begin(&mut self.outbox))
                    }
                };
                let room = MAX_CONTENT - (self.outbox.len() - start - HEADER_LEN);
                let n = room.min(part.len());
                self.outbox.extend_from_slice(&part[..n]);
                part = &part[n..];
                if n == room {
                    self.seal_open_record(&mut open)?;
                }
            }
        }
        self.seal_open_record(&mut open)
    }

    /// Seals the record being filled with copied parts, if one is open.
    fn seal_open_record(&mut self, open: &mut Option<usize>) -> io::Result<()> {
        match open.take() {
            Some(start) => self
                .tx
                .seal(Content::ApplicationData, &mut self.outbox, start),
            None => Ok(()),
        }
    }

    /// Changes the sending key first if it has sealed its share of records.
    /// Called only between records: the key update is a record itself.
    fn key_for_next_record(&mut self) -> io::Result<()> {
        if self.tx.records() >= self.tx_records_per_key {
            self.change_sending_key()?;
        }
        Ok(())
    }
}

impl<IO: AsyncWrite + Unpin> TlsStream<IO> {
    /// Writes every sealed record out.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.outbox.unsent().is_empty() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, self.outbox.unsent()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.outbox.mark_sent(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> TlsStream<IO> {
    /// Sends what a key update queued, if the socket takes it now; else it
    /// goes with the next write or flush.
    fn send_pending(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.outbox.unsent().is_empty() {
            if let Poll::Ready(Err(e)) = self.poll_send(cx) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Reads into the caller's buffer itself: the partial record held back
    /// goes first, then the socket's bytes; each whole record is opened
    /// there, its content written right after the previous one's in the
    /// same pass as the decryption, so nothing is copied a second time.
    /// What is left of the last record is held for the next read. True
    /// when content was delivered.
    fn poll_read_direct(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<bool>> {
        let held = &self.inbox[self.read_at..self.filled];
        let start = buf.filled().len();
        // SAFETY: nothing uninitialized is read: the held bytes are written
        // here, the socket's read initializes what it reports, and only
        // those are marked initialized below.
        let unfilled = unsafe { buf.unfilled_mut() };
        let (front, rest) = unfilled.split_at_mut(held.len());
        // SAFETY: `front` is exactly `held.len()` bytes, and the two do not
        // overlap (the inbox is ours, the buffer the caller's).
        unsafe {
            std::ptr::copy_nonoverlapping(held.as_ptr(), front.as_mut_ptr().cast(), held.len());
        }
        let held = held.len();
        let mut space = ReadBuf::uninit(rest);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut space))?;
        let n = space.filled().len();
        if n == 0 {
            return Poll::Ready(self.at_end().map(|()| false));
        }
        let total = held + n;
        // SAFETY: the first `held` bytes were copied in above and the next
        // `n` were written by the read.
        unsafe { buf.assume_init(total) };
        let region = &mut buf.initialized_mut()[start..start + total];
        let (mut read, mut written) = (0, 0);
        while !self.read_closed {
            let Some(len) = records::record_len(&region[read..])? else {
                break;
            };
            if total - read < len {
                break;
            }
            let (kind, content_len) = self.rx.open(region, read..read + len, written)?;
            match kind {
                Content::ApplicationData => written += content_len,
                control => {
                    let content = region[written..written + content_len].to_vec();
                    self.on_control(control, &content)?;
                }
            }
            read += len;
        }
        // After close_notify nothing more is taken.
        let left = if self.read_closed { 0 } else { total - read };
        self.inbox[..left].copy_from_slice(&region[read..read + left]);
        self.read_at = 0;
        self.filled = left;
        buf.advance(written);
        Poll::Ready(Ok(written > 0))
    }

    /// The socket's end: the connection's too, unless it cuts a record.
    fn at_end(&mut self) -> io::Result<()> {
        if self.filled > self.read_at {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "TLS: the peer closed the connection inside a record",
            ));
        }
        self.read_closed = true;
        Ok(())
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.unread.is_empty() || buf.remaining() == 0 {
                let n = this.unread.len().min(buf.remaining());
                buf.put_slice(&this.inbox[this.unread.start..this.unread.start + n]);
                this.unread.start += n;
                return Poll::Ready(Ok(()));
            }
            if this.read_closed {
                return Poll::Ready(Ok(()));
            }
            if this.open_next()? {
                this.send_pending(cx)?;
                continue;
            }
            if buf.remaining() >= DIRECT_READ_MIN {
                let delivered = ready!(this.poll_read_direct(cx, buf))?;
                this.send_pending(cx)?;
                if delivered {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.make_room();
            let mut space = ReadBuf::new(&mut this.inbox[this.filled..]);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut space))?;
            let n = space.filled().len();
            if n == 0 {
                this.at_end()?;
                return Poll::Ready(Ok(()));
            }
            let was_full = this.filled + n == this.inbox.len();
            this.filled += n;
            // A read that filled all the room there was: a busy link, whose
            // next reads may as well be larger.
            if was_full && this.inbox.len() < INBOX_MAX {
                let larger = (this.inbox.len() * 2).min(INBOX_MAX);
                this.inbox.resize(larger, 0);
            }
        }
    }
}

impl<IO> TlsStream<IO> {
    /// Room for at least one whole record after `filled`: opened records
    /// are dropped, and a partial one moves to the front.
    fn make_room(&mut self) {
        if self.read_at == self.filled {
            self.read_at = 0;
            self.filled = 0;
        } else if self.inbox.len() - self.filled < MAX_RECORD {
            self.inbox.copy_within(self.read_at..self.filled, 0);
            self.filled -= self.read_at;
            self.read_at = 0;
        }
        self.unread = 0..0;
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // What was sealed before goes first: the socket's buffer is the
        // only queue, as for a plain socket.
        ready!(this.poll_send(cx))?;
        let len = bufs.iter().map(|b| b.len()).sum::<usize>().min(OUTBOX_MAX);
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        this.seal_application_data(bufs, len)?;
        // Sent now if the socket takes it; else before the next write.
        if let Poll::Ready(Err(e)) = this.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        // Records are sealed into one buffer anyway.
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_notify_sealed {
            this.close_notify_sealed = true;
            let start = records::begin(&mut this.outbox);
            this.outbox.extend_from_slice(&CLOSE_NOTIFY);
            this.tx.seal(Content::Alert, &mut this.outbox, start)?;
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
