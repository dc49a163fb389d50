//! Commands and their replies: arguments (`args!`), running a command that
//! must succeed (`ok`) or fail (`fails`, `assert_err`), and typed views of
//! replies (`as_int`, `as_string`, `Fields` for job replies and other
//! field/value replies, RESP2 arrays and RESP3 maps alike).

use std::collections::HashMap;

use redis::{ConnectionLike, Value};

/// A client connection (RESP2 unless made with `conn_resp3`).
pub type Con = redis::Connection;

/// Anything usable as a command argument.
pub trait Arg {
    fn bytes(&self) -> Vec<u8>;
}
impl Arg for &str {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for String {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for &String {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for &[u8] {
    fn bytes(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl Arg for Vec<u8> {
    fn bytes(&self) -> Vec<u8> {
        self.clone()
    }
}
macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn bytes(&self) -> Vec<u8> {
                self.to_string().into_bytes()
            }
        }
    )*};
}
int_arg!(i32, i64, u64, usize);

#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        Vec::<Vec<u8>>::from([$($crate::common::Arg::bytes(&$a)),*])
    };
}

/// Text arguments as a command's argument list (`args!` for a runtime slice).
pub fn str_args(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Run a command and return the raw reply; an error reply comes back as
/// `Value::ServerError`, not as `Err`. I/O failures panic.
pub fn raw(con: &mut redis::Connection, args: &[Vec<u8>]) -> Value {
    let mut c = redis::Cmd::new();
    for a in args {
        c.arg(a.as_slice());
    }
    con.req_command(&c).unwrap_or_else(|e| {
        panic!("I/O error running {}: {e}", show_args(args));
    })
}

pub fn show_args(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 80 {
                format!(
                    "{:?}...",
                    &s[..s.char_indices().nth(80).map(|x| x.0).unwrap_or(s.len())]
                )
            } else {
                format!("{s:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The full text of an error reply ("ERR ...", "WRONGTYPE ..."), if it is one.
pub fn error_text(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(match e.details() {
            Some(d) => format!("{} {}", e.code(), d),
            None => e.code().to_string(),
        }),
        _ => None,
    }
}

/// The code of an error reply, its first word ("ERR", "NOJOB", ...), if
/// it is one (docs/commands.md, "Error codes").
pub fn error_code(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(e.code().to_string()),
        _ => None,
    }
}

/// Run a command that must succeed.
pub fn ok(con: &mut redis::Connection, args: &[Vec<u8>]) -> Value {
    let v = raw(con, args);
    if let Some(e) = error_text(&v) {
        panic!("{} failed: {e}", show_args(args));
    }
    v
}

/// Run a command that must fail; returns the error text.
pub fn fails(con: &mut redis::Connection, args: &[Vec<u8>]) -> String {
    let v = raw(con, args);
    error_text(&v).unwrap_or_else(|| panic!("{} should fail, got {v:?}", show_args(args)))
}

/// The command must fail with an error starting with `prefix`; the error.
pub fn assert_err(c: &mut redis::Connection, a: &[Vec<u8>], prefix: &str) -> String {
    let e = fails(c, a);
    assert!(
        e.starts_with(prefix),
        "{}: expected an error starting with {prefix:?}, got {e:?}",
        show_args(a)
    );
    e
}

pub fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

pub fn as_string(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

pub fn as_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.as_bytes().to_vec(),
        other => panic!("expected bytes, got {other:?}"),
    }
}

/// A job reply or any other flat field/value reply (RESP2) or map (RESP3).
pub type Fields = HashMap<String, Value>;

pub fn fields(v: Value) -> Fields {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Array(items) => {
            assert!(items.len() % 2 == 0, "odd field/value array: {items:?}");
            let mut it = items.into_iter();
            let mut out = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            out
        }
        Value::Map(m) => m,
        other => panic!("expected a field/value reply, got {other:?}"),
    };
    let mut map = HashMap::new();
    for (k, v) in pairs {
        let k = as_string(&k);
        assert!(map.insert(k.clone(), v).is_none(), "field {k} twice");
    }
    map
}

pub fn get<'a>(f: &'a Fields, name: &str) -> &'a Value {
    f.get(name)
        .unwrap_or_else(|| panic!("reply has no field {name:?}: {f:?}"))
}

pub fn int(f: &Fields, name: &str) -> i64 {
    as_int(get(f, name))
}

pub fn text(f: &Fields, name: &str) -> String {
    as_string(get(f, name))
}

/// A field that is a string or nil.
pub fn opt_text(f: &Fields, name: &str) -> Option<String> {
    match get(f, name) {
        Value::Nil => None,
        v => Some(as_string(v)),
    }
}
