//! Differential tests of the config scanner (`src/core/scan.rs`, behind
//! `parse_config_limited`) against the serde_json parse it replaced, kept as
//! the reference oracle in `tests/fuzz/src/config_ref.rs`. Configs are
//! replayed from AOF files and replicas, so the two must accept exactly the
//! same inputs and read the same `JobConfig` from each.
//!
//! - `edge_cases`: a table of hand-picked inputs, each with the verdict
//!   serde_json 1.0.154 gives (so the table also documents its behaviour).
//! - `generated_documents`: random configs (nested values, every field in
//!   every type, escapes, surrogates, raw and invalid UTF-8, numbers of every
//!   shape, duplicates, deep nesting, whitespace variants).
//! - `mutated_documents`: byte-level mutations of valid configs, among them
//!   `benches/job.json`.
//!
//! `ORCA_PROP_STEPS` sets the documents per seed (default 100000 for each of
//! the two random tests), `ORCA_PROP_SEED` runs one seed.

#[path = "fuzz/src/config_ref.rs"]
mod config_ref;
mod props;

use config_ref::{compare, reference_parse};
use orca::core::config::{orca_key, parse_config_limited, ConfigLimits};
use orca::core::MAX_TIME;
use props::{seeds, steps, Rng};

const DEFAULT_SEEDS: [u64; 2] = [1, 0x5eed_c0f1];

const SMALL: ConfigLimits = ConfigLimits {
    max_key_len: 8,
    max_collation_id_len: 4,
    max_gate_len: 5,
};

fn check(data: &[u8], limits: &ConfigLimits) {
    if let Err(e) = compare(data, limits) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------
// edge cases
// ---------------------------------------------------------------------------

/// What serde_json made of a config.
enum Want {
    /// Accepted with this key, response_url, collation, priority.
    Ok(&'static str, &'static str, Option<&'static str>, i64),
    /// Refused.
    Err,
}

use Want::{Err as Bad, Ok as Good};

fn deep(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

#[test]
fn edge_cases() {
    let cases: Vec<(Vec<u8>, Want)> = vec![
        // --- the top level
        (b"{\"key\":\"k\"}".to_vec(), Good("k", "", None, 0)),
        (b" \t\r\n{\"key\":\"k\"} \t\r\n".to_vec(), Good("k", "", None, 0)),
        // Form feed and vertical tab pass the old `is_ascii_whitespace`
        // pre-check but are not JSON whitespace.
        (b"\x0c{\"key\":\"k\"}".to_vec(), Bad),
        (b"{\"key\":\"k\"}\x0c".to_vec(), Bad),
        (b"{\"key\":\"k\"\x0b}".to_vec(), Bad),
        (b"\xef\xbb\xbf{\"key\":\"k\"}".to_vec(), Bad),
        (b"{\"key\":\"k\"} x".to_vec(), Bad),
        (b"{\"key\":\"k\"}{}".to_vec(), Bad),
        (b"{\"key\":\"k\"}\x00".to_vec(), Bad),
        (b"[\"k\"]".to_vec(), Bad),
        (b"{\"key\":\"k\",}".to_vec(), Bad),
        (b"{,\"key\":\"k\"}".to_vec(), Bad),
        (b"{\"key\":\"k\" /* c */}".to_vec(), Bad),
        (b"{\"key\":\"k\"} // c".to_vec(), Bad),
        (b"{'key':'k'}".to_vec(), Bad),
        (b"{key:\"k\"}".to_vec(), Bad),
        (b"{\"key\"=\"k\"}".to_vec(), Bad),
        (b"{}".to_vec(), Bad),
        // --- key / response_url
        (b"{\"key\":null}".to_vec(), Bad),
        (b"{\"key\":null,\"key\":\"k\"}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"key\":null}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"response_url\":null}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"response_url\":\"u\",\"response_url\":\"u\"}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"response_url\":1}".to_vec(), Bad),
        (b"{\"key\":[\"k\"]}".to_vec(), Bad),
        (b"{\"key\":true}".to_vec(), Bad),
        (b"{\"key\":\"\"}".to_vec(), Good("", "", None, 0)),
        // Escaped field names are the same field.
        (b"{\"k\\u0065y\":\"k\"}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"a\",\"k\\u0065y\":\"b\"}".to_vec(), Bad),
        (b"{\"Key\":\"k\"}".to_vec(), Bad),
        // Unknown fields repeat freely.
        (b"{\"key\":\"k\",\"x\":1,\"x\":[]}".to_vec(), Good("k", "", None, 0)),
        // Escapes are decoded before hashing.
        (
            br#"{"key":"a\"b\\c\/d\b\f\n\r\t","response_url":"\u00e9\ud83d\ude00"}"#.to_vec(),
            Good("a\"b\\c/d\u{8}\u{c}\n\r\t", "\u{e9}\u{1f600}", None, 0),
        ),
        (br#"{"key":"\u00E9\u00e9"}"#.to_vec(), Good("\u{e9}\u{e9}", "", None, 0)),
        (br#"{"key":"\u0000"}"#.to_vec(), Good("\0", "", None, 0)),
        ("{\"key\":\"\u{e9}\u{4e2d}\u{1f600}\u{10ffff}\"}".as_bytes().to_vec(), Good("\u{e9}\u{4e2d}\u{1f600}\u{10ffff}", "", None, 0)),
        (b"{\"key\":\"\x7f\"}".to_vec(), Good("\x7f", "", None, 0)),
        // --- strings that are parsed: UTF-8 and surrogates checked
        (b"{\"key\":\"\xff\"}".to_vec(), Bad),
        (b"{\"key\":\"\xc0\x80\"}".to_vec(), Bad),
        (b"{\"key\":\"\xed\xa0\x80\"}".to_vec(), Bad),
        (b"{\"key\":\"\xe4\xb8\"}".to_vec(), Bad),
        (b"{\"key\":\"\xe4\xb8\\n\"}".to_vec(), Bad),
        (b"{\"key\":\"\\n\x80\"}".to_vec(), Bad),
        (br#"{"key":"\ud800"}"#.to_vec(), Bad),
        (br#"{"key":"\udc00"}"#.to_vec(), Bad),
        (br#"{"key":"\ud800\u0041"}"#.to_vec(), Bad),
        (br#"{"key":"\ud800\ud800"}"#.to_vec(), Bad),
        (br#"{"key":"\ud800\n"}"#.to_vec(), Bad),
        (br#"{"key":"\ud800x"}"#.to_vec(), Bad),
        (br#"{"key":"\udbff\udfff"}"#.to_vec(), Good("\u{10ffff}", "", None, 0)),
        (b"{\"key\":\"a\x01\"}".to_vec(), Bad),
        (b"{\"key\":\"a\x1f\"}".to_vec(), Bad),
        (b"{\"key\":\"a\x00\"}".to_vec(), Bad),
        (b"{\"key\":\"a\tb\"}".to_vec(), Bad),
        (br#"{"key":"\x41"}"#.to_vec(), Bad),
        (br#"{"key":"\U0041"}"#.to_vec(), Bad),
        (br#"{"key":"\u004"}"#.to_vec(), Bad),
        (br#"{"key":"\u004g"}"#.to_vec(), Bad),
        (br#"{"key":"\'"}"#.to_vec(), Bad),
        (b"{\"key\":\"k".to_vec(), Bad),
        (b"{\"key\":\"k\\".to_vec(), Bad),
        (b"{\"key\":\"k\\u12".to_vec(), Bad),
        // Keys of the top level and of `collation` are parsed too.
        (b"{\"key\":\"k\",\"\xff\":1}".to_vec(), Bad),
        (br#"{"key":"k","\ud800":1}"#.to_vec(), Bad),
        (b"{\"key\":\"k\",\"collation\":{\"type\":\"user\",\"id\":\"1\",\"\xff\":1}}".to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":"1","\udc00":1}}"#.to_vec(), Bad),
        // --- strings that are skipped: only control bytes and escape syntax
        (b"{\"key\":\"k\",\"x\":\"\xff\xfe\x80\"}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"x\":{\"\xff\":\"\xc0\x80\"}}".to_vec(), Good("k", "", None, 0)),
        (br#"{"key":"k","x":"\ud800","y":["\udc00\ud800\u0041"]}"#.to_vec(), Good("k", "", None, 0)),
        (br#"{"key":"k","x":{"\ud800":1}}"#.to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"collation\":{\"type\":\"user\",\"id\":\"1\",\"x\":\"\xff\"}}".to_vec(), Good("k", "", Some("user.1"), 0)),
        (b"{\"key\":\"k\",\"x\":\"\x1f\"}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":\"\x00\"}".to_vec(), Bad),
        (br#"{"key":"k","x":"\x"}"#.to_vec(), Bad),
        (br#"{"key":"k","x":"\u12g4"}"#.to_vec(), Bad),
        (br#"{"key":"k","x":"\u12"}"#.to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":{\"a\x01\":1}}".to_vec(), Bad),
        // --- priority
        (b"{\"key\":\"k\",\"priority\":0}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"priority\":null}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"priority\":60000}".to_vec(), Good("k", "", None, 60000)),
        (b"{\"key\":\"k\",\"priority\":9007199254740991}".to_vec(), Good("k", "", None, MAX_TIME)),
        (b"{\"key\":\"k\",\"priority\":9007199254740992}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":18446744073709551615}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":18446744073709551616}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":-0}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":-1}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":0.0}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":1.0}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":1e2}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":1E+2}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":1e400}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":01}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":\"5\"}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":true}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":[]}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":1,\"priority\":1}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":null,\"priority\":1}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":NaN}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":+1}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":1.}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"priority\":.5}".to_vec(), Bad),
        // --- numbers that are skipped: grammar only, never range
        (b"{\"key\":\"k\",\"x\":[1e400,-1e400,1e-400,123456789012345678901234567890,-0,0.0,1E+2]}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"x\":1e99999999999999999999}".to_vec(), Good("k", "", None, 0)),
        (b"{\"key\":\"k\",\"x\":01}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":1.}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":1.e5}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":1e}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":1e+}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":-}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":-a}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":+1}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":.5}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":0x10}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":Infinity}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":tru}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":nulll}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":[1,]}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":[,]}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":{\"a\":1,}}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":{\"a\"}}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":{1:1}}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":[}".to_vec(), Bad),
        (b"{\"key\":\"k\",\"x\":[1 2]}".to_vec(), Bad),
        // --- collation
        (br#"{"key":"k","collation":{"type":"user","id":"7"}}"#.to_vec(), Good("k", "", Some("user.7"), 0)),
        (br#"{"key":"k","collation":{"id":12,"type":"team"}}"#.to_vec(), Good("k", "", Some("team.12"), 0)),
        (br#"{"key":"k","collation":{"type":"user","id":-5}}"#.to_vec(), Good("k", "", Some("user.-5"), 0)),
        (br#"{"key":"k","collation":{"type":"user","id":0}}"#.to_vec(), Good("k", "", Some("user.0"), 0)),
        (br#"{"key":"k","collation":{"type":"user","id":9223372036854775807}}"#.to_vec(), Good("k", "", Some("user.9223372036854775807"), 0)),
        (br#"{"key":"k","collation":{"type":"user","id":-9223372036854775808}}"#.to_vec(), Good("k", "", Some("user.-9223372036854775808"), 0)),
        (br#"{"key":"k","collation":{"type":"user","id":9223372036854775808}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":18446744073709551615}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":-9223372036854775809}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":-0}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":1.0}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":1e2}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":true}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":null}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":{}}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":[1]}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":""}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":"\u00e9"}}"#.to_vec(), Good("k", "", Some("user.\u{e9}"), 0)),
        (br#"{"key":"k","collation":{"type":"us\u0065r","id":"1"}}"#.to_vec(), Good("k", "", Some("user.1"), 0)),
        (br#"{"key":"k","collation":{"typ\u0065":"user","\u0069d":"1"}}"#.to_vec(), Good("k", "", Some("user.1"), 0)),
        (br#"{"key":"k","collation":{"type":"User","id":"1"}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":null,"id":"1"}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":1,"id":"1"}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":null}"#.to_vec(), Good("k", "", None, 0)),
        (br#"{"key":"k","collation":null,"collation":null}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":"user.1"}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":["user","1"]}"#.to_vec(), Bad),
        // A repeated type/id is refused only after a non-null one.
        (br#"{"key":"k","collation":{"type":null,"type":"user","id":"1"}}"#.to_vec(), Good("k", "", Some("user.1"), 0)),
        (br#"{"key":"k","collation":{"type":"user","id":null,"id":"2"}}"#.to_vec(), Good("k", "", Some("user.2"), 0)),
        (br#"{"key":"k","collation":{"type":"user","type":null,"id":"1"}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","type":"user","id":"1"}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":"1","id":"1"}}"#.to_vec(), Bad),
        (br#"{"key":"k","collation":{"type":"user","id":"1","x":1,"x":2}}"#.to_vec(), Good("k", "", Some("user.1"), 0)),
        // --- nesting: serde_json's limit (128) covers what it parses, and a
        // parsed container here is refused anyway; skipped values are
        // skipped iteratively with no limit at all.
        (format!(r#"{{"key":"k","x":{}}}"#, deep("[", "1", "]", 127)).into_bytes(), Good("k", "", None, 0)),
        (format!(r#"{{"key":"k","x":{}}}"#, deep("[", "1", "]", 128)).into_bytes(), Good("k", "", None, 0)),
        (format!(r#"{{"key":"k","x":{}}}"#, deep("[", "", "]", 129)).into_bytes(), Good("k", "", None, 0)),
        (format!(r#"{{"key":"k","x":{}}}"#, deep(r#"{"a":"#, "null", "}", 200_000)).into_bytes(), Good("k", "", None, 0)),
        (format!(r#"{{"key":"k","x":{}}}"#, deep("[", "1", "]", 1_000_000)).into_bytes(), Good("k", "", None, 0)),
        (format!(r#"{{"key":"k","collation":{{"type":"user","id":"1","x":{}}}}}"#, deep("[", "1", "]", 10_000)).into_bytes(), Good("k", "", Some("user.1"), 0)),
        (format!(r#"{{"key":"k","x":{}}}"#, deep("[", "1", "]", 300).trim_end_matches(']')).into_bytes(), Bad),
        (format!(r#"{{"key":"k","x":{}]}}"#, deep("[", "1", "]", 300)).into_bytes(), Bad),
        (format!(r#"{{"key":"k","collation":{{"type":"user","id":{}}}}}"#, deep("[", "1", "]", 127)).into_bytes(), Bad),
        (format!(r#"{{"key":"k","collation":{{"type":"user","id":{}}}}}"#, deep("[", "1", "]", 130)).into_bytes(), Bad),
        (format!(r#"{{"key":"k","priority":{}}}"#, deep("[", "1", "]", 130)).into_bytes(), Bad),
        (format!(r#"{{"key":{}}}"#, deep("[", "1", "]", 130)).into_bytes(), Bad),
    ];
    let mut accepted = 0;
    for (json, want) in &cases {
        let show = String::from_utf8_lossy(&json[..json.len().min(120)]).into_owned();
        let old = reference_parse(json, &ConfigLimits::NONE);
        let new = parse_config_limited(json, &ConfigLimits::NONE);
        match want {
            Good(key, url, coll, prio) => {
                let c = old.unwrap_or_else(|e| panic!("serde_json refused {show:?}: {e}"));
                assert_eq!(c.job_key, orca_key(key, url), "{show:?}");
                assert_eq!(c.collation.as_deref(), *coll, "{show:?}");
                assert_eq!(c.priority, *prio, "{show:?}");
                assert_eq!(new, Ok(c), "{show:?}");
                accepted += 1;
            }
            Bad => {
                assert!(old.is_err(), "serde_json accepted {show:?}");
                match new {
                    Ok(c) => panic!("the scanner accepted {show:?}: {c:?}"),
                    Err(e) => {
                        let t = e.to_string();
                        assert!(t.bytes().all(|c| (0x20..0x7f).contains(&c)), "{t:?}");
                    }
                }
            }
        }
        check(json, &SMALL);
    }
    eprintln!("edge_cases: {} cases, {accepted} accepted", cases.len());
}

/// Skipped values nested around the scanner's register stack (64 levels,
/// then a restart that spills to the heap) and serde_json's recursion limit
/// (128): mixed objects and arrays, valid, one closer wrong, one short.
#[test]
fn deep_mixed_nesting() {
    for depth in (1..=8).chain(60..=70).chain(125..=131).chain(190..=194) {
        for pattern in 0..3u32 {
            let object = |level: usize| match pattern {
                0 => level.is_multiple_of(2),
                1 => level % 3 == 1,
                _ => (level * 7919) % 5 < 2,
            };
            let mut open = String::new();
            let mut close = Vec::new();
            for level in 0..depth {
                if object(level) {
                    open.push_str("{\"a\":");
                    close.push('}');
                } else {
                    open.push_str("[0,");
                    close.push(']');
                }
            }
            let closers: String = close.iter().rev().collect();
            let good = format!(r#"{{"key":"k","x":{open}"v"{closers},"y":1}}"#);
            assert!(reference_parse(good.as_bytes(), &ConfigLimits::NONE).is_ok());
            check(good.as_bytes(), &ConfigLimits::NONE);
            for wrong in [0, depth / 2, depth - 1] {
                let mut bad: Vec<char> = closers.chars().collect();
                bad[wrong] = if bad[wrong] == '}' { ']' } else { '}' };
                let bad: String = bad.into_iter().collect();
                let doc = format!(r#"{{"key":"k","x":{open}"v"{bad},"y":1}}"#);
                check(doc.as_bytes(), &ConfigLimits::NONE);
                let short = format!(r#"{{"key":"k","x":{open}"v"{}}}"#, &closers[1..]);
                check(short.as_bytes(), &ConfigLimits::NONE);
            }
        }
    }
}

#[test]
fn semantic_messages_are_kept() {
    let msg = |json: &str| match parse_config_limited(json.as_bytes(), &SMALL) {
        Ok(c) => panic!("accepted {json}: {c:?}"),
        Err(e) => e.to_string(),
    };
    assert_eq!(msg("[]"), "config must be a JSON object");
    assert_eq!(msg(r#"{"key":null}"#), "config has no string field 'key'");
    assert!(msg(r#"{"key":"123456789"}"#).contains("orca.max-key-length"));
    assert!(msg(r#"{"key":"k","priority":-3}"#).contains(">= 0"));
    assert!(msg(r#"{"key":"k","priority":1.5}"#).contains("not a fraction"));
    assert!(msg(r#"{"key":"k","priority":9007199254740992}"#).contains("at most"));
    assert!(msg(r#"{"key":"k","collation":{"id":"1"}}"#).contains("needs a 'type'"));
    assert!(
        msg(r#"{"key":"k","collation":{"type":"x","id":"1"}}"#).contains("\"user\" or \"team\"")
    );
    assert!(msg(r#"{"key":"k","collation":{"type":"user"}}"#).contains("needs an 'id'"));
    assert!(msg(r#"{"key":"k","collation":{"type":"user","id":""}}"#).contains("not be empty"));
    assert!(
        msg(r#"{"key":"k","collation":{"type":"user","id":"12345"}}"#)
            .contains("orca.max-collation-id-length")
    );
    assert!(msg(r#"{"key":"k","key":"k"}"#).contains("duplicate field 'key'"));
    assert!(msg("{\"key\":\"k\"} x").starts_with("invalid config JSON: "));
}

// ---------------------------------------------------------------------------
// generated documents
// ---------------------------------------------------------------------------

/// Writes random configs. A `clean` generator makes only what serde_json
/// accepts at each position (raw invalid UTF-8 and lone surrogates still go
/// into skipped strings, where they are accepted), so that about half the
/// documents are accepted; the other half carries noise everywhere.
struct Gen<'r> {
    r: &'r mut Rng,
    out: Vec<u8>,
    clean: bool,
}

/// Where a string goes: parsed ones (the four fields, the keys of the top
/// level and of `collation`) are UTF-8 and surrogate checked, skipped ones
/// are not.
#[derive(Clone, Copy, PartialEq)]
enum Pos {
    Parsed,
    Skipped,
}

/// The first `GOOD_NUMBERS` have valid grammar.
const GOOD_NUMBERS: usize = 32;
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "7",
    "60000",
    "123456789012",
    "9007199254740991",
    "9007199254740992",
    "-1",
    "-60000",
    "1.5",
    "1.0",
    "0.0",
    "-0.0",
    "1e2",
    "1E+2",
    "1e-2",
    "0e0",
    "1.5e3",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "-18446744073709551615",
    "-18446744073709551616",
    "99999999999999999999",
    "1e400",
    "-1e400",
    "1e-400",
    "1e99999999999",
    "01",
    "-01",
    "00",
    "-",
    "1.",
    "1.e3",
    ".5",
    "+1",
    "1e",
    "1e+",
    "--1",
    "0x10",
    "NaN",
    "Infinity",
    "1_000",
];

const NAMES: &[&str] = &[
    "key",
    "response_url",
    "collation",
    "priority",
    "gate",
    "g\\u0061te",
    "script",
    "files",
    "metadata_table",
    "x",
    "",
    "k\\u0065y",
    "priorit\\u0079",
    "Key",
    "key ",
    "type",
    "id",
    "\\ud800",
    "\\ud83d\\ude00",
    "caf\u{e9}",
];

impl Gen<'_> {
    fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    fn ws(&mut self) {
        match self.r.below(100) {
            0..=69 => {}
            70..=79 => self.put(" "),
            80..=84 => self.put("\n"),
            85..=89 => self.put("\t"),
            90..=93 => self.put("\r\n  "),
            94..=98 => self.put(" \t\r\n"),
            _ if self.clean => self.put(" "),
            _ => {
                let junk: &[&[u8]] = &[b"\x0c", b"\x0b", b"\xc2\xa0", b"\x00"];
                let j = *self.r.pick(junk);
                self.out.extend_from_slice(j);
            }
        }
    }

    fn string_body(&mut self, pieces: u64, pos: Pos) {
        let n = self.r.below(pieces + 1);
        for _ in 0..n {
            let mut k = self.r.below(100);
            if self.clean {
                let refused = match k {
                    68..=71 | 82..=87 => pos == Pos::Parsed,
                    88..=93 => true,
                    _ => false,
                };
                if refused {
                    k = 0;
                }
            }
            match k {
                0..=44 => {
                    let c = b"abcxyzXYZ0129 -_.:/?&=%{}[],~'"[self.r.below(30) as usize];
                    self.out.push(c);
                }
                45..=54 => {
                    let e = *self
                        .r
                        .pick(&["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]);
                    self.put(e);
                }
                55..=62 => {
                    let e = *self.r.pick(&[
                        "\\u0041", "\\u00e9", "\\u00E9", "\\u4e2d", "\\uffff", "\\u0000",
                        "\\u001f", "\\u007F", "\\uFEFF", "\\u0022", "\\u005c",
                    ]);
                    self.put(e);
                }
                63..=67 => {
                    let hi = 0xD800 + self.r.below(0x400);
                    let lo = 0xDC00 + self.r.below(0x400);
                    self.put(&format!("\\u{hi:04x}\\u{lo:04X}"));
                }
                68..=71 => {
                    let e = *self.r.pick(&[
                        "\\ud800",
                        "\\udbff",
                        "\\udc00",
                        "\\udfff",
                        "\\ud800\\u0041",
                        "\\ud800\\n",
                        "\\ud800\\ud800",
                        "\\udc00\\ud800",
                        "\\ud800x",
                        "\\ud800\\u",
                    ]);
                    self.put(e);
                }
                72..=81 => {
                    let e = *self.r.pick(&[
                        "\u{e9}",
                        "\u{4e2d}",
                        "\u{1f600}",
                        "\u{ffff}",
                        "\u{10ffff}",
                        "\u{7f}",
                        "\u{80}",
                    ]);
                    self.put(e);
                }
                82..=87 => {
                    let bad: &[&[u8]] = &[
                        b"\xff",
                        b"\x80",
                        b"\xc0\x80",
                        b"\xed\xa0\x80",
                        b"\xf4\x90\x80\x80",
                        b"\xe4\xb8",
                        b"\xf0\x9f\x98",
                        b"\xc3",
                    ];
                    let b = *self.r.pick(bad);
                    self.out.extend_from_slice(b);
                }
                88..=90 => {
                    let c = *self.r.pick(&[0x00u8, 0x01, 0x09, 0x0a, 0x1f]);
                    self.out.push(c);
                }
                91..=93 => {
                    let e = *self
                        .r
                        .pick(&["\\x41", "\\u12", "\\u12g4", "\\U0041", "\\'", "\\", "\\u"]);
                    self.put(e);
                }
                _ => {
                    let s = format!("{}", self.r.next_u64());
                    self.put(&s);
                }
            }
        }
    }

    /// A string; `plain` ones are mostly plain text.
    fn string(&mut self, plain: bool, pos: Pos) {
        self.out.push(b'"');
        if plain && self.r.pct(60) {
            let s = format!("job-{}", self.r.below(1_000_000));
            self.put(&s);
            if self.r.pct(30) {
                self.string_body(3, pos);
            }
        } else {
            self.string_body(8, pos);
        }
        self.out.push(b'"');
    }

    fn number(&mut self) {
        if self.r.pct(70) {
            let n = if self.clean {
                *self.r.pick(&NUMBERS[..GOOD_NUMBERS])
            } else {
                *self.r.pick(NUMBERS)
            };
            self.put(n);
        } else {
            if self.r.pct(30) {
                self.put("-");
            }
            let digits = 1 + self.r.below(24);
            for i in 0..digits {
                let d = if i == 0 && digits > 1 {
                    1 + self.r.below(9)
                } else {
                    self.r.below(10)
                };
                self.put(&d.to_string());
            }
            if self.r.pct(20) {
                self.put(".");
                let v = self.r.below(1000);
                self.put(&v.to_string());
            }
            if self.r.pct(15) {
                let e = *self.r.pick(&["e", "E", "e+", "e-", "E-"]);
                self.put(e);
                let v = self.r.below(400);
                self.put(&v.to_string());
            }
        }
    }

    /// An object key.
    fn name(&mut self, pos: Pos) {
        if self.r.pct(85) {
            self.out.push(b'"');
            let mut n = *self.r.pick(NAMES);
            if self.clean && pos == Pos::Parsed && n == "\\ud800" {
                n = "x";
            }
            self.put(n);
            self.out.push(b'"');
        } else {
            self.string(false, pos);
        }
    }

    fn deep(&mut self) {
        let n = match self.r.below(4) {
            0 => 126 + self.r.below(5) as usize,
            1 => self.r.below(300) as usize,
            2 => 1000 + self.r.below(3000) as usize,
            _ => 60 + self.r.below(10) as usize,
        };
        let obj = self.r.pct(40);
        for _ in 0..n {
            if obj {
                self.put("{\"a\":");
            } else {
                self.put("[");
            }
        }
        self.value(3);
        // Sometimes one closer short, or the wrong one.
        let spoil = !self.clean && self.r.pct(5);
        for i in 0..n {
            if spoil && i == n / 2 {
                self.put(if obj { "]" } else { "}" });
            } else {
                self.put(if obj { "}" } else { "]" });
            }
        }
    }

    /// Any value; `budget` bounds the nesting of the random part.
    fn value(&mut self, budget: u32) {
        self.ws();
        let pick = if budget == 0 {
            self.r.below(60)
        } else {
            self.r.below(100)
        };
        match pick {
            0..=7 => self.put("null"),
            8..=11 => self.put("true"),
            12..=15 => self.put("false"),
            16..=33 => self.number(),
            34..=59 => self.string(false, Pos::Skipped),
            60..=77 => {
                self.put("[");
                let n = self.r.below(5);
                for i in 0..n {
                    if i > 0 {
                        self.ws();
                        self.put(",");
                    }
                    self.value(budget - 1);
                }
                if n == 0 {
                    self.ws();
                }
                if !self.clean && self.r.pct(2) {
                    self.put(",");
                }
                self.put("]");
            }
            78..=95 => {
                self.put("{");
                let n = self.r.below(5);
                for i in 0..n {
                    if i > 0 {
                        self.ws();
                        self.put(",");
                    }
                    self.ws();
                    self.name(Pos::Skipped);
                    self.ws();
                    self.put(":");
                    self.value(budget - 1);
                }
                self.ws();
                if !self.clean && self.r.pct(2) {
                    self.put(",");
                }
                self.put("}");
            }
            96..=97 => self.deep(),
            _ if self.clean => self.put("[]"),
            _ => {
                let junk = *self.r.pick(&[
                    "nul",
                    "tru",
                    "NaN",
                    "'a'",
                    "",
                    "undefined",
                    "[1,]",
                    "{\"a\"}",
                ]);
                self.put(junk);
            }
        }
        self.ws();
    }

    /// `below(n)`, or `below(clean)` for a clean generator (the ranges
    /// past `clean` are what serde_json refuses at that position).
    fn choose(&mut self, n: u64, clean: u64) -> u64 {
        self.r.below(if self.clean { clean } else { n })
    }

    fn key_value(&mut self) {
        self.ws();
        match self.choose(100, 88) {
            0..=79 => self.string(true, Pos::Parsed),
            80..=87 => self.put("null"),
            _ => self.value(2),
        }
        self.ws();
    }

    fn priority_value(&mut self) {
        self.ws();
        match self.choose(100, 85) {
            0..=29 => {
                let v = self.r.below(1 << 20);
                self.put(&v.to_string());
            }
            30..=69 => self.number(),
            70..=84 => self.put("null"),
            _ => self.value(2),
        }
        self.ws();
    }

    fn collation_value(&mut self) {
        self.ws();
        match self.choose(100, 85) {
            0..=69 => {
                self.put("{");
                let mut members: Vec<u8> = Vec::new();
                if self.r.pct(90) {
                    members.push(0);
                }
                if self.r.pct(90) {
                    members.push(1);
                }
                let others = self.r.below(3) as usize;
                members.extend(std::iter::repeat_n(2, others));
                if self.r.pct(10) {
                    members.push(0);
                }
                if self.r.pct(10) {
                    members.push(1);
                }
                shuffle(self.r, &mut members);
                for (i, m) in members.iter().enumerate() {
                    if i > 0 {
                        self.ws();
                        self.put(",");
                    }
                    self.ws();
                    match m {
                        0 => {
                            let name = *self.r.pick(&[
                                "\"type\"",
                                "\"type\"",
                                "\"typ\\u0065\"",
                                "\"Type\"",
                            ]);
                            self.put(name);
                            self.ws();
                            self.put(":");
                            self.ws();
                            match self.choose(100, 92) {
                                0..=44 => self.put("\"user\""),
                                45..=79 => self.put("\"team\""),
                                80..=84 => self.put("\"us\\u0065r\""),
                                85..=91 => self.put("null"),
                                _ => self.value(1),
                            }
                        }
                        1 => {
                            let name =
                                *self.r.pick(&["\"id\"", "\"id\"", "\"\\u0069d\"", "\"ID\""]);
                            self.put(name);
                            self.ws();
                            self.put(":");
                            self.ws();
                            match self.choose(100, 82) {
                                0..=34 => self.string(true, Pos::Parsed),
                                35..=44 => self.string(false, Pos::Parsed),
                                45..=49 => self.put("\"\""),
                                50..=74 => self.number(),
                                75..=81 => self.put("null"),
                                _ => self.value(2),
                            }
                        }
                        _ => {
                            self.name(Pos::Parsed);
                            self.ws();
                            self.put(":");
                            self.value(2);
                        }
                    }
                    self.ws();
                }
                self.ws();
                self.put("}");
            }
            70..=84 => self.put("null"),
            _ => self.value(2),
        }
        self.ws();
    }

    /// A whole config.
    fn document(&mut self) {
        self.ws();
        self.put("{");
        let mut members: Vec<u8> = Vec::new();
        if self.r.pct(90) {
            members.push(0);
        }
        for f in 1..5 {
            if self.r.pct(55) {
                members.push(f);
            }
        }
        let others = self.r.below(5) as usize;
        members.extend(std::iter::repeat_n(5, others));
        if self.r.pct(6) {
            let f = self.r.below(5) as u8;
            members.push(f);
        }
        shuffle(self.r, &mut members);
        for (i, m) in members.iter().enumerate() {
            if i > 0 {
                self.ws();
                self.put(",");
            }
            self.ws();
            let name = match m {
                0 if self.r.pct(5) => "\"k\\u0065y\"",
                0 => "\"key\"",
                1 => "\"response_url\"",
                2 => "\"collation\"",
                3 => "\"priority\"",
                4 if self.r.pct(5) => "\"g\\u0061te\"",
                4 => "\"gate\"",
                _ => "",
            };
            if name.is_empty() && self.clean && self.r.pct(90) {
                self.put("\"other\"");
            } else if name.is_empty() {
                self.name(Pos::Parsed);
            } else {
                self.put(name);
            }
            self.ws();
            self.put(":");
            match m {
                0 | 1 | 4 => self.key_value(),
                2 => self.collation_value(),
                3 => self.priority_value(),
                _ => self.value(3),
            }
        }
        self.ws();
        if !self.clean && self.r.pct(2) {
            self.put(",");
        }
        self.put("}");
        self.ws();
        if !self.clean && self.r.pct(2) {
            let junk = *self.r.pick(&["x", "{}", "\x00", "/", "]"]);
            self.put(junk);
        }
    }
}

fn shuffle<T>(r: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn random_limits(r: &mut Rng) -> ConfigLimits {
    match r.below(3) {
        0 => ConfigLimits::NONE,
        1 => SMALL,
        _ => ConfigLimits {
            max_key_len: r.below(20) as usize,
            max_collation_id_len: r.below(8) as usize,
            max_gate_len: r.below(12) as usize,
        },
    }
}

/// Documents per seed for each random test.
fn cases() -> usize {
    steps(100_000)
}

#[test]
fn generated_documents() {
    let n = cases();
    let t = std::time::Instant::now();
    let (mut total, mut accepted) = (0usize, 0usize);
    for seed in seeds(&DEFAULT_SEEDS) {
        let mut r = Rng::new(seed);
        for _ in 0..n {
            let clean = r.pct(50);
            let mut g = Gen {
                r: &mut r,
                out: Vec::new(),
                clean,
            };
            g.document();
            let doc = g.out;
            let limits = random_limits(&mut r);
            check(&doc, &limits);
            check(&doc, &ConfigLimits::NONE);
            total += 1;
            if reference_parse(&doc, &ConfigLimits::NONE).is_ok() {
                accepted += 1;
            }
        }
    }
    eprintln!(
        "generated_documents: {total} documents, {accepted} accepted by serde_json, in {:.2?}",
        t.elapsed()
    );
    // The generator must keep producing both verdicts in bulk.
    assert!(
        accepted * 10 > total,
        "too few accepted: {accepted} of {total}"
    );
    assert!(
        accepted * 10 < total * 9,
        "too few refused: {accepted} of {total}"
    );
}

// ---------------------------------------------------------------------------
// mutated documents
// ---------------------------------------------------------------------------

/// `benches/job.json` with each `__rand_int__` replaced by a 12-digit number.
fn job_json() -> Vec<u8> {
    let text = include_str!("../benches/job.json");
    let mut json = String::new();
    for (i, part) in text.trim_end().split("__rand_int__").enumerate() {
        if i > 0 {
            json.push_str(&format!("{}", 100_000_000_000u64 + 7919 * i as u64));
        }
        json.push_str(part);
    }
    json.into_bytes()
}

const INTERESTING: &[u8] =
    b"\"\\{}[]:,0123456789-+.eEtfnu \t\r\n\x00\x01\x1f\x7f\x80\xbf\xc3\xed\xf0\xff/abAF";

fn mutate(r: &mut Rng, doc: &mut Vec<u8>) {
    let len = doc.len();
    let at = if len == 0 {
        0
    } else {
        r.below(len as u64) as usize
    };
    match r.below(9) {
        0 if len > 0 => doc[at] ^= 1 << r.below(8),
        1 | 2 if len > 0 => doc[at] = *r.pick(INTERESTING),
        3 | 4 => doc.insert(at, *r.pick(INTERESTING)),
        5 if len > 0 => {
            let n = (1 + r.below(4) as usize).min(len - at);
            doc.drain(at..at + n);
        }
        6 if len > 0 => {
            // Copy a span elsewhere (duplicates fields, nests values).
            let n = (1 + r.below(40) as usize).min(len - at);
            let span = doc[at..at + n].to_vec();
            let to = r.below(len as u64 + 1) as usize;
            doc.splice(to..to, span);
        }
        7 if len > 0 => doc.truncate(at),
        _ => {
            let snippets: &[&[u8]] = &[
                b"\\u",
                b"\\ud800",
                b"\\udc00",
                b"\\ud83d\\ude00",
                b"\xe4\xb8\xad",
                b"\xf0\x9f\x98\x80",
                b",\"key\":\"j\"",
                b",\"priority\":1",
                b",\"collation\":null",
                b",\"x\":[[[]]]",
                b"-0",
                b"1e400",
                b"9223372036854775808",
                b"null",
                b"[",
                b"]",
                b"{",
                b"}",
            ];
            let s = *r.pick(snippets);
            doc.splice(at..at, s.iter().copied());
        }
    }
}

#[test]
fn mutated_documents() {
    let n = cases();
    let t = std::time::Instant::now();
    let mut bases: Vec<Vec<u8>> = vec![
        job_json(),
        br#"{"key":"job-1","response_url":"http://orca.test/results/1","collation":{"type":"user","id":"1"},"priority":7919,"metadata_table":{"course":"cs2500","assignment":"hw1"},"script":[{"cmd":["make","test"],"timeout":120}],"files":{"submission":{"url":"http://orca.test/files/1.zip","mime_type":"application/zip"}}}"#.to_vec(),
        br#"{"key":"a\"\u00e9\ud83d\ude00","response_url":null,"collation":{"type":"team","id":-12},"priority":0,"x":[1.5e3,-0,true,false,null,{"y":"\ud800"}]}"#.to_vec(),
        "{\"key\":\"\u{e9}\u{4e2d}\",\"x\":\"\u{1f600}\"}".as_bytes().to_vec(),
    ];
    // Plus valid generated documents.
    let mut r = Rng::new(0xba5e);
    while bases.len() < 40 {
        let mut g = Gen {
            r: &mut r,
            out: Vec::new(),
            clean: true,
        };
        g.document();
        let doc = g.out;
        if doc.len() < 4000 && reference_parse(&doc, &ConfigLimits::NONE).is_ok() {
            bases.push(doc);
        }
    }
    for b in &bases {
        assert!(
            reference_parse(b, &ConfigLimits::NONE).is_ok(),
            "base refused"
        );
        check(b, &ConfigLimits::NONE);
    }
    let (mut total, mut accepted) = (0usize, 0usize);
    for seed in seeds(&DEFAULT_SEEDS) {
        let mut r = Rng::new(seed ^ 0x6d75_7461_7465);
        for _ in 0..n {
            let mut doc = r.pick(&bases).clone();
            for _ in 0..1 + r.below(4) {
                mutate(&mut r, &mut doc);
            }
            let limits = random_limits(&mut r);
            check(&doc, &limits);
            check(&doc, &ConfigLimits::NONE);
            total += 1;
            if reference_parse(&doc, &ConfigLimits::NONE).is_ok() {
                accepted += 1;
            }
        }
    }
    eprintln!(
        "mutated_documents: {total} mutations of {} bases, {accepted} accepted by serde_json, in {:.2?}",
        bases.len(),
        t.elapsed()
    );
    assert!(
        accepted * 20 > total,
        "too few accepted: {accepted} of {total}"
    );
}
