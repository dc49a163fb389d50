//! Replies of the module as plain data: the connection speaks RESP3, so every
//! job reply, stats and settings reply arrives as a map and nesting is
//! explicit (no guessing whether a RESP2 array is a map).

use redis::Value;

/// One reply value, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Nil,
    Int(i64),
    Double(f64),
    Bool(bool),
    /// A string reply (bulk, simple or verbatim), lossily decoded as UTF-8.
    Str(String),
    Array(Vec<Val>),
    Map(Fields),
}

/// A map reply, in the order the server sent it (the module sorts fields).
/// Keys that are not UTF-8 are decoded lossily; their indices are kept (a
/// valid key may hold U+FFFD itself, so the text cannot tell).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields(pub Vec<(String, Val)>, pub Vec<usize>);

impl Val {
    pub fn from_redis(v: Value) -> Val {
        match v {
            Value::Nil => Val::Nil,
            Value::Int(i) => Val::Int(i),
            Value::Double(d) => Val::Double(d),
            Value::Boolean(b) => Val::Bool(b),
            Value::BulkString(b) => Val::Str(String::from_utf8_lossy(&b).into_owned()),
            Value::SimpleString(s) => Val::Str(s),
            Value::Okay => Val::Str("OK".into()),
            Value::VerbatimString { text, .. } => Val::Str(text),
            Value::BigNumber(n) => Val::Str(n.to_string()),
            Value::Array(a) | Value::Set(a) => {
                Val::Array(a.into_iter().map(Val::from_redis).collect())
            }
            Value::Map(m) => {
                let mut f = Fields::default();
                for (i, (k, v)) in m.into_iter().enumerate() {
                    if matches!(&k, Value::BulkString(b) if std::str::from_utf8(b).is_err()) {
                        f.1.push(i);
                    }
                    f.0.push((Val::from_redis(k).to_text(), Val::from_redis(v)));
                }
                Val::Map(f)
            }
            Value::Attribute { data, .. } => Val::from_redis(*data),
            Value::Push { data, .. } => Val::Array(data.into_iter().map(Val::from_redis).collect()),
            Value::ServerError(e) => Val::Str(format!("error: {e:?}")),
        }
    }

    /// The value as text for display (integers as digits, nil as empty).
    pub fn to_text(&self) -> String {
        match self {
            Val::Nil => String::new(),
            Val::Int(i) => i.to_string(),
            Val::Double(d) => d.to_string(),
            Val::Bool(b) => b.to_string(),
            Val::Str(s) => s.clone(),
            Val::Array(a) => a.iter().map(Val::to_text).collect::<Vec<_>>().join(", "),
            Val::Map(f) => {
                f.0.iter()
                    .map(|(k, v)| format!("{k}: {}", v.to_text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            Val::Str(s) => s.parse().ok(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn into_fields(self) -> Option<Fields> {
        match self {
            Val::Map(f) => Some(f),
            _ => None,
        }
    }

    pub fn into_array(self) -> Option<Vec<Val>> {
        match self {
            Val::Array(a) => Some(a),
            Val::Nil => Some(Vec::new()),
            _ => None,
        }
    }
}

impl Fields {
    pub fn new(entries: Vec<(String, Val)>) -> Fields {
        Fields(entries, Vec::new())
    }

    /// Was the `i`th key UTF-8 as sent (not decoded lossily)?
    pub fn key_is_utf8(&self, i: usize) -> bool {
        !self.1.contains(&i)
    }

    /// Remove a field and return its value (the first of that name).
    pub fn take(&mut self, name: &str) -> Option<Val> {
        let i = self.0.iter().position(|(k, _)| k == name)?;
        // Later keys move down one place: so do their recorded indices.
        self.1.retain(|&j| j != i);
        for j in self.1.iter_mut().filter(|j| **j > i) {
            *j -= 1;
        }
        Some(self.0.remove(i).1)
    }

    pub fn get(&self, name: &str) -> Option<&Val> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(Val::as_int)
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Val::as_str)
    }

    pub fn map(&self, name: &str) -> Option<&Fields> {
        match self.get(name) {
            Some(Val::Map(f)) => Some(f),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_maps_and_arrays_decode() {
        let v = Value::Map(vec![
            (
                Value::BulkString(b"wait_all".to_vec()),
                Value::Map(vec![(Value::SimpleString("max".into()), Value::Nil)]),
            ),
            (
                Value::BulkString(b"leases".to_vec()),
                Value::Array(vec![Value::Int(3)]),
            ),
        ]);
        let f = Val::from_redis(v).into_fields().unwrap();
        assert_eq!(f.map("wait_all").unwrap().get("max"), Some(&Val::Nil));
        assert_eq!(f.get("leases"), Some(&Val::Array(vec![Val::Int(3)])));
        assert_eq!(f.int("missing"), None);
    }

    #[test]
    fn keys_remember_whether_they_were_utf8() {
        let v = Value::Map(vec![
            (
                Value::BulkString(b"rep\xef\xbf\xbd".to_vec()),
                Value::Int(1),
            ),
            (Value::BulkString(b"rep\xff".to_vec()), Value::Int(2)),
        ]);
        let f = Val::from_redis(v).into_fields().unwrap();
        assert_eq!(f.0[0].0, f.0[1].0); // the same text...
        assert!(f.key_is_utf8(0) && !f.key_is_utf8(1)); // ...but not the same key
    }

    #[test]
    fn invalid_utf8_is_shown_lossily() {
        let v = Val::from_redis(Value::BulkString(vec![b'a', 0xff]));
        assert_eq!(v.to_text(), "a\u{fffd}");
    }
}
