//! The dashboard never shows or spends more than it should (issue 28):
//!
//! - without a token, no page or download shows what a job carries beyond
//!   the fields the queue reads (config key, collation, gate): payloads,
//!   results, `response_url`s and dropped configs are hidden, the pages say
//!   why, and their downloads and the metadata filter are refused (403);
//! - with a token, hostile payloads at the module's default size limit
//!   (the issue's 3.86 MB config of 16,000 arrays nested 120 deep, a wide
//!   array, 4 MB of escaped quotes, raw invalid UTF-8, 100,000 keys) and
//!   4 MB results (binary, and deep JSON) are shown within the bounds of
//!   `src/render.rs`, downloadable whole and exactly as stored, while six
//!   clients at once view them and every listing that holds them; each page
//!   stays small and the dashboard's peak memory (`VmHWM` of its process)
//!   stays bounded (it grew to 948 MB for one view of the deep config).

mod common;

use std::time::Instant;

use common::{bearer, csrf_of, enc, form, get_bytes, Dashboard, Redis, TOKEN};

const Q: &str = "hostile";
/// Under the module's default `orca.max-payload-bytes` (4 MiB).
const SIZE: usize = 3_900_000;
/// Most bytes of a page (downloads excepted) with a token.
const PAGE_MAX: usize = 2 << 20;
/// Most the dashboard's resident memory may reach in this test.
const HWM_MAX_KB: u64 = 320 * 1024;

fn head(name: &str) -> String {
    format!(
        r#"{{"key":"{name}","response_url":"http://cb/SECRET-url-{name}","secret":"SECRET-{name}","x":"#
    )
}

/// The kinds of hostile config.
const KINDS: [&str; 5] = ["deep", "wide", "quotes", "raw", "keys"];

/// A hostile config of `kind` named `name`, about `SIZE` bytes.
fn config(name: &str, kind: &str) -> Vec<u8> {
    let mut s = head(name).into_bytes();
    match kind {
        // The issue's: 16,000 arrays nested 120 deep (3.86 MB).
        "deep" => {
            let one = format!("{}{}", "[".repeat(120), "]".repeat(120));
            s.push(b'[');
            s.extend(vec![one; 16_000].join(",").into_bytes());
            s.push(b']');
        }
        "wide" => {
            s.push(b'[');
            s.extend("1,".repeat(SIZE / 2).into_bytes());
            s.extend(b"1]");
        }
        // 4 MB of escaped quotes (each becomes 5 bytes of HTML).
        "quotes" => {
            s.push(b'"');
            s.extend("\\\"".repeat(SIZE / 2).into_bytes());
            s.push(b'"');
        }
        // Raw invalid UTF-8 in a field the queue does not read.
        "raw" => {
            s.push(b'"');
            s.extend(std::iter::repeat_n([0xffu8, 0xfe], SIZE / 2).flatten());
            s.push(b'"');
        }
        _ => {
            s.push(b'0');
            for i in 0..100_000 {
                s.extend(format!(",\"k{i}\":[{{\"a\":[\"{}\"]}}]", "v".repeat(16)).into_bytes());
            }
        }
    }
    s.push(b'}');
    assert!(
        s.len() > 3_000_000 && s.len() < 4 << 20,
        "{kind}: {}",
        s.len()
    );
    s
}

fn orca_key(name: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(name.as_bytes());
    h.update(format!("http://cb/SECRET-url-{name}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

fn put(c: &mut redis::Connection, config: &[u8]) {
    redis::cmd("ORCA.ENQUEUE")
        .arg(Q)
        .arg(config)
        .query::<redis::Value>(c)
        .expect("ORCA.ENQUEUE of a hostile config");
}

/// (key, lease) of a popped job.
fn pop(r: &Redis) -> (String, String) {
    let k = r
        .field_str(&["ORCA.POP", Q, "LEASE", "600000"], "key")
        .unwrap();
    let l = r.field_str(&["ORCA.STATUS", Q, &k], "lease").unwrap();
    (k, l)
}

/// Every state holds hostile jobs: queued, running (two with kept results:
/// 4 MB of binary, 4 MB of deep JSON), delayed, dead, held behind gate
/// `g`; gate `d` holds more, to be dropped. Returns the results' keys.
fn fill(r: &Redis) -> (String, String) {
    let mut c = r.conn();
    r.cmd(&["ORCA.GATE", Q, "g", "CLOSE"]).unwrap();
    r.cmd(&["ORCA.GATE", Q, "d", "CLOSE"]).unwrap();
    for round in 0..4 {
        for kind in KINDS {
            put(&mut c, &config(&format!("q{round}-{kind}"), kind));
        }
    }
    for gate in ["g", "d"] {
        for kind in ["deep", "wide", "raw"] {
            let name = format!("h{gate}-{kind}");
            let mut cfg = config(&name, kind);
            // {"key":..., then the gate
            let at = cfg.iter().position(|b| *b == b',').unwrap();
            cfg.splice(at..at, format!(",\"gate\":\"{gate}\"").into_bytes());
            put(&mut c, &cfg);
        }
    }
    // Two finished with 4 MB results, three running, two delayed, three dead.
    let (bk, bl) = pop(r);
    redis::cmd("ORCA.ACK")
        .arg(Q)
        .arg(&bk)
        .arg(&bl)
        .arg("RESULT")
        .arg(vec![0xffu8; SIZE])
        .query::<redis::Value>(&mut c)
        .unwrap();
    let (jk, jl) = pop(r);
    let one = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    redis::cmd("ORCA.ACK")
        .arg(Q)
        .arg(&jk)
        .arg(&jl)
        .arg("RESULT")
        .arg(format!("[{}]", vec![one; SIZE / 202].join(",")))
        .query::<redis::Value>(&mut c)
        .unwrap();
    for _ in 0..3 {
        pop(r);
    }
    for _ in 0..2 {
        let (k, l) = pop(r);
        r.cmd(&["ORCA.NACK", Q, &k, &l, "DELAY", "600000"]).unwrap();
    }
    r.cmd(&["CONFIG", "SET", "orca.max-attempts", "1"]).unwrap();
    for _ in 0..3 {
        let (k, l) = pop(r);
        r.cmd(&["ORCA.NACK", Q, &k, &l]).unwrap();
    }
    r.cmd(&["CONFIG", "SET", "orca.max-attempts", "5"]).unwrap();
    (bk, jk)
}

/// Drop gate `d` through the dashboard; the dropped page's address.
fn drop_gate(d: &Dashboard, headers: &[(&str, &str)]) -> String {
    let (code, page) = d.http("GET", &format!("/queue/gate?q={Q}&gate=d"), headers, "");
    assert_eq!(code, 200, "{page}");
    let (cookie, token) = csrf_of(&page);
    let mut h = vec![
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Cookie", cookie.as_str()),
    ];
    h.extend_from_slice(headers);
    let (code, resp) = d.http(
        "POST",
        "/action/gate",
        &h,
        &form(&[
            ("csrf", &token),
            ("q", Q),
            ("gate", "d"),
            ("op", "drop"),
            ("confirm", "yes"),
        ]),
    );
    assert_eq!(code, 303, "{resp}");
    let loc = resp
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or(l.strip_prefix("Location: "))
        })
        .expect("a redirect");
    loc.trim().to_string()
}

/// The dashboard's memory (kB) from /proc: (VmRSS, VmHWM).
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kb = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

#[test]
fn without_a_token_payloads_results_and_dropped_configs_are_hidden() {
    let r = Redis::start();
    let (binary, _) = fill(&r);
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1"]);
    let dropped = drop_gate(&d, &[]);
    let deep = orca_key("q2-deep");
    for path in [
        "/".to_string(),
        format!("/queue?q={Q}&per=1000"),
        format!("/queue?q={Q}&state=held&per=1000"),
        format!("/queue?q={Q}&state=running&per=1000"),
        format!("/queue?q={Q}&state=delayed&per=1000"),
        format!("/queue/dead?q={Q}&per=1000"),
        format!("/queue/gate?q={Q}&gate=g"),
        format!("/queue/find?q={Q}&key=q1-wide"),
        format!("/queue/find?q={Q}&collation=user.1"),
        format!("/queue/stats?q={Q}"),
        format!("/job?q={Q}&key={}", enc(&deep)),
        format!("/job?q={Q}&key={}", enc(&binary)),
        dropped.clone(),
    ] {
        let (code, page) = d.http("GET", &path, &[], "");
        assert_eq!(code, 200, "{path}: {page}");
        assert!(!page.contains("SECRET"), "{path} shows a secret");
        assert!(page.contains("id=\"redacted\""), "{path}: no notice");
    }
    // What the queue reads is still shown; the rest says why it is not.
    let (_, page) = d.http("GET", &format!("/job?q={Q}&key={}", enc(&deep)), &[], "");
    assert!(page.contains("id=\"payload-hidden\""), "{page}");
    assert!(page.contains("q2-deep"), "the config key is shown");
    let (_, page) = d.http("GET", &format!("/job?q={Q}&key={}", enc(&binary)), &[], "");
    assert!(page.contains("id=\"result-hidden\""), "{page}");
    assert!(page.contains("3,900,000 bytes"), "{page}");
    let (_, page) = d.http("GET", &format!("/queue?q={Q}&per=1000"), &[], "");
    assert!(page.contains("q3-keys") && page.contains("id=\"filter-off\""));
    let (_, page) = d.http("GET", &dropped, &[], "");
    assert!(page.contains("id=\"dropped-hidden\"") && page.contains("hd-deep"));
    assert!(!page.contains("response-url") && !page.contains("id=\"download\""));
    // Downloads and the metadata filter: refused, saying why.
    for path in [
        format!("/job/payload?q={Q}&key={}", enc(&deep)),
        format!("/job/result?q={Q}&key={}", enc(&binary)),
        dropped.replace("/queue/dropped?", "/queue/dropped.json?"),
        format!("/queue?q={Q}&field=course&value=cs1"),
    ] {
        let (code, body) = d.get_bytes(&path, &[]);
        assert_eq!(code, 403, "{path}");
        let body = String::from_utf8_lossy(&body);
        assert!(
            body.contains("--token") && !body.contains("SECRET"),
            "{path}"
        );
    }
}

#[test]
fn hostile_payloads_stay_within_bounds_for_concurrent_viewers() {
    let r = Redis::start();
    let (binary, json_result) = fill(&r);
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1", "--token", TOKEN]);
    let auth = bearer();
    let auth: &[(&str, &str)] = &[("Authorization", &auth)];
    let dropped = drop_gate(&d, auth);
    let (rss0, _) = memory(d.pid());

    // Every page that holds the hostile jobs, and their downloads.
    let mut pages: Vec<String> = vec![
        format!("/queue?q={Q}&per=1000"),
        format!("/queue?q={Q}&state=held&per=1000"),
        format!("/queue?q={Q}&state=running&per=1000"),
        format!("/queue?q={Q}&state=delayed&per=1000"),
        format!("/queue/dead?q={Q}&per=1000"),
        format!("/queue/gate?q={Q}&gate=g"),
        format!("/queue/find?q={Q}&key=q3-raw"),
        format!("/queue?q={Q}&field=course&value=cs1"),
        dropped.clone(),
    ];
    // Each kind queued, one running, one dead, the two results.
    let jobs: Vec<String> = KINDS
        .iter()
        .map(|kind| format!("q2-{kind}"))
        .chain(["q0-raw".to_string(), "q1-quotes".to_string()])
        .map(|n| orca_key(&n))
        .collect();
    for k in jobs.iter().chain([&binary, &json_result]) {
        pages.push(format!("/job?q={Q}&key={}", enc(k)));
    }
    let downloads: Vec<String> = vec![
        format!("/job/payload?q={Q}&key={}", enc(&orca_key("q0-raw"))),
        format!("/job/payload?q={Q}&key={}", enc(&orca_key("q2-deep"))),
        format!("/job/result?q={Q}&key={}", enc(&binary)),
        format!("/job/result?q={Q}&key={}", enc(&json_result)),
        dropped.replace("/queue/dropped?", "/queue/dropped.json?"),
    ];

    // Six clients at once, each through every page and download (in its
    // own order).
    let started = Instant::now();
    let clients: Vec<_> = (0..6)
        .map(|i| {
            let mut all: Vec<String> = pages.iter().chain(&downloads).cloned().collect();
            let n = all.len();
            all.rotate_left(i * 5 % n);
            let port = d.port;
            std::thread::spawn(move || {
                let auth = bearer();
                let mut sizes = Vec::new();
                for path in all {
                    let (code, body) = get_bytes(port, &path, &[("Authorization", &auth)]);
                    assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
                    sizes.push((path, body.len()));
                }
                sizes
            })
        })
        .collect();
    for c in clients {
        for (path, len) in c.join().expect("a client") {
            if !path.starts_with("/job/") && !path.contains("dropped.json") {
                assert!(len < PAGE_MAX, "{path}: {len} bytes");
            }
        }
    }
    let (rss1, hwm) = memory(d.pid());
    eprintln!(
        "six clients, {} pages and downloads each, in {:.1} s: dashboard RSS {} MB before, \
         {} MB after, peak {} MB",
        pages.len() + downloads.len(),
        started.elapsed().as_secs_f64(),
        rss0 / 1024,
        rss1 / 1024,
        hwm / 1024
    );
    assert!(
        hwm < HWM_MAX_KB,
        "the dashboard reached {} MB (bound {} MB)",
        hwm / 1024,
        HWM_MAX_KB / 1024
    );

    // What a page shows: the bounds, with notes and a download link.
    let (_, page) = d.http(
        "GET",
        &format!("/job?q={Q}&key={}", enc(&orca_key("q2-deep"))),
        auth,
        "",
    );
    assert!(page.contains("id=\"payload-note\""), "{}", &page[..2000]);
    assert!(page.contains("not re-indented") && page.contains("download it for the whole"));
    assert!(page.contains("id=\"payload-download\""));
    let (_, page) = d.http("GET", &format!("/job?q={Q}&key={}", enc(&binary)), auth, "");
    assert!(page.contains("3,900,000 bytes, not UTF-8 text; the first 4,096 bytes shown as hex"));
    assert!(!page.contains("id=\"result-base64\""));
    // Downloads give the bytes exactly as stored.
    let mut c = r.conn();
    for name in ["q0-raw", "q1-quotes", "q2-deep"] {
        let k = orca_key(name);
        let stored: redis::Value = redis::cmd("ORCA.STATUS")
            .arg(Q)
            .arg(&k)
            .query(&mut c)
            .unwrap();
        let redis::Value::Array(f) = stored else {
            panic!("{stored:?}")
        };
        let payload = f
            .chunks(2)
            .find(|kv| kv[0] == redis::Value::BulkString(b"payload".to_vec()))
            .map(|kv| match &kv[1] {
                redis::Value::BulkString(b) => b.clone(),
                other => panic!("{other:?}"),
            })
            .unwrap();
        let (code, body) = d.get_bytes(&format!("/job/payload?q={Q}&key={}", enc(&k)), auth);
        assert_eq!((code, body.len()), (200, payload.len()), "{name}");
        assert!(
            body == payload,
            "{name}: the download differs from what is stored"
        );
    }
    let (_, body) = d.get_bytes(&format!("/job/result?q={Q}&key={}", enc(&binary)), auth);
    assert!(body == vec![0xffu8; SIZE]);
    let (_, body) = d.get_bytes(
        &dropped.replace("/queue/dropped?", "/queue/dropped.json?"),
        auth,
    );
    let file: serde_json::Value = serde_json::from_slice(&body).expect("the drop's JSON");
    assert_eq!(file["count"], 3);
    assert!(String::from_utf8_lossy(&body).contains("SECRET-hd-deep"));
}
