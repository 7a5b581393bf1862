//! TLS 1.3 records after the handshake (RFC 8446 §5): one direction's key
//! and sequence number, sealing a record onto a buffer and opening one in
//! place, and the few handshake messages that may follow the handshake.

use std::io;
use std::ops::Range;

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, NONCE_LEN};
use rustls::ConnectionTrafficSecrets;

use super::outbox::Outbox;

/// A record's header: outer type, legacy version, payload length.
pub(super) const HEADER_LEN: usize = 5;
/// The AEAD tag after every payload (all TLS 1.3 ciphers use 16 bytes).
const TAG_LEN: usize = 16;
/// The most content one record carries (§5.1).
pub(super) const MAX_CONTENT: usize = 1 << 14;
/// The largest protected payload a peer may send (§5.2): content, its type,
/// padding and tag.
const MAX_PAYLOAD: usize = MAX_CONTENT + 256;
/// A whole record at its largest.
pub(super) const MAX_RECORD: usize = HEADER_LEN + MAX_PAYLOAD;
/// The outer type of every protected record; the real one is inside.
const OPAQUE_TYPE: u8 = 23;

/// What a record carries, from the type byte inside its protection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Content {
    ApplicationData,
    Handshake,
    Alert,
}

impl Content {
    fn byte(self) -> u8 {
        match self {
            Content::ApplicationData => 23,
            Content::Handshake => 22,
            Content::Alert => 21,
        }
    }

    fn from_byte(byte: u8) -> Option<Content> {
        match byte {
            23 => Some(Content::ApplicationData),
            22 => Some(Content::Handshake),
            21 => Some(Content::Alert),
            _ => None,
        }
    }
}

/// A peer's record that cannot be taken: the connection is over.
pub(super) fn bad_record(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {}", what.into()))
}

/// One direction's traffic key: the AEAD key, the IV and the number of
/// records it has protected (the nonce of the next one, §5.3).
pub(super) struct RecordKey {
    key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    seq: u64,
}

impl RecordKey {
    /// The key rustls derived, at sequence number `seq`.
    pub(super) fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> io::Result<RecordKey> {
        let (algorithm, key, iv) = match &secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv)
            }
            _ => {
                return Err(io::Error::other(
                    "TLS: a cipher this record layer does not know",
                ))
            }
        };
        let key = UnboundKey::new(algorithm, key.as_ref())
            .map_err(|_| io::Error::other("TLS: a traffic key of the wrong length"))?;
        let iv = iv
            .as_ref()
            .try_into()
            .map_err(|_| io::Error::other("TLS: a traffic IV of the wrong length"))?;
        Ok(RecordKey {
            key: LessSafeKey::new(key),
            iv,
            seq,
        })
    }

    /// Records protected or opened with this key so far.
    pub(super) fn records(&self) -> u64 {
        self.seq
    }

    /// The next record's nonce: the IV with the sequence number XORed into
    /// its low bytes (§5.3). A key is never used past 2^64 records.
    fn next_nonce(&mut self) -> io::Result<Nonce> {
        let seq = self.seq;
        self.seq = seq
            .checked_add(1)
            .ok_or_else(|| io::Error::other("TLS: a traffic key's sequence numbers ran out"))?;
        let mut nonce = self.iv;
        for (byte, s) in nonce[NONCE_LEN - 8..].iter_mut().zip(seq.to_be_bytes()) {
            *byte ^= s;
        }
        Ok(Nonce::assume_unique_for_key(nonce))
    }

    /// Protects the record that [`begin`] started at `start` of `out`, whose
    /// content the caller has appended since: appends its type and tag and
    /// fills in its length.
    pub(super) fn seal(&mut self, kind: Content, out: &mut Outbox, start: usize) -> io::Result<()> {
        out.push(kind.byte());
        let header = header(out.len() - start - HEADER_LEN + TAG_LEN);
        out[start..start + HEADER_LEN].copy_from_slice(&header);
        let nonce = self.next_nonce()?;
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(header), &mut out[start + HEADER_LEN..])
            .map_err(|_| io::Error::other("TLS: a record could not be sealed"))?;
        out.extend_from_slice(tag.as_ref());
        Ok(())
    }

    /// Appends a whole record protecting `content`, read where it lies:
    /// the ciphertext is written straight into `out`, so the content is
    /// not copied first (AWS-LC seals out of place; ring only in place).
    pub(super) fn seal_from(
        &mut self,
        kind: Content,
        content: &[u8],
        out: &mut Outbox,
    ) -> io::Result<()> {
        let header = header(content.len() + 1 + TAG_LEN);
        out.extend_from_slice(&header);
        let room = out.room(content.len() + 1 + TAG_LEN);
        let (ciphertext, type_and_tag) = room.split_at_mut(content.len());
        let nonce = self.next_nonce()?;
        self.key
            .seal_out_of_place_scatter(
                nonce,
                Aad::from(header),
                content,
                ciphertext,
                &[kind.byte()],
                type_and_tag,
            )
            .map_err(|_| io::Error::other("TLS: a record could not be sealed"))
    }

    /// Opens the whole record at `record` of `buf` and writes its content
    /// from `to` on (at most `record.start + HEADER_LEN`: in place, or
    /// moved toward the front in the same pass as the decryption). Returns
    /// the content's type and length.
    pub(super) fn open(
        &mut self,
        buf: &mut [u8],
        record: Range<usize>,
        to: usize,
    ) -> io::Result<(Content, usize)> {
        let h = &buf[record.start..record.start + HEADER_LEN];
        let header: [u8; HEADER_LEN] = [h[0], h[1], h[2], h[3], h[4]];
        let nonce = self.next_nonce()?;
        let inner = self
            .key
            .open_within(
                nonce,
                Aad::from(header),
                &mut buf[to..record.end],
                record.start + HEADER_LEN - to..,
            )
            .map_err(|_| bad_record("a record failed its integrity check (bad_record_mac)"))?;
        // The content ends in its type, then zeros of padding (§5.2).
        let type_at = inner
            .iter()
            .rposition(|&b| b != 0)
            .ok_or_else(|| bad_record("a record with no content type"))?;
        let kind = Content::from_byte(inner[type_at])
            .ok_or_else(|| bad_record(format!("a record of content type {}", inner[type_at])))?;
        Ok((kind, type_at))
    }
}

/// A protected record's header for a payload of `payload_len` bytes
/// (content, its type and the tag).
fn header(payload_len: usize) -> [u8; HEADER_LEN] {
    debug_assert!(payload_len <= MAX_CONTENT + 1 + TAG_LEN);
    let length = (payload_len as u16).to_be_bytes();
    [OPAQUE_TYPE, 3, 3, length[0], length[1]]
}

/// Starts a record at the end of `out`: room for its header, which
/// [`RecordKey::seal`] fills in. Returns where the record starts.
pub(super) fn begin(out: &mut Outbox) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    start
}

/// The length of the whole record at the front of `bytes`, once its
/// header has arrived; an error if the header is not a protected record's.
pub(super) fn record_len(bytes: &[u8]) -> io::Result<Option<usize>> {
    let [outer, _, _, high, low, ..] = *bytes else {
        return Ok(None);
    };
    if outer != OPAQUE_TYPE {
        return Err(bad_record(format!(
            "a record of outer type {outer} after the handshake"
        )));
    }
    let payload = usize::from(u16::from_be_bytes([high, low]));
    if !(TAG_LEN + 1..=MAX_PAYLOAD).contains(&payload) {
        return Err(bad_record(format!("a record of {payload} bytes")));
    }
    Ok(Some(HEADER_LEN + payload))
}

/// A handshake message that may come after the handshake (§4.6).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PostHandshake {
    /// The peer changed its sending key; it asks us to change ours too
    /// when `update_requested`.
    KeyUpdate { update_requested: bool },
    /// A ticket to resume the session later (client side only).
    NewSessionTicket,
}

const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;

/// The handshake messages in one record's content. A message split across
/// records is refused: none of the two that may come here is that large.
pub(super) fn post_handshake(mut content: &[u8]) -> io::Result<Vec<PostHandshake>> {
    let mut messages = Vec::new();
    while !content.is_empty() {
        let [kind, a, b, c, ref rest @ ..] = *content else {
            return Err(bad_record("a handshake message split across records"));
        };
        let len = u32::from_be_bytes([0, a, b, c]) as usize;
        if rest.len() < len {
            return Err(bad_record("a handshake message split across records"));
        }
        let (body, after) = rest.split_at(len);
        messages.push(match (kind, body) {
            (KEY_UPDATE, [0]) => PostHandshake::KeyUpdate {
                update_requested: false,
            },
            (KEY_UPDATE, [1]) => PostHandshake::KeyUpdate {
                update_requested: true,
            },
            (KEY_UPDATE, _) => return Err(bad_record("a malformed key_update")),
            (NEW_SESSION_TICKET, _) => PostHandshake::NewSessionTicket,
            (other, _) => {
                return Err(bad_record(format!(
                    "handshake message {other} after the handshake"
                )))
            }
        });
        content = after;
    }
    Ok(messages)
}

/// A key_update message's bytes: we changed our sending key, and the peer
/// need not change its own.
pub(super) const KEY_UPDATE_NOT_REQUESTED: [u8; 5] = [KEY_UPDATE, 0, 0, 1, 0];

/// A close_notify alert's content (§6.1): warning level, description 0.
pub(super) const CLOSE_NOTIFY: [u8; 2] = [1, 0];
