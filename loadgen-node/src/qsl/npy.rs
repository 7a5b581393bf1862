//! A minimal NumPy `.npy` reader and writer: format versions 1.0, 2.0 and
//! 3.0, C order, the little-endian dtypes of [`DType`].
//!
//! The header is a Python dict literal; it is read with a small hand-written
//! parser so that no Python or pickle is involved and every refusal can say
//! exactly what is wrong.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::DType;

/// The first bytes of every `.npy` file.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// numpy aligns the payload to 64 bytes so it can be memory-mapped; we do
/// the same when writing.
const ALIGN: usize = 64;

/// A tensor read from a `.npy` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyArray {
    /// Element type, from the header's `descr`.
    pub dtype: DType,
    /// Dimensions, outermost first; empty for a scalar.
    pub shape: Vec<usize>,
    /// The payload, C order, little-endian.
    pub data: Vec<u8>,
}

/// Why bytes are not a `.npy` array this reader accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpyFormatError {
    /// The file does not start with `\x93NUMPY`.
    #[error("not a .npy file: it does not start with the magic string \\x93NUMPY")]
    BadMagic,
    #[error("unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)")]
    /// A format version other than 1.0, 2.0 or 3.0.
    UnsupportedVersion {
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    #[error("truncated header: it needs {needed} bytes but the file holds only {actual}")]
    /// The file ends before its header does.
    TruncatedHeader {
        /// Bytes needed to hold the header read so far.
        needed: usize,
        /// Bytes the file holds.
        actual: usize,
    },
    /// The header text cannot be parsed; says where and why.
    #[error("header is not a Python dict literal: {0}")]
    HeaderSyntax(String),
    /// The header lacks one of `descr`, `fortran_order` and `shape`.
    #[error("header dict has no {0:?} key")]
    MissingKey(&'static str),
    #[error("header key {key:?} holds {value}, expected {expected}")]
    /// A header key holds a value of the wrong kind.
    BadValue {
        /// The key.
        key: &'static str,
        /// The value as written in the header.
        value: String,
        /// What the key must hold.
        expected: &'static str,
    },
    /// A `descr` that is not one of the supported dtypes (as written).
    #[error("unsupported dtype descr {0} (supported: {list})", list = supported_descrs())]
    UnsupportedDescr(String),
    /// The array is stored in Fortran (column-major) order.
    #[error("fortran_order is True: only C-order arrays are supported (save the array with np.ascontiguousarray)")]
    FortranOrder,
    #[error("shape {shape:?} of {dtype} holds more bytes than fit in memory")]
    /// The payload size of the shape overflows `usize`.
    ShapeTooLarge {
        /// The header's shape.
        shape: Vec<usize>,
        /// The dtype's name.
        dtype: &'static str,
    },
    #[error("payload holds {actual} bytes but shape {shape:?} of {dtype} needs {expected}")]
    /// The payload is not exactly the size the header announces.
    PayloadLength {
        /// The header's shape.
        shape: Vec<usize>,
        /// The dtype's name.
        dtype: &'static str,
        /// Payload bytes the shape and dtype need.
        expected: usize,
        /// Payload bytes the file holds.
        actual: usize,
    },
}

/// Why a `.npy` file could not be read; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("cannot read {}: {source}", path.display())]
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The read error.
        source: io::Error,
    },
    #[error("{}: {source}", path.display())]
    /// The file's contents are not an accepted `.npy` array.
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with its contents.
        source: NpyFormatError,
    },
}

/// The descrs we read, as numpy spells them in headers we write.
const SUPPORTED: &[DType] = DType::ALL;

fn supported_descrs() -> String {
    let names: Vec<String> = SUPPORTED
        .iter()
        .map(|d| format!("'{}'", d.npy_descr()))
        .collect();
    names.join(", ")
}

/// Reads a whole `.npy` file.
pub fn read_npy(path: &Path) -> Result<NpyArray, NpyError> {
    let mut bytes = fs::read(path).map_err(|source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let header = check(&bytes).map_err(|source| NpyError::Format {
        path: path.to_path_buf(),
        source,
    })?;
    // Reuse the file's buffer for the payload rather than copying it.
    bytes.drain(..header.data_offset);
    Ok(NpyArray {
        dtype: header.dtype,
        shape: header.shape,
        data: bytes,
    })
}

/// The longest header [`read_npy_header`] reads (numpy writes a few hundred
/// bytes; 16 MiB is a broken length, not a header).
const MAX_HEADER: usize = 16 << 20;

/// The element type and shape of a `.npy` file, from its header alone
/// (the file's first bytes, not its payload).
pub(super) fn read_npy_header(path: &Path) -> Result<(DType, Vec<usize>), NpyError> {
    use std::io::Read;
    let io = |source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let format = |source| NpyError::Format {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::File::open(path).map_err(io)?;
    // Most headers fit in 4 KiB; a longer one says how long it is.
    let mut start = Vec::new();
    (&mut file).take(4096).read_to_end(&mut start).map_err(io)?;
    let header = match parse_header(&start) {
        Err(NpyFormatError::TruncatedHeader { needed, .. })
            if needed > start.len() && needed <= MAX_HEADER =>
        {
            let more = (needed - start.len()) as u64;
            file.take(more).read_to_end(&mut start).map_err(io)?;
            parse_header(&start).map_err(format)?
        }
        other => other.map_err(format)?,
    };
    Ok((header.dtype, header.shape))
}

/// Parses the bytes of a `.npy` file.
pub fn parse_npy(bytes: &[u8]) -> Result<NpyArray, NpyFormatError> {
    let header = check(bytes)?;
    Ok(NpyArray {
        dtype: header.dtype,
        shape: header.shape,
        data: bytes[header.data_offset..].to_vec(),
    })
}

/// Writes a version 1.0 `.npy` file, its payload aligned to 64 bytes as
/// numpy does. `data` must hold exactly the bytes of `shape` of `dtype`.
pub fn write_npy(path: &Path, dtype: DType, shape: &[usize], data: &[u8]) -> io::Result<()> {
    let named = |kind: io::ErrorKind, what: String| {
        io::Error::new(kind, format!("cannot write {}: {what}", path.display()))
    };
    match super::tensor_bytes(shape, dtype) {
        Some(n) if n == data.len() => {}
        expected => {
            let expected = expected.map_or("more than fit in memory".into(), |n| n.to_string());
            return Err(named(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} bytes of data for shape {shape:?} of {}, which needs {expected}",
                    data.len(),
                    dtype.name()
                ),
            ));
        }
    }
    let header = header_v1(dtype, shape).map_err(|e| named(io::ErrorKind::InvalidInput, e))?;
    let write = || -> io::Result<()> {
        let mut file = fs::File::create(path)?;
        file.write_all(&header)?;
        file.write_all(data)?;
        file.flush()
    };
    write().map_err(|e| named(e.kind(), e.to_string()))
}

/// Magic, version 1.0, length and the padded dict of a header.
fn header_v1(dtype: DType, shape: &[usize]) -> Result<Vec<u8>, String> {
    let shape_text = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        dtype.npy_descr()
    );
    // 10 bytes of magic, version and length precede the dict; spaces and a
    // final newline bring the payload to the next multiple of ALIGN.
    let unpadded = MAGIC.len() + 2 + 2 + dict.len() + 1;
    let padding = (ALIGN - unpadded % ALIGN) % ALIGN;
    dict.push_str(&" ".repeat(padding));
    dict.push('\n');
    let len = u16::try_from(dict.len()).map_err(|_| {
        format!(
            "a header of {} bytes is too long for format 1.0",
            dict.len()
        )
    })?;
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    Ok(out)
}

/// What a valid header says.
struct Header {
    dtype: DType,
    shape: Vec<usize>,
    data_offset: usize,
}

/// Validates the header and that the payload has the size it announces.
fn check(bytes: &[u8]) -> Result<Header, NpyFormatError> {
    let header = parse_header(bytes)?;
    let dtype_name = header.dtype.name();
    let expected = super::tensor_bytes(&header.shape, header.dtype).ok_or_else(|| {
        NpyFormatError::ShapeTooLarge {
            shape: header.shape.clone(),
            dtype: dtype_name,
        }
    })?;
    let actual = bytes.len() - header.data_offset;
    if actual != expected {
        return Err(NpyFormatError::PayloadLength {
            shape: header.shape,
            dtype: dtype_name,
            expected,
            actual,
        });
    }
    Ok(header)
}

/// The header at the start of `bytes`, the payload not checked.
fn parse_header(bytes: &[u8]) -> Result<Header, NpyFormatError> {
    let truncated = |needed: usize| NpyFormatError::TruncatedHeader {
        needed,
        actual: bytes.len(),
    };
    if !bytes.starts_with(MAGIC) {
        // A prefix of the magic is a file cut short, anything else is not npy.
        return Err(if MAGIC.starts_with(bytes) {
            truncated(MAGIC.len() + 2)
        } else {
            NpyFormatError::BadMagic
        });
    }
    let Some(&[major, minor]) = bytes.get(6..8) else {
        return Err(truncated(8));
    };
    // 1.0 has a 2-byte header length, 2.0 and 3.0 a 4-byte one; 3.0 allows
    // UTF-8 in the header where the older ones are Latin-1.
    let len_size = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => return Err(NpyFormatError::UnsupportedVersion { major, minor }),
    };
    let start = 8 + len_size;
    let len_bytes = bytes.get(8..start).ok_or_else(|| truncated(start))?;
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | b as usize);
    let end = start
        .checked_add(header_len)
        .ok_or_else(|| truncated(usize::MAX))?;
    let raw = bytes.get(start..end).ok_or_else(|| truncated(end))?;
    let text: String = if major == 3 {
        std::str::from_utf8(raw)
            .map_err(|e| NpyFormatError::HeaderSyntax(format!("not UTF-8: {e}")))?
            .to_string()
    } else {
        raw.iter().map(|&b| b as char).collect()
    };
    let (dtype, shape) = interpret(&parse_dict(&text)?)?;
    Ok(Header {
        dtype,
        shape,
        data_offset: end,
    })
}

/// Reads the three keys numpy writes; other keys are ignored.
fn interpret(entries: &[(String, Value, String)]) -> Result<(DType, Vec<usize>), NpyFormatError> {
    let find = |key: &'static str| {
        entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, value, raw)| (value, raw))
            .ok_or(NpyFormatError::MissingKey(key))
    };
    let dtype = match find("descr")? {
        (Value::Str(s), raw) => {
            DType::from_npy_descr(s).ok_or_else(|| NpyFormatError::UnsupportedDescr(raw.clone()))?
        }
        // Structured dtypes are lists of fields.
        (_, raw) => return Err(NpyFormatError::UnsupportedDescr(raw.clone())),
    };
    match find("fortran_order")? {
        (Value::Bool(false), _) => {}
        (Value::Bool(true), _) => return Err(NpyFormatError::FortranOrder),
        (_, raw) => {
            return Err(NpyFormatError::BadValue {
                key: "fortran_order",
                value: raw.clone(),
                expected: "True or False",
            })
        }
    }
    let (shape_value, shape_raw) = find("shape")?;
    let bad_shape = || NpyFormatError::BadValue {
        key: "shape",
        value: shape_raw.clone(),
        expected: "a tuple of non-negative integers",
    };
    let shape = match shape_value {
        Value::Seq(items) => items
            .iter()
            .map(|item| match item {
                Value::Int(n) => usize::try_from(*n).map_err(|_| bad_shape()),
                _ => Err(bad_shape()),
            })
            .collect::<Result<Vec<usize>, _>>()?,
        _ => return Err(bad_shape()),
    };
    Ok((dtype, shape))
}

/// A Python literal as far as npy headers use them.
#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    PyNone,
    Int(i128),
    /// A tuple or a list.
    Seq(Vec<Value>),
}

/// Parses `{key: value, ...}`; returns each entry with its value's source
/// text, for error messages.
fn parse_dict(text: &str) -> Result<Vec<(String, Value, String)>, NpyFormatError> {
    let mut p = Parser { text, pos: 0 };
    p.skip_ws();
    p.expect('{')?;
    let mut entries: Vec<(String, Value, String)> = Vec::new();
    loop {
        p.skip_ws();
        if p.eat('}') {
            break;
        }
        let key = match p.value()? {
            Value::Str(s) => s,
            _ => return Err(p.error("dict keys must be strings")),
        };
        if entries.iter().any(|(k, _, _)| *k == key) {
            return Err(p.error(&format!("duplicate key {key:?}")));
        }
        p.skip_ws();
        p.expect(':')?;
        p.skip_ws();
        let from = p.pos;
        let value = p.value()?;
        entries.push((key, value, text[from..p.pos].to_string()));
        p.skip_ws();
        if p.eat('}') {
            break;
        }
        p.expect(',')?;
    }
    // numpy pads with spaces and ends with a newline.
    p.skip_ws();
    if p.pos != text.len() {
        return Err(p.error("text after the closing '}'"));
    }
    Ok(entries)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn error(&self, what: &str) -> NpyFormatError {
        let found: String = self.rest().chars().take(20).collect();
        if found.is_empty() {
            NpyFormatError::HeaderSyntax(format!("{what} at the end of the header"))
        } else {
            NpyFormatError::HeaderSyntax(format!("{what} at offset {} (found {found:?})", self.pos))
        }
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), NpyFormatError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected {c:?}")))
        }
    }

    fn value(&mut self) -> Result<Value, NpyFormatError> {
        match self.peek() {
            Some(q @ ('\'' | '"')) => self.string(q),
            Some('(') => self.seq(')'),
            Some('[') => self.seq(']'),
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => self.int(),
            Some(c) if c.is_ascii_alphabetic() => {
                let word: String = self
                    .rest()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let value = match word.as_str() {
                    "True" => Value::Bool(true),
                    "False" => Value::Bool(false),
                    "None" => Value::PyNone,
                    _ => return Err(self.error("expected a literal")),
                };
                self.pos += word.len();
                Ok(value)
            }
            _ => Err(self.error("expected a literal")),
        }
    }

    fn string(&mut self, quote: char) -> Result<Value, NpyFormatError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.pos += i + 1;
                    return Ok(Value::Str(out));
                }
                // Only the escapes a descr or key could need.
                '\\' => match chars.next() {
                    Some((_, e @ ('\\' | '\'' | '"'))) => out.push(e),
                    _ => {
                        self.pos = start;
                        return Err(self.error("unsupported escape in string"));
                    }
                },
                c => out.push(c),
            }
        }
        self.pos = start;
        Err(self.error("unterminated string"))
    }

    fn int(&mut self) -> Result<Value, NpyFormatError> {
        let start = self.pos;
        let digits_from = if matches!(self.peek(), Some('-' | '+')) {
            start + 1
        } else {
            start
        };
        let digits = self.text[digits_from..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        if digits == 0 {
            return Err(self.error("expected an integer"));
        }
        let end = digits_from + digits;
        let n: i128 = self.text[start..end]
            .parse()
            .map_err(|_| self.error("integer out of range"))?;
        self.pos = end;
        // Python 2 numpy wrote long integers as 3L.
        if !self.eat('L') {
            self.eat('l');
        }
        Ok(Value::Int(n))
    }

    fn seq(&mut self, close: char) -> Result<Value, NpyFormatError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.eat(close) {
                return Ok(Value::Seq(items));
            }
            items.push(self.value()?);
            self.skip_ws();
            if self.eat(close) {
                return Ok(Value::Seq(items));
            }
            self.expect(',')?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qsl::tests::scratch_dir;

    /// A file's bytes with a hand-written header of any version.
    fn npy_bytes(version: (u8, u8), dict: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[version.0, version.1]);
        if version.0 == 1 {
            out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn v1(dict: &str, payload: &[u8]) -> Vec<u8> {
        npy_bytes((1, 0), dict, payload)
    }

    fn err(bytes: &[u8]) -> String {
        parse_npy(bytes).unwrap_err().to_string()
    }

    #[test]
    fn round_trip_with_aligned_v1_header() {
        let dir = scratch_dir();
        let u8_path = dir.path().join("u8.npy");
        let u8_data: Vec<u8> = (0..3 * 5 * 7).map(|i| i as u8).collect();
        write_npy(&u8_path, DType::U8, &[3, 5, 7], &u8_data).unwrap();
        let raw = fs::read(&u8_path).unwrap();
        assert_eq!(&raw[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([raw[8], raw[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        assert_eq!(raw[10 + header_len - 1], b'\n');
        let text = std::str::from_utf8(&raw[10..10 + header_len]).unwrap();
        assert!(text.starts_with("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 5, 7), }"));
        let array = read_npy(&u8_path).unwrap();
        assert_eq!(array.dtype, DType::U8);
        assert_eq!(array.shape, vec![3, 5, 7]);
        assert_eq!(array.data, u8_data);

        let f32_path = dir.path().join("f32.npy");
        let f32_data: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        write_npy(&f32_path, DType::F32, &[5], &f32_data).unwrap();
        let raw = fs::read(&f32_path).unwrap();
        assert!(std::str::from_utf8(&raw[10..64])
            .unwrap()
            .contains("'shape': (5,)"));
        let array = read_npy(&f32_path).unwrap();
        assert_eq!((array.dtype, array.shape), (DType::F32, vec![5]));
        assert_eq!(array.data, f32_data);

        let scalar_path = dir.path().join("scalar.npy");
        write_npy(&scalar_path, DType::I64, &[], &7i64.to_le_bytes()).unwrap();
        let array = read_npy(&scalar_path).unwrap();
        assert_eq!((array.dtype, array.shape.len()), (DType::I64, 0));
        assert_eq!(array.data, 7i64.to_le_bytes());
    }

    #[test]
    fn write_refuses_data_of_the_wrong_size() {
        let dir = scratch_dir();
        let path = dir.path().join("bad.npy");
        let e = write_npy(&path, DType::I32, &[2, 2], &[0; 15]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let message = e.to_string();
        assert!(message.contains("bad.npy"), "{message}");
        assert!(
            message.contains("15 bytes") && message.contains("16"),
            "{message}"
        );
        assert!(!path.exists());
    }

    #[test]
    fn parses_version_2_and_3_headers_in_any_key_order() {
        let dict = "{'shape': (2, 2), 'fortran_order': False, 'descr': '<i4'}      \n";
        let payload: Vec<u8> = [1i32, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        for version in [(2, 0), (3, 0)] {
            let array = parse_npy(&npy_bytes(version, dict, &payload)).unwrap();
            assert_eq!(array.dtype, DType::I32);
            assert_eq!(array.shape, vec![2, 2]);
            assert_eq!(array.data, payload);
        }
    }

    #[test]
    fn accepts_python_2_longs_double_quotes_and_other_keys() {
        let dict = "{\"descr\": \"<f2\", \"fortran_order\": False, \"shape\": (2L,), 'extra': [1, None]}\n";
        let array = parse_npy(&v1(dict, &[0; 4])).unwrap();
        assert_eq!((array.dtype, array.shape), (DType::F16, vec![2]));
    }

    #[test]
    fn bad_magic() {
        assert_eq!(
            parse_npy(b"PK\x03\x04 a zip file"),
            Err(NpyFormatError::BadMagic)
        );
        assert!(err(b"hello world").contains("does not start with the magic string"));
    }

    #[test]
    fn unsupported_version() {
        let bytes = npy_bytes((4, 0), "{}", &[]);
        assert_eq!(
            err(&bytes),
            "unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)"
        );
    }

    #[test]
    fn truncated_header() {
        let full = v1(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }\n",
            &[0],
        );
        assert_eq!(
            err(&full[..20]),
            format!(
                "truncated header: it needs {} bytes but the file holds only 20",
                full.len() - 1
            )
        );
        assert!(err(&full[..9]).contains("needs 10 bytes but the file holds only 9"));
        assert!(err(&full[..3]).starts_with("truncated header"));
        assert!(err(&[]).starts_with("truncated header"));
    }

    #[test]
    fn header_not_a_dict() {
        let e = err(&v1("['descr', '|u1']\n", &[]));
        assert!(
            e.starts_with("header is not a Python dict literal: expected '{'"),
            "{e}"
        );
        let e = err(&v1("{'descr': '|u1' 'shape': ()}\n", &[]));
        assert!(e.contains("expected ','"), "{e}");
        let e = err(&v1("{'descr': '|u1', 'shape': (1,)} trailing\n", &[]));
        assert!(e.contains("text after the closing '}'"), "{e}");
        let e = err(&v1("{'descr': '|u1\n", &[]));
        assert!(e.contains("unterminated string"), "{e}");
        let e = err(&v1("{'a': 1, 'a': 2}", &[]));
        assert!(e.contains("duplicate key \"a\""), "{e}");
        let mut not_utf8 = npy_bytes((3, 0), "{'descr': 'x'}", &[]);
        let last = not_utf8.len() - 3;
        not_utf8[last] = 0xff;
        let e = err(&not_utf8);
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn missing_keys() {
        for (dict, key) in [
            ("{'fortran_order': False, 'shape': ()}", "descr"),
            ("{'descr': '|u1', 'shape': ()}", "fortran_order"),
            ("{'descr': '|u1', 'fortran_order': False}", "shape"),
        ] {
            assert_eq!(
                err(&v1(dict, &[0])),
                format!("header dict has no {key:?} key")
            );
        }
    }

    #[test]
    fn unsupported_descr_is_named_with_the_supported_list() {
        let e = err(&v1(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1,)}",
            &[0; 8],
        ));
        assert_eq!(
            e,
            "unsupported dtype descr '<f8' (supported: '|u1', '|i1', '<i4', '<i8', '<f2', '<f4')"
        );
        let e = err(&v1(
            "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}",
            &[0; 4],
        ));
        assert!(
            e.starts_with("unsupported dtype descr [('a', '<i4')] (supported"),
            "{e}"
        );
        let e = err(&v1(
            "{'descr': '>i4', 'fortran_order': False, 'shape': (1,)}",
            &[0; 4],
        ));
        assert!(e.starts_with("unsupported dtype descr '>i4'"), "{e}");
    }

    #[test]
    fn fortran_order_is_refused() {
        let e = err(&v1(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}",
            &[0; 16],
        ));
        assert!(e.starts_with("fortran_order is True: only C-order"), "{e}");
        let e = err(&v1(
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 2)}",
            &[0; 16],
        ));
        assert_eq!(
            e,
            "header key \"fortran_order\" holds 0, expected True or False"
        );
    }

    #[test]
    fn bad_shapes() {
        let e = err(&v1(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (2, -1)}",
            &[0; 2],
        ));
        assert_eq!(
            e,
            "header key \"shape\" holds (2, -1), expected a tuple of non-negative integers"
        );
        let e = err(&v1(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}",
            &[],
        ));
        assert!(e.contains("more bytes than fit in memory"), "{e}");
    }

    #[test]
    fn payload_length_must_match_the_shape() {
        let dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }\n";
        assert_eq!(
            err(&v1(dict, &[0; 23])),
            "payload holds 23 bytes but shape [3, 2] of int32 needs 24"
        );
        assert!(err(&v1(dict, &[0; 25])).contains("holds 25 bytes"));
    }

    #[test]
    fn read_errors_name_the_file() {
        let dir = scratch_dir();
        let missing = dir.path().join("missing.npy");
        let e = read_npy(&missing).unwrap_err();
        assert!(matches!(e, NpyError::Io { .. }));
        assert!(e.to_string().starts_with("cannot read "), "{e}");
        assert!(e.to_string().contains("missing.npy"), "{e}");

        let junk = dir.path().join("junk.npy");
        fs::write(&junk, b"junk").unwrap();
        let e = read_npy(&junk).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: {}", junk.display(), NpyFormatError::BadMagic)
        );
    }
}
