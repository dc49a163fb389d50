//! The two random differential tests: generated documents, and byte-level
//! mutations of valid configs (among them `benches/job.json`).

use crate::common::{seeds, Rng};

use super::generate::*;
use super::*;

/// `doc` through the scanner and the reference, under random limits and
/// under none (`check`); whether serde_json accepts it.
fn check_both(r: &mut Rng, doc: &[u8]) -> bool {
    let limits = random_limits(r);
    check(doc, &limits);
    check(doc, &ConfigLimits::NONE);
    reference_parse(doc, &ConfigLimits::NONE).is_ok()
}

#[test]
pub fn generated_documents() {
    let n = cases();
    let t = std::time::Instant::now();
    let (mut total, mut accepted) = (0usize, 0usize);
    for seed in seeds(&DEFAULT_SEEDS) {
        let mut r = Rng::new(seed);
        for _ in 0..n {
            let clean = r.chance(50);
            let mut g = Gen {
                r: &mut r,
                out: Vec::new(),
                clean,
            };
            g.document();
            let doc = g.out;
            total += 1;
            if check_both(&mut r, &doc) {
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

/// `benches/job.json` with each `__rand_int__` replaced by a 12-digit number.
pub fn job_json() -> Vec<u8> {
    let text = include_str!("../../../benches/job.json");
    let mut json = String::new();
    for (i, part) in text.trim_end().split("__rand_int__").enumerate() {
        if i > 0 {
            json.push_str(&format!("{}", 100_000_000_000u64 + 7919 * i as u64));
        }
        json.push_str(part);
    }
    json.into_bytes()
}

pub const INTERESTING: &[u8] =
    b"\"\\{}[]:,0123456789-+.eEtfnu \t\r\n\x00\x01\x1f\x7f\x80\xbf\xc3\xed\xf0\xff/abAF";

pub fn mutate(r: &mut Rng, doc: &mut Vec<u8>) {
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
pub fn mutated_documents() {
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
            total += 1;
            if check_both(&mut r, &doc) {
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
