//! Unit tests of the config scanner (the differential tests against
//! serde_json are `tests/props/config_diff/`).

use super::bytes::{find_special, Special};
use super::*;

fn ok(json: &str) -> Fields<'_> {
    scan(json.as_bytes()).unwrap_or_else(|e| panic!("refused {json:?}: {e}"))
}

fn bad(json: &[u8]) {
    assert!(
        scan(json).is_err(),
        "accepted {:?}",
        String::from_utf8_lossy(json)
    );
}

#[test]
fn find_special_matches_a_plain_loop() {
    let mut bytes: Vec<u8> = (0u8..=255).collect();
    bytes.extend_from_slice(b"abcdefghijklmnopqrstuvwxyz\xff\x80 ~");
    for start in 0..bytes.len() {
        for end in start..=bytes.len().min(start + 40) {
            let mut s = bytes[start..end].to_vec();
            // Only bytes that are not special, then one special.
            s.retain(|&c| !(c == b'"' || c == b'\\' || c < 0x20));
            let plain = s.len();
            let high = |from: usize| s[from.min(plain)..].iter().any(|&c| c >= 0x80);
            let f = find_special(&s, 0);
            assert_eq!((f.at, f.byte, f.high != 0), (plain, 0, high(0)));
            for sp in [b'"', b'\\', 0x00, 0x1f] {
                let mut t = s.clone();
                t.push(sp);
                t.extend_from_slice(b"\"\\\x01\xfftail");
                let f = find_special(&t, 0);
                assert_eq!((f.at, f.byte, f.high != 0), (plain, sp, high(0)));
                if plain > 3 {
                    let f = find_special(&t, 3);
                    assert_eq!((f.at, f.byte, f.high != 0), (plain, sp, high(3)));
                }
            }
        }
    }
    let end = Special {
        at: 3,
        byte: 0,
        high: 0,
    };
    assert_eq!(find_special(b"abc", 3), end);
    assert_eq!(find_special(b"abc", 9).at, 9);
}

#[test]
fn extracts_fields() {
    let f = ok(
        r#" {"x":[1,{"y":null}],"key":"k\"\u00e9\ud83d\ude00","response_url":null,
           "collation":{"type":"user","id":-5,"z":{}},"priority":12} "#,
    );
    assert_eq!(f.key.as_deref(), Some("k\"\u{e9}\u{1f600}".as_bytes()));
    assert_eq!(f.response_url, None);
    let c = f.collation.unwrap();
    assert_eq!(c.kind.as_deref(), Some(&b"user"[..]));
    assert_eq!(c.id, Some(Id::Int(-5)));
    assert_eq!(f.priority, Some(Num::U64(12)));
    assert!(matches!(
        ok(r#"{"key":"plain"}"#).key,
        Some(Cow::Borrowed(b"plain"))
    ));
    assert!(matches!(ok(r#"{"key":"a\nb"}"#).key, Some(Cow::Owned(v)) if v == b"a\nb"));
    assert_eq!(ok("{}"), Fields::default());
}

#[test]
fn numbers_keep_serde_json_kinds() {
    for (text, want) in [
        ("0", Num::U64(0)),
        ("-0", Num::F64),
        ("-1", Num::I64(-1)),
        ("18446744073709551615", Num::U64(u64::MAX)),
        ("18446744073709551616", Num::F64),
        ("-9223372036854775808", Num::I64(i64::MIN)),
        ("-9223372036854775809", Num::F64),
        ("-18446744073709551615", Num::F64),
        ("1.0", Num::F64),
        ("1e2", Num::F64),
        ("1E+2", Num::F64),
        ("0e-0", Num::F64),
        ("1e99999", Num::F64),
    ] {
        let json = format!(r#"{{"priority":{text}}}"#);
        assert_eq!(ok(&json).priority, Some(want), "{text}");
    }
    for text in [
        "01", "-", "-a", "1.", "1.e1", ".5", "+1", "1e", "1e+", "00", "-01", "0x1",
    ] {
        bad(format!(r#"{{"priority":{text}}}"#).as_bytes());
        bad(format!(r#"{{"other":{text}}}"#).as_bytes());
    }
}

#[test]
fn skipped_strings_are_not_utf8_checked_but_kept_ones_are() {
    assert!(scan(b"{\"x\":\"\xff\"}").is_ok());
    assert!(scan(b"{\"x\":{\"\xff\":1}}").is_ok());
    assert!(scan(br#"{"x":"\ud800","y":{"\udc00":"\ud800\u0041"}}"#).is_ok());
    bad(b"{\"key\":\"\xff\"}");
    bad(b"{\"\xff\":1}");
    bad(br#"{"\ud800":1}"#);
    bad(br#"{"key":"\ud800"}"#);
    bad(br#"{"key":"\udc00"}"#);
    bad(br#"{"key":"\ud800\u0041"}"#);
    bad(br#"{"key":"\ud800\n"}"#);
    bad(b"{\"collation\":{\"\xff\":1}}");
    bad(b"{\"x\":\"\x1f\"}");
    bad(br#"{"x":"\x"}"#);
    bad(br#"{"x":"\u12"}"#);
    bad(br#"{"x":"\u12g4"}"#);
}

#[test]
fn deep_skipped_values_have_no_limit() {
    let n = 100_000;
    let json = format!(r#"{{"key":"k","x":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
    assert!(scan(json.as_bytes()).is_ok());
    let json = format!(r#"{{"x":{}1{}}}"#, r#"{"a":["#.repeat(n), "]}".repeat(n));
    assert!(scan(json.as_bytes()).is_ok());
    let json = format!(r#"{{"x":{}1{}}}"#, "[".repeat(n), "]".repeat(n - 1));
    bad(json.as_bytes());
    let json = format!(r#"{{"x":{}1{}}}"#, "[".repeat(200), "}".repeat(200));
    bad(json.as_bytes());
}

/// Every read field is refused when repeated, `null` first or not;
/// other fields are not; docs/commands.md names exactly these fields.
#[test]
fn every_read_field_is_refused_when_repeated() {
    assert_eq!(
        READ_FIELDS,
        ["key", "response_url", "collation", "priority", "gate"]
    );
    for f in READ_FIELDS {
        // `null` is valid for each (so the repeat is what is refused).
        for (a, b) in [("null", "null"), (" null ", "null")] {
            let json = format!(r#"{{"{f}":{a},"x":0,"{f}":{b}}}"#);
            let e = scan(json.as_bytes()).expect_err(&json);
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid config JSON: duplicate field '{f}' at byte {}",
                    json.rfind(&format!("\"{f}\":")).unwrap() + f.len() + 3
                ),
                "{json}"
            );
        }
        // Escaped, it is the same name.
        let esc: String = f.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        assert!(scan(format!(r#"{{"{f}":null,"{esc}":null}}"#).as_bytes()).is_err());
        assert_eq!(
            Field::of(f.as_bytes()).duplicate(),
            format!("duplicate field '{f}'")
        );
    }
    for other in ["x", "metadata_table", "Key", "key ", "script"] {
        let json = format!(r#"{{"{other}":1,"{other}":[2]}}"#);
        assert!(scan(json.as_bytes()).is_ok(), "{json}");
    }
    let docs = include_str!("../../../docs/commands.md");
    let line = docs
        .lines()
        .find(|l| l.starts_with("Fields the queue reads:"))
        .expect("docs/commands.md: a line 'Fields the queue reads: ...'");
    let named: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
    assert_eq!(named, READ_FIELDS, "docs/commands.md: {line}");
}

#[test]
fn duplicates() {
    bad(br#"{"key":null,"key":"k"}"#);
    bad(br#"{"priority":1,"priority":1}"#);
    assert!(scan(br#"{"x":1,"x":2}"#).is_ok());
    let f = ok(r#"{"collation":{"type":null,"type":"team","id":null,"id":"1"}}"#);
    let c = f.collation.unwrap();
    assert_eq!(c.kind.as_deref(), Some(&b"team"[..]));
    assert_eq!(c.id, Some(Id::Str(Cow::Borrowed(b"1"))));
    bad(br#"{"collation":{"type":"team","type":null}}"#);
    bad(br#"{"collation":{"id":1,"id":1}}"#);
    // An escaped name is the same name.
    bad(br#"{"key":"a","k\u0065y":"b"}"#);
}

#[test]
fn grammar() {
    for b in [
        &b""[..],
        b" ",
        b"[]",
        b"\x0c{}",
        b"{",
        b"{,}",
        b"{\"a\":1,}",
        b"{\"a\":[1,]}",
        b"{\"a\":[,1]}",
        b"{\"a\" 1}",
        b"{\"a\":1 \"b\":2}",
        b"{\"a\":tru}",
        b"{\"a\":nul}",
        b"{\"a\":NaN}",
        b"{} x",
        b"{}{}",
        b"{\"a\":1}/**/",
        b"{'a':1}",
        b"{a:1}",
        b"\xef\xbb\xbf{}",
    ] {
        bad(b);
    }
    for b in [
        &b"{}"[..],
        b" \t\r\n{ \t\r\n} \t\r\n",
        b"{\"a\":[]}",
        b"{\"a\":{}}",
    ] {
        assert!(scan(b).is_ok(), "{:?}", String::from_utf8_lossy(b));
    }
    assert_eq!(scan(b"[]"), Err(ScanError::NotObject));
}

#[test]
fn never_panics_on_prefixes() {
    let full = br#"{"key":"a\u00e9\ud83d\ude00\n","response_url":"u","collation":{"type":"user","id":12},"priority":1.5e3,"x":[true,false,null,-0.1e-2,"\u0041",{"y":[]}]}"#;
    for end in 0..=full.len() {
        let _ = scan(&full[..end]);
    }
}
