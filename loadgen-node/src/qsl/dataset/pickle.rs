//! A reader of Python pickles (protocols 2 to 5), enough for the data sets
//! the MLPerf reference implementations write with `pickle.dump` and
//! pandas' `to_pickle`: it runs the pickle machine over the opcodes those
//! files use and builds a tree of [`Value`]s. It imports and calls
//! nothing: a global is a name ([`Value::Global`]), a call or a `__new__`
//! is an [`Value::Object`] holding its callable, arguments and `BUILD`
//! state, for [`super::numpy`] and [`super::pandas`] to read. Large byte
//! strings are slices of the input, not copies.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;

/// A pickled value.
#[derive(Clone, Debug)]
#[allow(
    dead_code,
    reason = "big ints and floats are kept as the pickle holds them, for the Debug output that names a value no reader takes"
)]
pub(super) enum Value {
    /// `None`.
    None,
    /// `True`, `False`.
    Bool(bool),
    /// An int that fits i64.
    Int(i64),
    /// An integer too large for i64, as its little-endian two's-complement
    /// bytes.
    BigInt(Bytes),
    /// A float.
    Float(f64),
    /// A str.
    Str(Rc<str>),
    /// `bytes` and `bytearray`.
    Bytes(Bytes),
    /// A list (shared: the pickle may refer to it again and extend it).
    List(Rc<RefCell<Vec<Value>>>),
    /// A tuple.
    Tuple(Rc<[Value]>),
    /// A dict, its items in order.
    Dict(Rc<RefCell<Vec<(Value, Value)>>>),
    /// A set or frozenset.
    Set(Rc<RefCell<Vec<Value>>>),
    /// `module.name`, not imported.
    Global(Rc<str>, Rc<str>),
    /// A callable applied to arguments (`REDUCE`, `NEWOBJ`), and the state
    /// `BUILD` gave it.
    Object(Rc<RefCell<Object>>),
}

/// A call the pickle asked for, not made.
#[derive(Clone, Debug)]
pub(super) struct Object {
    /// What was called (usually a [`Value::Global`]).
    pub callable: Value,
    /// Its positional arguments.
    pub args: Vec<Value>,
    /// What `BUILD` set, if anything.
    pub state: Option<Value>,
}

impl Value {
    /// The global's `module.name`, if this is one.
    pub(super) fn global_name(&self) -> Option<String> {
        match self {
            Value::Global(m, n) => Some(format!("{m}.{n}")),
            _ => None,
        }
    }

    /// The object's callable as `module.name`, if this is an object made by
    /// a global.
    pub(super) fn made_by(&self) -> Option<String> {
        match self {
            Value::Object(o) => o.borrow().callable.global_name(),
            _ => None,
        }
    }

    /// The items of a list, tuple or set.
    pub(super) fn items(&self) -> Option<Vec<Value>> {
        match self {
            Value::List(l) | Value::Set(l) => Some(l.borrow().clone()),
            Value::Tuple(t) => Some(t.to_vec()),
            _ => None,
        }
    }

    /// The value of `key` in a dict with string keys.
    pub(super) fn get(&self, key: &str) -> Option<Value> {
        match self {
            Value::Dict(d) => d
                .borrow()
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if &**s == key))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }

    /// A string's text.
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An integer (a bool counts as 0 or 1).
    pub(super) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// A short name of the value's kind, for errors.
    pub(super) fn kind(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) | Value::BigInt(_) => "int".into(),
            Value::Float(_) => "float".into(),
            Value::Str(_) => "str".into(),
            Value::Bytes(_) => "bytes".into(),
            Value::List(_) => "list".into(),
            Value::Tuple(_) => "tuple".into(),
            Value::Dict(_) => "dict".into(),
            Value::Set(_) => "set".into(),
            Value::Global(m, n) => format!("{m}.{n}"),
            Value::Object(o) => format!(
                "{} object",
                o.borrow()
                    .callable
                    .global_name()
                    .unwrap_or_else(|| "unnamed".into())
            ),
        }
    }
}

/// Why a pickle cannot be read, with the byte offset where it went wrong.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PickleError {
    /// The data ends inside an opcode or before `STOP`.
    #[error("truncated at byte {0}")]
    Truncated(usize),
    /// An opcode this reader does not run (protocol 0/1 text opcodes,
    /// out-of-band buffers, extensions).
    #[error("opcode 0x{opcode:02x} at byte {at} is not supported (protocol 2 to 5 pickles of data only)")]
    Unsupported {
        /// The opcode.
        opcode: u8,
        /// Where.
        at: usize,
    },
    /// The stack or memo does not hold what an opcode needs.
    #[error("malformed pickle at byte {at}: {why}")]
    Malformed {
        /// Where.
        at: usize,
        /// What was wrong.
        why: &'static str,
    },
}

/// The most nested marks or stack entries a pickle may use: far above any
/// data set's, low enough that a hostile file cannot exhaust memory with
/// them alone.
const MAX_STACK: usize = 1 << 24;

/// Reads one pickle from `data` (the whole file).
pub(super) fn parse(data: Bytes) -> Result<Value, PickleError> {
    Machine {
        data,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Vec::new(),
    }
    .run()
}

struct Machine {
    data: Bytes,
    at: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: Vec<Option<Value>>,
}

impl Machine {
    fn malformed(&self, why: &'static str) -> PickleError {
        PickleError::Malformed { at: self.at, why }
    }

    fn take(&mut self, n: usize) -> Result<Bytes, PickleError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(PickleError::Truncated(self.at))?;
        let out = self.data.slice(self.at..end);
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn le(&mut self, n: usize) -> Result<u64, PickleError> {
        let b = self.take(n)?;
        Ok(b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }

    fn len(&mut self, n: usize) -> Result<usize, PickleError> {
        let v = self.le(n)?;
        usize::try_from(v).map_err(|_| self.malformed("a length larger than memory"))
    }

    fn text(&mut self, n: usize) -> Result<Rc<str>, PickleError> {
        let b = self.take(n)?;
        std::str::from_utf8(&b)
            .map(Rc::from)
            .map_err(|_| self.malformed("a string that is not UTF-8"))
    }

    fn line(&mut self) -> Result<Rc<str>, PickleError> {
        let rest = &self.data[self.at..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(PickleError::Truncated(self.data.len()))?;
        let text = self.text(end)?;
        self.at += 1;
        Ok(text)
    }

    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        if self.stack.len() >= MAX_STACK {
            return Err(self.malformed("a stack deeper than any data set needs"));
        }
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        self.stack
            .pop()
            .ok_or_else(|| self.malformed("an empty stack"))
    }

    fn top(&self) -> Result<&Value, PickleError> {
        self.stack
            .last()
            .ok_or_else(|| self.malformed("an empty stack"))
    }

    /// The items above the last mark, removed with it.
    fn pop_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let mark = self.marks.pop().ok_or_else(|| self.malformed("no mark"))?;
        if mark > self.stack.len() {
            return Err(self.malformed("a mark above the stack"));
        }
        Ok(self.stack.split_off(mark))
    }

    fn memo_put(&mut self, index: usize) -> Result<(), PickleError> {
        let v = self.top()?.clone();
        if index > MAX_STACK {
            return Err(self.malformed("a memo index beyond any data set's"));
        }
        if self.memo.len() <= index {
            self.memo.resize(index + 1, None);
        }
        self.memo[index] = Some(v);
        Ok(())
    }

    fn memo_get(&mut self, index: usize) -> Result<(), PickleError> {
        let v = self
            .memo
            .get(index)
            .cloned()
            .flatten()
            .ok_or_else(|| self.malformed("a memo entry that was never stored"))?;
        self.push(v)
    }

    fn object(&mut self, callable: Value, args: Value) -> Result<(), PickleError> {
        let args = args
            .items()
            .ok_or_else(|| self.malformed("call arguments that are not a tuple"))?;
        self.push(Value::Object(Rc::new(RefCell::new(Object {
            callable,
            args,
            state: None,
        }))))
    }

    fn extend_list(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        match self.top()? {
            Value::List(l) | Value::Set(l) => {
                l.borrow_mut().extend(items);
                Ok(())
            }
            _ => Err(self.malformed("APPEND to something not a list")),
        }
    }

    fn set_items(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.malformed("SETITEMS with an odd number of items"));
        }
        let Value::Dict(d) = self.top()? else {
            return Err(self.malformed("SETITEM on something not a dict"));
        };
        let mut d = d.borrow_mut();
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            d.push((k, v));
        }
        Ok(())
    }

    fn tuple(&mut self, n: usize) -> Result<(), PickleError> {
        if self.stack.len() < n {
            return Err(self.malformed("a tuple of more items than the stack holds"));
        }
        let items = self.stack.split_off(self.stack.len() - n);
        self.push(Value::Tuple(items.into()))
    }

    fn run(mut self) -> Result<Value, PickleError> {
        loop {
            let at = self.at;
            let op = self.u8()?;
            if op == b'.' {
                return self.pop();
            }
            let handled = self.control(op)?
                || self.scalar(op)?
                || self.container(op)?
                || self.memo_or_call(op)?;
            if !handled {
                return Err(PickleError::Unsupported { opcode: op, at });
            }
        }
    }

    /// Framing, marks and the stack's own opcodes.
    fn control(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            0x80 => {
                // PROTO
                let _ = self.u8()?;
            }
            0x95 => {
                // FRAME: a length hint only.
                let _ = self.le(8)?;
            }
            b'(' => {
                if self.marks.len() >= MAX_STACK {
                    return Err(self.malformed("too many marks"));
                }
                self.marks.push(self.stack.len());
            }
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let v = self.top()?.clone();
                self.push(v)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// None, booleans, numbers, strings and bytes.
    fn scalar(&mut self, op: u8) -> Result<bool, PickleError> {
        let v = match op {
            b'N' => Value::None,
            0x88 => Value::Bool(true),
            0x89 => Value::Bool(false),
            b'J' => Value::Int(i64::from(self.le(4)? as u32 as i32)),
            b'K' => Value::Int(self.le(1)? as i64),
            b'M' => Value::Int(self.le(2)? as i64),
            0x8a | 0x8b => {
                // LONG1, LONG4: little-endian two's complement.
                let n = if op == 0x8a {
                    self.len(1)?
                } else {
                    self.len(4)?
                };
                let b = self.take(n)?;
                if n == 0 {
                    Value::Int(0)
                } else if n <= 8 {
                    let mut raw = [if b[n - 1] & 0x80 != 0 { 0xff } else { 0 }; 8];
                    raw[..n].copy_from_slice(&b);
                    Value::Int(i64::from_le_bytes(raw))
                } else {
                    Value::BigInt(b)
                }
            }
            b'G' => {
                let b = self.take(8)?;
                Value::Float(f64::from_be_bytes(b[..].try_into().expect("8 bytes")))
            }
            0x8c | b'X' | 0x8d => {
                let n = match op {
                    0x8c => self.len(1)?,
                    b'X' => self.len(4)?,
                    _ => self.len(8)?,
                };
                Value::Str(self.text(n)?)
            }
            b'C' | b'B' | 0x8e | 0x96 => {
                // SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
                let n = match op {
                    b'C' => self.len(1)?,
                    b'B' => self.len(4)?,
                    _ => self.len(8)?,
                };
                Value::Bytes(self.take(n)?)
            }
            _ => return Ok(false),
        };
        self.push(v)?;
        Ok(true)
    }

    /// Lists, tuples, dicts and sets.
    fn container(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            b']' => self.push(Value::List(Rc::default()))?,
            b'a' => {
                let v = self.pop()?;
                self.extend_list(vec![v])?;
            }
            b'e' | 0x90 => {
                // APPENDS, ADDITEMS
                let items = self.pop_mark()?;
                self.extend_list(items)?;
            }
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Value::List(Rc::new(RefCell::new(items))))?;
            }
            b')' => self.push(Value::Tuple(Rc::from(Vec::new())))?,
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items.into()))?;
            }
            0x85 => self.tuple(1)?,
            0x86 => self.tuple(2)?,
            0x87 => self.tuple(3)?,
            b'}' => self.push(Value::Dict(Rc::default()))?,
            b'd' => {
                let items = self.pop_mark()?;
                self.push(Value::Dict(Rc::default()))?;
                self.set_items(items)?;
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.set_items(vec![k, v])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.set_items(items)?;
            }
            0x8f => self.push(Value::Set(Rc::default()))?,
            0x91 => {
                let items = self.pop_mark()?;
                self.push(Value::Set(Rc::new(RefCell::new(items))))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The memo, globals, and the calls the pickle asks for (kept, not
    /// made).
    fn memo_or_call(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            0x94 => {
                let index = self.memo.len();
                self.memo_put(index)?;
            }
            b'q' | b'r' => {
                let index = if op == b'q' {
                    self.len(1)?
                } else {
                    self.len(4)?
                };
                self.memo_put(index)?;
            }
            b'h' | b'j' => {
                let index = if op == b'h' {
                    self.len(1)?
                } else {
                    self.len(4)?
                };
                self.memo_get(index)?;
            }
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                self.push(Value::Global(module, name))?;
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                match (module, name) {
                    (Value::Str(m), Value::Str(n)) => self.push(Value::Global(m, n))?,
                    _ => return Err(self.malformed("STACK_GLOBAL of non-strings")),
                }
            }
            b'R' | 0x81 => {
                // REDUCE (callable, args), NEWOBJ (cls, args)
                let args = self.pop()?;
                let callable = self.pop()?;
                self.object(callable, args)?;
            }
            0x92 => {
                // NEWOBJ_EX (cls, args, kwargs): keyword arguments dropped.
                let _kwargs = self.pop()?;
                let args = self.pop()?;
                let callable = self.pop()?;
                self.object(callable, args)?;
            }
            b'b' => {
                let state = self.pop()?;
                match self.top()? {
                    Value::Object(o) => o.borrow_mut().state = Some(state),
                    _ => return Err(self.malformed("BUILD on something not an object")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<Value, PickleError> {
        parse(Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn python_values_read_back() {
        // pickle.dumps({"a": [1, 300, -2, 70000], "b": (True, None, 1.5), "c": b"xy"}, 5)
        let bytes: &[u8] = b"\x80\x05\x956\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01M,\x01J\xfe\xff\xff\xffJp\x11\x01\x00e\x8c\x01b\x94\x88NG?\xf8\x00\x00\x00\x00\x00\x00\x87\x94\x8c\x01c\x94C\x02xy\x94u.";
        let v = read(bytes).unwrap();
        let a: Vec<i64> = v
            .get("a")
            .unwrap()
            .items()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        assert_eq!(a, [1, 300, -2, 70000]);
        let b = v.get("b").unwrap().items().unwrap();
        assert!(matches!(b[0], Value::Bool(true)));
        assert!(matches!(b[1], Value::None));
        assert!(matches!(b[2], Value::Float(f) if f == 1.5));
        assert!(matches!(v.get("c").unwrap(), Value::Bytes(b) if &b[..] == b"xy"));
    }

    #[test]
    fn calls_are_kept_as_objects_not_made() {
        // pickle.dumps(slice(0, 3, 1), 5)
        let bytes: &[u8] =
            b"\x80\x05\x95 \x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x05slice\x94\x93\x94K\x00K\x03K\x01\x87\x94R\x94.";
        let v = read(bytes).unwrap();
        assert_eq!(v.made_by().as_deref(), Some("builtins.slice"));
        let Value::Object(o) = v else { panic!() };
        let args: Vec<i64> = o
            .borrow()
            .args
            .iter()
            .map(|a| a.as_i64().unwrap())
            .collect();
        assert_eq!(args, [0, 3, 1]);
    }

    #[test]
    fn bad_input_is_an_error_naming_where() {
        assert!(matches!(read(b"\x80\x05K"), Err(PickleError::Truncated(3))));
        assert!(matches!(read(b""), Err(PickleError::Truncated(0))));
        assert!(matches!(
            read(b"\x80\x05I42\n."),
            Err(PickleError::Unsupported {
                opcode: b'I',
                at: 2
            })
        ));
        assert!(matches!(
            read(b"\x80\x05h\x07."),
            Err(PickleError::Malformed { .. })
        ));
        assert!(matches!(read(b"a."), Err(PickleError::Malformed { .. })));
    }
}
