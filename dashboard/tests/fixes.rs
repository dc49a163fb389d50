//! Outside the browser, against a real redis-server with the module and the
//! dashboard binary: the Host check (DNS rebinding), LIMITs within the
//! server's orca.max-pop-count, passwords kept out of pages and the log,
//! Redis down or frozen, and the smaller fixes (payloads shown as stored,
//! binary results, exact config keys, clean refusals).

mod common;

use common::{bearer, csrf_of, form, Dashboard, Redis, TOKEN};
use serde_json::json;

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

#[test]
fn only_allowed_host_names_are_served() {
    let r = Redis::start();
    let victim = r.enqueue(
        "victim",
        json!({"key": "v-1", "response_url": "http://web/cb"}),
    );
    let d = Dashboard::start(&r.url(), &[]);
    let port = d.port;
    let evil = format!("rebind.attacker.example:{port}");

    // A rebound name gets a clear refusal, not the page.
    let (code, page) = d.http_to(&evil, "GET", "/queue?q=victim", &[], "");
    assert_eq!(code, 421, "{page}");
    assert!(page.contains("does not answer to the host name"), "{page}");
    assert!(!page.contains(&victim), "{page}");
    // ... also without a port, on another port, for static files, or with no Host
    for host in [
        "rebind.attacker.example",
        &format!("localhost:{}", port + 1),
        "localhost",
    ] {
        assert_eq!(d.http_to(host, "GET", "/", &[], "").0, 421, "{host}");
    }
    assert_eq!(d.http_to(&evil, "GET", "/static/style.css", &[], "").0, 421);
    assert_eq!(d.http_to("", "GET", "/", &[], "").0, 421);

    // The local names on the listen port are served.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let (code, page) = d.http_to(&host, "GET", "/queue?q=victim", &[], "");
        assert_eq!(code, 200, "{host}: {page}");
    }

    // The attack of the report: the rebound name, a matching Origin and the
    // CSRF token of a page read under that name. Nothing is deleted.
    let (_, page) = d.http("GET", "/queue?q=victim", &[], "");
    let (cookie, token) = csrf_of(&page);
    let body = form(&[("csrf", &token), ("q", "victim"), ("key", &victim)]);
    let origin = format!("http://{evil}");
    let (code, _) = d.http_to(
        &evil,
        "POST",
        "/action/delete",
        &[FORM, ("Origin", &origin), ("Cookie", &cookie)],
        &body,
    );
    assert_eq!(code, 421);
    assert!(r
        .field_str(&["ORCA.STATUS", "victim", &victim], "state")
        .is_some());
    // An allowed Host with another site's Origin: refused too.
    let (code, page) = d.http(
        "POST",
        "/action/delete",
        &[FORM, ("Origin", &origin), ("Cookie", &cookie)],
        &body,
    );
    assert_eq!(code, 403, "{page}");
    // localhost and 127.0.0.1 are different origins.
    let (code, _) = d.http(
        "POST",
        "/action/delete",
        &[
            FORM,
            ("Origin", &format!("http://localhost:{port}")),
            ("Cookie", &cookie),
        ],
        &body,
    );
    assert_eq!(code, 403);
    assert!(r
        .field_str(&["ORCA.STATUS", "victim", &victim], "state")
        .is_some());
    // The same request from the dashboard's own origin works.
    let (code, page) = d.http(
        "POST",
        "/action/delete",
        &[
            FORM,
            ("Origin", &format!("http://127.0.0.1:{port}")),
            ("Cookie", &cookie),
        ],
        &body,
    );
    assert_eq!(code, 303, "{page}");
    assert!(r
        .field_str(&["ORCA.STATUS", "victim", &victim], "state")
        .is_none());
}

#[test]
fn allowed_host_names_are_served_and_their_origin_posts() {
    let r = Redis::start();
    let key = r.enqueue("q1", json!({"key": "k-1"}));
    let d = Dashboard::start(
        &r.url(),
        &[
            "--allowed-host",
            "dash.example.org",
            "--allowed-host",
            "proxy.example.org:8443",
        ],
    );
    let port = d.port;
    assert_eq!(d.http_to("dash.example.org", "GET", "/", &[], "").0, 200);
    assert_eq!(
        d.http_to(&format!("DASH.example.org:{port}"), "GET", "/", &[], "")
            .0,
        200
    );
    assert_eq!(
        d.http_to("proxy.example.org:8443", "GET", "/", &[], "").0,
        200
    );
    assert_eq!(d.http_to("proxy.example.org", "GET", "/", &[], "").0, 421);
    assert_eq!(d.http_to("example.org", "GET", "/", &[], "").0, 421);

    // Through a TLS proxy that passes the Host: Origin https://dash.example.org.
    let (_, page) = d.http_to("dash.example.org", "GET", "/queue?q=q1", &[], "");
    let (cookie, token) = csrf_of(&page);
    let body = form(&[("csrf", &token), ("q", "q1"), ("key", &key)]);
    let (code, _) = d.http_to(
        "dash.example.org",
        "POST",
        "/action/delete",
        &[
            FORM,
            ("Origin", "https://evil.example"),
            ("Cookie", &cookie),
        ],
        &body,
    );
    assert_eq!(code, 403);
    let (code, page) = d.http_to(
        "dash.example.org",
        "POST",
        "/action/delete",
        &[
            FORM,
            ("Origin", "https://dash.example.org"),
            ("Cookie", &cookie),
        ],
        &body,
    );
    assert_eq!(code, 303, "{page}");
    assert_eq!(r.int(&["ORCA.LEN", "q1"]), 0);

    // Bad names are refused at start.
    let out = Dashboard::command(&r.url(), "127.0.0.1:0", &["--allowed-host", "http://x/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allowed-host"), "{err}");
}

#[test]
fn an_oversized_form_is_413() {
    let r = Redis::start();
    let d = Dashboard::start(&r.url(), &[]);
    let big = format!("q=x&key={}", "a".repeat(300 * 1024));
    let (code, page) = d.http("POST", "/action/delete", &[FORM], &big);
    assert_eq!(code, 413, "{page}");
    assert!(page.contains("larger than the dashboard takes"), "{page}");
    // just under the limit: read, then refused for what it says
    let small = format!("csrf=x&q=x&key={}", "a".repeat(200 * 1024));
    assert_eq!(d.http("POST", "/action/delete", &[FORM], &small).0, 403);
}

#[test]
fn redis_passwords_reach_no_page_and_no_log() {
    let r = Redis::start_with(|dir| {
        vec![
            "--unixsocket".into(),
            dir.join("s.sock").display().to_string(),
            "--unixsocketperm".into(),
            "700".into(),
        ]
    });
    r.enqueue("grading", json!({"key": "k-1"}));
    r.cmd(&[
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">SECRET-pw-41",
        "~*",
        "&*",
        "+@all",
    ])
    .unwrap();
    let sock = r.dir().join("s.sock");
    let log_path = r.dir().join("dashboard.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // the form the report found: the password as a query parameter
    let url = format!("redis+unix://{}?pass=SECRET-pw-41&user=bob", sock.display());
    let d = Dashboard::start_logging(&url, &[], log.into(), "debug");
    for path in [
        "/",
        "/queue?q=grading",
        "/queue/stats?q=grading",
        "/queue?q=nope",
    ] {
        let (code, page) = d.http("GET", path, &[], "");
        assert!(code == 200 || code == 404, "{path}: {code}");
        assert!(!page.contains("SECRET"), "{path}: {page}");
        // connected as bob with that password
        if path == "/queue?q=grading" {
            assert!(
                page.contains("pass=***&amp;user=bob") || page.contains("pass=***&#38;user=bob"),
                "{page}"
            );
            assert!(page.contains("data-key="), "{page}");
        }
    }
    drop(d);
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(logged.contains("pass=***"), "{logged}");
    assert!(!logged.contains("SECRET"), "{logged}");
}

/// The positions a jobs table shows, in order.
fn positions(page: &str) -> Vec<u64> {
    page.split("<td class=\"num position\">")
        .skip(1)
        .filter_map(|rest| rest.split('<').next()?.replace(',', "").parse().ok())
        .collect()
}

#[test]
fn listings_stay_within_the_servers_limit() {
    let r = Redis::start();
    let mut c = r.conn();
    let mut p = redis::pipe();
    for i in 0..250 {
        let course = if i % 10 == 3 { "cs1" } else { "cs2" };
        let cfg = json!({"key": format!("k-{i}"), "collation": {"type": "user", "id": (i % 5).to_string()},
                         "metadata_table": {"course": course}});
        p.cmd("ORCA.ENQUEUE")
            .arg("big")
            .arg(cfg.to_string())
            .ignore();
    }
    for i in 0..50 {
        let cfg = json!({"key": format!("s-{i}"), "metadata_table": {"course": "cs1"}});
        p.cmd("ORCA.ENQUEUE")
            .arg("small")
            .arg(cfg.to_string())
            .ignore();
    }
    p.query::<()>(&mut c).unwrap();
    r.cmd(&["CONFIG", "SET", "orca.max-pop-count", "30"])
        .unwrap();
    let expect = |from: u64, to: u64| (from..=to).collect::<Vec<u64>>();

    // A fresh dashboard (limit not yet known), asked for 50 a page, page 2:
    // clamped to 30 a page from the position asked (51 is on page 2 of 30).
    // With a token: the metadata filters below read payloads.
    let d = Dashboard::start(&r.url(), &["--scan-window", "100", "--token", TOKEN]);
    let auth = bearer();
    let auth: &[(&str, &str)] = &[("Authorization", &auth)];
    let (code, page) = d.http("GET", "/queue?q=big&per=50&page=2", auth, "");
    assert_eq!(code, 200, "{page}");
    assert_eq!(positions(&page), expect(31, 60));
    assert!(page.contains("id=\"limit-note\""), "{page}");
    assert!(page.contains("at most 30 jobs per command"), "{page}");
    assert!(
        page.contains("page=3&amp;per=30") || page.contains("page=3&#38;per=30"),
        "{page}"
    );
    // Known now: page sizes over it are clamped at once.
    // (offset 200: page 7 of 30, which starts at 181)
    let (code, page) = d.http("GET", "/queue?q=big&per=200&page=2", auth, "");
    assert_eq!(code, 200, "{page}");
    assert_eq!(positions(&page), expect(181, 210));
    // Page sizes under it are left alone.
    let (_, page) = d.http("GET", "/queue?q=big&per=25&page=2", auth, "");
    assert_eq!(positions(&page), expect(26, 50));
    assert!(!page.contains("limit-note"));

    // Windowed scans (the queue is longer than --scan-window) read in
    // commands of at most 30: a collation, a config key, a metadata filter.
    let (code, page) = d.http("GET", "/queue/find?q=big&collation=user.3", auth, "");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("Scanned positions 1–100 of 250"), "{page}");
    assert_eq!(positions(&page).len(), 20);
    let okey = r
        .field_str(
            &["ORCA.ENQUEUE", "big", &json!({"key": "k-0"}).to_string()],
            "key",
        )
        .unwrap();
    let pos = r
        .field_int(&["ORCA.STATUS", "big", &okey], "position")
        .unwrap();
    let (code, page) = d.http(
        "GET",
        &format!("/queue/find?q=big&key=k-0&from={pos}"),
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    assert_eq!(positions(&page), [pos as u64]);
    let (code, page) = d.http(
        "GET",
        "/queue?q=big&field=course&value=cs1&from=101",
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("Scanned positions 101–200 of 250"), "{page}");
    assert_eq!(positions(&page).len(), 10);
    // ORCA.LIST ... FILTER on a short queue, the other states, dead letters.
    let (code, page) = d.http(
        "GET",
        "/queue?q=small&field=course&value=cs1&per=100",
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    assert_eq!(positions(&page), expect(1, 30));
    for path in [
        "/queue?q=big&state=held&per=100",
        "/queue?q=big&state=running&per=100",
        "/queue/dead?q=big&per=100",
        "/queue/gate?q=big&gate=g&per=100",
    ] {
        let (code, page) = d.http("GET", path, auth, "");
        assert_eq!(code, 200, "{path}: {page}");
        assert!(page.contains("limit-note"), "{path}");
    }

    // A fresh dashboard whose first listing is a state's: learned there too.
    let d = Dashboard::start(&r.url(), &[]);
    let (code, page) = d.http("GET", "/queue/dead?q=big&per=1000", &[], "");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("at most 30 jobs"), "{page}");
}

#[test]
fn redis_down_or_frozen_fails_fast_and_a_restart_is_picked_up() {
    use std::time::{Duration, Instant};
    let mut r = Redis::start();
    for i in 0..10 {
        r.enqueue(&format!("q{i}"), json!({"key": "k"}));
    }
    // no sampler in between: the pages alone meet the lost connection
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1", "--sample-interval", "3600"]);
    let (code, page) = d.http("GET", "/", &[], "");
    assert_eq!(code, 200, "{page}");
    assert_eq!(page.matches("data-queue=").count(), 10);

    // Frozen: one reply timeout, then the 503 page (not one timeout per queue).
    std::thread::sleep(Duration::from_millis(1100)); // the stats cache expires
    let kill = |sig: &str| {
        assert!(std::process::Command::new("kill")
            .args([sig, &r.pid().to_string()])
            .status()
            .unwrap()
            .success());
    };
    kill("-STOP");
    for path in ["/", "/queue?q=q1"] {
        let t = Instant::now();
        let (code, page) = d.http("GET", path, &[], "");
        let took = t.elapsed();
        assert_eq!(code, 503, "{path}: {page}");
        assert!(page.contains("Redis is unavailable"), "{path}: {page}");
        assert!(took < Duration::from_secs(12), "{path}: {took:?}");
    }
    kill("-CONT");

    // Shut down: 503 at once, on the overview too (was 200 with a stale list).
    r.stop();
    for path in ["/", "/queue?q=q1", "/queue/stats?q=q2"] {
        let t = Instant::now();
        let (code, page) = d.http("GET", path, &[], "");
        assert_eq!(code, 503, "{path}: {page}");
        assert!(page.contains("Redis is unavailable"), "{path}: {page}");
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "{path}: {:?}",
            t.elapsed()
        );
    }

    // Back: the very first request is served (on a fresh connection), not
    // refused for the connection attempt that failed while Redis was down.
    // (past any reconnection attempt the last request started)
    std::thread::sleep(Duration::from_secs(3));
    r.restart();
    let (code, page) = d.http("GET", "/queue?q=q1", &[], "");
    assert_eq!(code, 404, "{page}"); // nothing was saved
    r.enqueue("q1", json!({"key": "after"}));
    let (code, page) = d.http("GET", "/queue?q=q1", &[], "");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("data-key="), "{page}");
}

#[test]
fn payloads_results_keys_and_gates_are_shown_as_stored() {
    let r = Redis::start();
    r.cmd(&["SET", "notaqueue", "x"]).unwrap();
    // a payload with a number no f64 holds and keys out of order
    let stored = r#"{"key":"big-1","z":12345678901234567890123,"a":1.50,"m":{"y":1,"b":2}}"#;
    let big = r
        .field_str(&["ORCA.ENQUEUE", "misc", stored], "key")
        .unwrap();
    // a config key with spaces around it
    let spaced = r
        .field_str(
            &[
                "ORCA.ENQUEUE",
                "misc",
                r#"{"key":" sp-key ","response_url":" http://web/cb "}"#,
            ],
            "key",
        )
        .unwrap();
    r.enqueue(
        "misc",
        json!({"key": "sp-key", "response_url": "http://web/cb"}),
    );
    // With a token: payloads and results are shown to its holders only.
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1", "--token", TOKEN]);
    let auth = bearer();
    let auth: &[(&str, &str)] = &[("Authorization", &auth)];

    // 5: the payload exactly as stored, only re-indented
    let (code, page) = d.http(
        "GET",
        &format!("/job?q=misc&key={}", common::enc(&big)),
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    let payload = page
        .split("<pre id=\"payload\">")
        .nth(1)
        .unwrap()
        .split("</pre>")
        .next()
        .unwrap();
    assert_eq!(
        payload,
        "{\n  &#34;key&#34;: &#34;big-1&#34;,\n  &#34;z&#34;: 12345678901234567890123,\n  &#34;a&#34;: 1.50,\n  &#34;m&#34;: {\n    &#34;y&#34;: 1,\n    &#34;b&#34;: 2\n  }\n}"
    );

    // 6: config key and response_url taken exactly as typed
    let (code, page) = d.http(
        "GET",
        &format!(
            "/queue/find?q=misc&key={}&response_url={}",
            common::enc(" sp-key "),
            common::enc(" http://web/cb ")
        ),
        auth,
        "",
    );
    assert_eq!(code, 303, "{page}");
    assert!(
        page.contains(&format!("key={}", common::enc(&spaced))),
        "{page}"
    );
    let (code, page) = d.http(
        "GET",
        &format!("/queue/find?q=misc&key={}", common::enc(" sp-key ")),
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    assert_eq!(page.matches("data-key=").count(), 1, "{page}");
    assert!(page.contains(&format!("data-key=\"{spaced}\"")), "{page}");

    // 9: a binary result: hex, base64, its length, and no NUL in the page
    let key = r
        .field_str(&["ORCA.POP", "misc", "LEASE", "60000"], "key")
        .unwrap();
    let lease = r
        .field_str(&["ORCA.STATUS", "misc", &key], "lease")
        .unwrap();
    let mut c = r.conn();
    redis::cmd("ORCA.ACK")
        .arg("misc")
        .arg(&key)
        .arg(&lease)
        .arg("RESULT")
        .arg(&b"\xff\xfe\x00"[..])
        .query::<redis::Value>(&mut c)
        .unwrap();
    let (code, page) = d.http(
        "GET",
        &format!("/job?q=misc&key={}", common::enc(&key)),
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    assert!(!page.contains('\0'));
    assert!(page.contains("<pre id=\"result\">ff fe 00</pre>"), "{page}");
    assert!(
        page.contains("<pre id=\"result-base64\">//4A</pre>"),
        "{page}"
    );
    assert!(page.contains("3 bytes, not UTF-8 text"), "{page}");

    // 8: a valid gate name holding U+FFFD is listed and acted on
    let gate = "rep\u{fffd}";
    assert_eq!(r.int(&["ORCA.GATE", "misc", gate, "CLOSE"]), 1);
    let mut c = r.conn();
    redis::cmd("ORCA.GATE")
        .arg("misc")
        .arg(&b"bad\xff"[..])
        .arg("CLOSE")
        .query::<i64>(&mut c)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100)); // the cached stats expire
    let (_, page) = d.http("GET", "/queue/gates?q=misc", auth, "");
    assert_eq!(
        page.matches("not UTF-8: use redis-cli").count(),
        1,
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "href=\"/queue/gate?q=misc&amp;gate={}\"",
            common::enc(gate)
        )) || page.contains(&format!(
            "href=\"/queue/gate?q=misc&#38;gate={}\"",
            common::enc(gate)
        )),
        "{page}"
    );
    let (code, page) = d.http(
        "GET",
        &format!("/queue/gate?q=misc&gate={}", common::enc(gate)),
        auth,
        "",
    );
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("id=\"open-gate\""), "{page}");
    let (cookie, token) = csrf_of(&page);
    let (code, _) = d.http(
        "POST",
        "/action/gate",
        &[FORM, ("Cookie", &cookie), auth[0]],
        &form(&[
            ("csrf", &token),
            ("q", "misc"),
            ("gate", gate),
            ("op", "open"),
        ]),
    );
    assert_eq!(code, 303);
    assert_eq!(r.map_field(&["ORCA.STATS", "misc"], "gates").len(), 1); // only bad\xff is left

    // 7, 10: actions on a string key or a missing queue: the clean pages
    for (path, body, status, text) in [
        (
            "/action/delete",
            vec![("q", "notaqueue"), ("key", big.as_str())],
            400,
            "is a Redis string, not an Orca queue",
        ),
        (
            "/action/move",
            vec![("q", "notaqueue"), ("key", big.as_str()), ("to", "front")],
            400,
            "is a Redis string, not an Orca queue",
        ),
        (
            "/action/purge",
            vec![("q", "nope"), ("confirm", "yes")],
            404,
            "no queue named",
        ),
        (
            "/action/purge",
            vec![("q", "notaqueue"), ("confirm", "yes")],
            400,
            "is a Redis string",
        ),
        (
            "/action/requeue",
            vec![("q", "nope"), ("key", big.as_str())],
            404,
            "no queue named",
        ),
    ] {
        let mut pairs = vec![("csrf", token.as_str())];
        pairs.extend(body);
        let (code, page) = d.http(
            "POST",
            path,
            &[FORM, ("Cookie", &cookie), auth[0]],
            &form(&pairs),
        );
        assert_eq!(code, status, "{path}: {page}");
        assert!(page.contains(text), "{path}: {page}");
        assert!(!page.contains("None"), "{path}: {page}");
    }
    assert_eq!(r.int(&["EXISTS", "nope"]), 0);
}

/// The module's refusals are told apart by their code (docs/commands.md,
/// "Error codes"), never by their text: NOJOB is a 404, every other
/// condition a 409 showing the server's text without its code (TOOMANY,
/// the other code the dashboard reads, is in
/// `listings_stay_within_the_servers_limit`).
#[test]
fn module_refusals_are_told_by_their_code() {
    let r = Redis::start();
    let gone = r.enqueue("codes", json!({"key": "gone", "response_url": "u"}));
    r.cmd(&["ORCA.DELETE", "codes", &gone]).unwrap();
    let running = r.enqueue("codes", json!({"key": "run", "response_url": "u"}));
    r.cmd(&["ORCA.POP", "codes", "LEASE", "600000"]).unwrap();
    r.enqueue("codes", json!({"key": "waits", "response_url": "u"})); // a page with forms
    let d = Dashboard::start(&r.url(), &[]);
    let (_, page) = d.http("GET", "/queue?q=codes", &[], "");
    let (cookie, token) = csrf_of(&page);
    for (key, status, text) in [
        (&gone, 404, "no such job"),
        (&running, 409, "job is running (leased to a worker)"),
    ] {
        let (code, page) = d.http(
            "POST",
            "/action/move",
            &[FORM, ("Cookie", &cookie)],
            &form(&[
                ("csrf", &token),
                ("q", "codes"),
                ("key", key),
                ("to", "front"),
            ]),
        );
        assert_eq!(code, status, "{page}");
        assert!(page.contains(text), "{page}");
        assert!(
            !page.contains("NOJOB") && !page.contains("LEASED"),
            "{page}"
        );
    }
    // A requeue of a job that is not dead: NOJOB too.
    let (code, page) = d.http(
        "POST",
        "/action/requeue",
        &[FORM, ("Cookie", &cookie)],
        &form(&[("csrf", &token), ("q", "codes"), ("key", &running)]),
    );
    assert_eq!(code, 404, "{page}");
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "codes", &running], "state")
            .as_deref(),
        Some("leased")
    );
}
