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

mod generate;
mod random;

use orca::core::config::{orca_key, parse_config_limited, ConfigLimits};
use orca::core::MAX_TIME;

use crate::common::{steps, Rng};
use crate::fuzz_corpus::checks::config_ref::{compare, reference_parse};

pub const DEFAULT_SEEDS: [u64; 2] = [1, 0x5eed_c0f1];

pub const SMALL: ConfigLimits = ConfigLimits {
    max_key_len: 8,
    max_collation_id_len: 4,
    max_gate_len: 5,
};

pub fn check(data: &[u8], limits: &ConfigLimits) {
    if let Err(e) = compare(data, limits) {
        panic!("{e}");
    }
}

/// Documents per seed for each random test.
pub fn cases() -> usize {
    steps(100_000)
}

pub fn random_limits(r: &mut Rng) -> ConfigLimits {
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

/// What serde_json made of a config.
pub enum Want {
    /// Accepted with this key, response_url, collation, priority.
    Ok(&'static str, &'static str, Option<&'static str>, i64),
    /// Refused.
    Err,
}

use Want::{Err as Bad, Ok as Good};

pub fn deep(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

#[test]
pub fn edge_cases() {
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
pub fn deep_mixed_nesting() {
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
pub fn semantic_messages_are_kept() {
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

/// The fields the queue reads are one list (`scan::READ_FIELDS`): a repeat
/// of any of them is refused by the scanner and by the reference (serde's
/// derive, which knows them as struct fields); a repeat of any other field
/// is accepted by both. A field added to the list but not to the reference
/// model (or the other way round) fails here.
#[test]
pub fn repeats_of_read_fields_are_refused_by_both() {
    use orca::core::scan::READ_FIELDS;
    for f in READ_FIELDS {
        for doc in [
            format!(r#"{{"key":"k","{f}":null,"x":1,"{f}":null}}"#),
            format!(r#"{{"{f}":null,"key":"k","{f}":null}}"#),
        ] {
            check(doc.as_bytes(), &ConfigLimits::NONE);
            let e = parse_config_limited(doc.as_bytes(), &ConfigLimits::NONE)
                .expect_err(&doc)
                .to_string();
            assert!(e.contains(&format!("duplicate field '{f}'")), "{doc}: {e}");
        }
    }
    for other in ["metadata_table", "script", "x", "Key", "keys"] {
        let doc = format!(r#"{{"key":"k","{other}":1,"{other}":{{"a":[1]}}}}"#);
        check(doc.as_bytes(), &ConfigLimits::NONE);
        assert!(
            parse_config_limited(doc.as_bytes(), &ConfigLimits::NONE).is_ok(),
            "{doc}"
        );
    }
}
