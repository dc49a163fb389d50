//! The dashboard in a real browser: headless Chromium (Debian's package)
//! through chromedriver, against a real redis-server with the module.
//! Each test starts its own servers; screenshots of every page go to
//! target/dashboard-screenshots/ (or ORCA_SCREENSHOT_DIR).

mod common;

use common::{enc, Browser, Dashboard, Redis, TOKEN};
use serde_json::json;

fn config(key: &str, user: u32, course: &str) -> serde_json::Value {
    json!({
        "key": key,
        "response_url": "http://web/cb",
        "collation": {"type": "user", "id": user.to_string()},
        "metadata_table": {"course": course, "assignment": "hw1"},
        "script": [{"cmd": "make test"}],
    })
}

/// grading: 12 jobs of 3 users in two courses, one running, one dead, one
/// finished with a kept result; other: 2 jobs.
fn fill(r: &Redis) {
    for i in 1..=15 {
        let course = if i % 2 == 0 { "cs2500" } else { "cs3500" };
        r.enqueue("grading", config(&format!("sub-{i}"), i % 3, course));
    }
    r.enqueue("other", json!({"key": "o-1"}));
    r.enqueue("other", json!({"key": "o-2", "priority": 60000}));
    r.cmd(&["CONFIG", "SET", "orca.max-attempts", "1"]).unwrap();
    // three pops: one stays running, one fails (dead), one finishes with a result
    for outcome in ["run", "nack", "ack"] {
        let key = r
            .field_str(&["ORCA.POP", "grading", "LEASE", "600000"], "key")
            .unwrap();
        let lease = r
            .field_str(&["ORCA.STATUS", "grading", &key], "lease")
            .unwrap();
        match outcome {
            "nack" => {
                r.cmd(&["ORCA.NACK", "grading", &key, &lease]).unwrap();
            }
            "ack" => {
                r.cmd(&[
                    "ORCA.ACK",
                    "grading",
                    &key,
                    &lease,
                    "RESULT",
                    r#"{"score":97}"#,
                ])
                .unwrap();
            }
            _ => {}
        }
    }
}

fn orca_key(key: &str, url: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(key.as_bytes());
    h.update(url.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

#[tokio::test]
async fn pages_show_the_queues() {
    let r = Redis::start();
    fill(&r);
    // With a token: payloads and results are shown to its holders only.
    let d = Dashboard::start(&r.url(), &["--token", TOKEN]);
    let b = Browser::start().await;
    b.login(&d).await;

    // Overview: both queues, counts by state from ORCA.STATS.
    b.goto(&d.url("/")).await;
    b.wait_for("#queues").await;
    let names = b.attrs("#queues tbody tr", "data-queue").await;
    assert_eq!(names, ["grading", "other"]);
    assert_eq!(b.text("tr[data-queue=grading] td.queued").await, "12");
    assert_eq!(b.text("tr[data-queue=grading] td.leased").await, "1");
    assert_eq!(b.text("tr[data-queue=grading] td.dead").await, "1");
    assert_eq!(b.text("tr[data-queue=other] td.queued").await, "2");
    assert_eq!(b.count("tr[data-queue=grading] svg.plot").await, 1);

    // A queue: the jobs in pop order with their positions.
    b.click_to("tr[data-queue=grading] a", "#jobs").await;
    assert_eq!(b.text("#queue-name").await, "grading");
    assert_eq!(b.text("#count-queued b").await, "12");
    let keys = b.attrs("#jobs tbody tr", "data-key").await;
    assert_eq!(keys, r.order("grading"));
    let positions = b.texts("#jobs td.position").await;
    assert_eq!(
        positions,
        (1..=12).map(|i| i.to_string()).collect::<Vec<_>>()
    );
    b.screenshot("queue").await;

    // Paging: page 2 of 5 per page starts at position 6.
    b.goto(&d.url("/queue?q=grading&per=5&page=2")).await;
    assert_eq!(
        b.texts("#jobs td.position").await,
        ["6", "7", "8", "9", "10"]
    );
    assert!(b.text("#pager").await.contains("page 2 of 3"));
    b.click_to("#next", "#jobs").await;
    assert_eq!(b.texts("#jobs td.position").await, ["11", "12"]);

    // Filter by metadata field: ORCA.LIST ... FILTER course cs2500.
    b.goto(&d.url("/queue?q=grading")).await;
    b.submit_to(
        "#filter",
        &[("field", "course"), ("value", "cs2500")],
        "#jobs",
    )
    .await;
    let filtered = b.attrs("#jobs tbody tr", "data-key").await;
    let expected: Vec<String> = r
        .order("grading")
        .into_iter()
        .filter(|k| {
            r.field_str(&["ORCA.STATUS", "grading", k], "payload")
                .unwrap()
                .contains("cs2500")
        })
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(filtered, expected);
    b.screenshot("queue-filter").await;

    // Find by orca key: straight to the job page, payload pretty-printed.
    let first = r.order("grading")[0].clone();
    b.goto(&d.url("/queue/find?q=grading")).await;
    b.submit_to("#search", &[("key", &first)], "#job-state")
        .await;
    assert!(b.path().await.starts_with("/job?"));
    assert_eq!(b.text("#job-key").await, first);
    assert_eq!(b.text("#job-state").await, "queued");
    assert_eq!(b.text("#job-position").await, "1");
    let payload = b.text("#payload").await;
    assert!(payload.contains("\"metadata_table\": {"), "{payload}");
    assert!(payload.contains("\n  \"key\": \"sub-"), "{payload}");
    b.screenshot("job").await;

    // Find by config key + response_url (any state): the running job.
    let running: Vec<String> = (1..=15)
        .map(|i| format!("sub-{i}"))
        .filter(|k| {
            r.field_str(
                &["ORCA.STATUS", "grading", &orca_key(k, "http://web/cb")],
                "state",
            )
            .as_deref()
                == Some("leased")
        })
        .collect();
    assert_eq!(running.len(), 1);
    b.goto(&d.url("/queue/find?q=grading")).await;
    assert_eq!(
        b.submit_to(
            "#search",
            &[("key", &running[0]), ("response_url", "http://web/cb")],
            "#job-state"
        )
        .await,
        "leased"
    );
    let lease_row = b.text("#leases tbody").await;
    assert!(lease_row.contains("UTC"), "deadline shown: {lease_row}");
    assert!(b.text("#job-fields").await.contains("deadline"));
    b.screenshot("job-running").await;

    // Find by config key alone: a window scan of the queued jobs.
    let queued_key = r
        .field_str(&["ORCA.STATUS", "grading", &first], "payload")
        .unwrap();
    let cfg: serde_json::Value = serde_json::from_str(&queued_key).unwrap();
    let cfg_key = cfg["key"].as_str().unwrap().to_string();
    b.goto(&d.url(&format!("/queue/find?q=grading&key={cfg_key}")))
        .await;
    b.wait_for("#jobs").await;
    assert_eq!(
        b.attrs("#jobs tbody tr", "data-key").await,
        vec![first.clone()]
    );
    assert!(b
        .text("#scanned")
        .await
        .contains("Scanned positions 1–12 of 12"));

    // Per-collation view: every queued job of user.1, with its places.
    b.goto(&d.url("/queue?q=grading")).await;
    b.click_to("#jobs a[href*='collation=user.1']", "#jobs")
        .await;
    let mine = b.attrs("#jobs tbody tr", "data-key").await;
    let expected: Vec<String> = r
        .order("grading")
        .into_iter()
        .filter(|k| {
            r.field_str(&["ORCA.STATUS", "grading", k], "collation")
                .as_deref()
                == Some("user.1")
        })
        .collect();
    assert_eq!(mine, expected);
    b.screenshot("collation").await;

    // Dead letters: reason and attempts.
    b.goto(&d.url("/queue/dead?q=grading")).await;
    b.wait_for("#dead").await;
    assert_eq!(b.texts("#dead td.cause").await, ["failed"]);
    assert_eq!(b.texts("#dead td.attempts").await, ["1"]);
    b.screenshot("dead").await;

    // A finished job: its kept result.
    let dead_key = b.attrs("#dead tbody tr", "data-key").await.remove(0);
    let finished = (1..=15)
        .map(|i| orca_key(&format!("sub-{i}"), "http://web/cb"))
        .find(|k| r.cmd(&["ORCA.RESULT", "grading", k]).unwrap() != redis::Value::Nil)
        .expect("a kept result");
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&finished))))
        .await;
    assert_eq!(b.wait_for("#job-state").await, "finished");
    assert!(b.text("#result").await.contains("\"score\": 97"));
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&dead_key))))
        .await;
    assert_eq!(b.wait_for("#job-state").await, "dead");
    assert!(b.text("#job-fields").await.contains("cause"));

    // Stats: every field of ORCA.STATS, wait times included.
    b.goto(&d.url("/queue/stats?q=grading")).await;
    let stats = b.wait_for("#stats").await;
    for f in [
        "queued",
        "leased",
        "dead",
        "order",
        "wait_all.avg",
        "wait_all.max",
        "wait_released.count",
    ] {
        assert!(stats.contains(f), "stats lack {f}: {stats}");
    }
    b.screenshot("stats").await;

    // Settings: the queue's and the module's.
    b.goto(&d.url("/queue/settings?q=grading")).await;
    b.wait_for("#queue-settings").await;
    assert_eq!(
        b.text("#queue-settings tr[data-field=order] .value").await,
        "lifo"
    );
    assert_eq!(
        b.text("#module-settings tr[data-field='orca.max-attempts'] .value")
            .await,
        "1"
    );
    b.screenshot("settings").await;

    // By now the sampler (every second) has drawn the plots.
    b.goto(&d.url("/")).await;
    b.wait_for("#queues").await;
    assert_eq!(b.count("tr[data-queue=grading] svg.plot polyline").await, 2);
    b.screenshot("overview").await;
    b.close().await;
}

#[tokio::test]
async fn actions_change_the_queue_and_need_the_csrf_token() {
    let r = Redis::start();
    fill(&r);
    let d = Dashboard::start(&r.url(), &[]);
    let b = Browser::start().await;
    let len = r.int(&["ORCA.LEN", "grading"]);
    let status = |k: &str, f: &str| r.field_int(&["ORCA.STATUS", "grading", k], f);

    // Move to back, then to front, from the job page.
    let first = r.order("grading")[0].clone();
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&first))))
        .await;
    b.wait_for("#move-back").await;
    assert!(b
        .click_to("#move-back", "#notice")
        .await
        .contains("back of the queue"));
    assert_eq!(status(&first, "position"), Some(len));
    assert_eq!(b.text("#job-position").await, len.to_string());
    assert!(b
        .click_to("#move-front", "#notice")
        .await
        .contains("front of the queue"));
    assert_eq!(status(&first, "position"), Some(1));
    assert_eq!(status(&first, "immediate"), Some(1));
    // released jobs are immediate: no more move buttons
    assert_eq!(b.count("#move-front").await, 0);
    b.screenshot("job-after-move").await;

    // An action the module refuses shows its error: moving a released job.
    b.goto(&d.url("/queue?q=grading")).await;
    b.wait_for("#jobs").await;
    let msg = b
        .script_to(
            "const f = document.querySelector('form[action=\"/action/move\"]'); \
             f.querySelector('input[name=key]').value = arguments[0]; f.submit(); return 1;",
            vec![json!(first)],
            "#error",
        )
        .await;
    assert!(msg.contains("immediate jobs cannot be moved"), "{msg}");

    // Move to back from a listing row: the page comes back with the notice.
    let second = r.order("grading")[1].clone();
    b.goto(&d.url("/queue?q=grading&per=5")).await;
    assert!(b
        .click_to(
            &format!("tr[data-key='{second}'] button[title^='ORCA.MOVE … DELAY']"),
            "#notice"
        )
        .await
        .contains("back of the queue"));
    assert!(b.path().await.contains("per=5"));
    assert_eq!(status(&second, "position"), Some(len));

    // Delete a running job: its lease is cancelled, the job is gone.
    let running = (1..=15)
        .map(|i| orca_key(&format!("sub-{i}"), "http://web/cb"))
        .find(|k| {
            r.field_str(&["ORCA.STATUS", "grading", k], "state")
                .as_deref()
                == Some("leased")
        })
        .unwrap();
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&running))))
        .await;
    assert!(b.click_to("#delete", "#notice").await.contains("Deleted"));
    assert_eq!(b.path().await, "/queue?q=grading&done=deleted");
    assert_eq!(
        r.cmd(&["ORCA.STATUS", "grading", &running]).unwrap(),
        redis::Value::Nil
    );

    // Requeue the dead letter.
    b.goto(&d.url("/queue/dead?q=grading")).await;
    let dead = b.attrs("#dead tbody tr", "data-key").await.remove(0);
    assert!(b
        .click_to("#dead button[title^='ORCA.DEAD']", "#notice")
        .await
        .contains("Requeued"));
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "grading", &dead], "state")
            .as_deref(),
        Some("queued")
    );
    assert_eq!(b.count("#dead").await, 0);

    // Purge: refused without the confirmation box, done with it.
    let k = r
        .field_str(&["ORCA.POP", "grading", "LEASE", "600000"], "key")
        .unwrap();
    let lease = r
        .field_str(&["ORCA.STATUS", "grading", &k], "lease")
        .unwrap();
    r.cmd(&["ORCA.NACK", "grading", &k, &lease]).unwrap();
    b.goto(&d.url("/queue/dead?q=grading")).await;
    assert!(b
        .click_to("#purge button", "#error")
        .await
        .contains("tick the confirmation box"));
    assert_eq!(r.field_int(&["ORCA.STATS", "grading"], "dead"), Some(1));
    b.goto(&d.url("/queue/dead?q=grading")).await;
    b.click("#purge-confirm").await;
    assert_eq!(
        b.click_to("#purge button", "#notice").await,
        "Purged 1 dead letters."
    );
    assert_eq!(r.field_int(&["ORCA.STATS", "grading"], "dead"), Some(0));

    // CSRF: a form whose token was tampered with is refused, nothing changes.
    let victim = r.order("grading")[2].clone();
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&victim))))
        .await;
    b.wait_for("#delete").await;
    b.forge_csrf().await;
    assert!(b.click_to("#delete", "#error").await.contains("CSRF token"));
    b.screenshot("csrf-refused").await;
    assert!(r
        .field_str(&["ORCA.STATUS", "grading", &victim], "state")
        .is_some());
    // ... and a POST from outside the browser (no CSRF cookie) too.
    let body = format!("csrf=x&q=grading&key={}", enc(&victim));
    let (code, _) = d.http(
        "POST",
        "/action/delete",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &body,
    );
    assert_eq!(code, 403);
    // ... and a POST announcing another origin.
    let (code, page) = d.http(
        "POST",
        "/action/delete",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", "http://evil.example"),
        ],
        &body,
    );
    assert_eq!(code, 403);
    assert!(page.contains("Cross-site request refused"));
    assert!(r
        .field_str(&["ORCA.STATUS", "grading", &victim], "state")
        .is_some());

    b.close().await;
}

#[tokio::test]
async fn a_token_protects_the_dashboard() {
    let r = Redis::start();
    fill(&r);
    let token = "correct-horse-battery-staple";
    let d = Dashboard::start(&r.url(), &["--token", token]);
    let b = Browser::start().await;

    // Pages lead to the login form; a wrong token is refused.
    b.goto(&d.url("/queue?q=grading")).await;
    b.wait_for("#token").await;
    assert!(b.path().await.starts_with("/login?next="));
    b.screenshot("login").await;
    assert_eq!(
        b.submit_to(
            "form[action='/login']",
            &[("token", "wrong-token-wrong-token")],
            "#error"
        )
        .await,
        "Wrong token."
    );

    // The right token leads back to the page asked for.
    b.submit_to("form[action='/login']", &[("token", token)], "#jobs")
        .await;
    assert_eq!(b.path().await, "/queue?q=grading");

    // Outside the browser: refused without the token, served with it.
    let (code, _) = d.http("GET", "/", &[], "");
    assert_eq!(code, 303);
    let (code, _) = d.http("POST", "/action/purge", &[], "");
    assert_eq!(code, 401);
    let (code, page) = d.http(
        "GET",
        "/queue?q=grading",
        &[("Authorization", &format!("Bearer {token}"))],
        "",
    );
    assert_eq!(code, 200);
    assert!(page.contains("id=\"jobs\""));
    let (code, _) = d.http(
        "GET",
        "/",
        &[("Authorization", "Bearer wrong-token-wrong-token")],
        "",
    );
    assert_eq!(code, 303);
    let (code, _) = d.http("GET", "/", &[("Cookie", "orca_session=forged")], "");
    assert_eq!(code, 303);

    // Logging out ends the session.
    b.click_to("header form[action='/logout'] button", "#token")
        .await;
    b.goto(&d.url("/")).await;
    b.wait_for("#token").await;
    b.close().await;

    // A non-loopback listen without a token: refused before binding.
    let out = Dashboard::command(&r.url(), "0.0.0.0:0", &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without --token"), "{err}");
    let out = Dashboard::command(&r.url(), "0.0.0.0:0", &["--token", "short"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn read_only_mode_works_with_a_read_only_acl_user() {
    let r = Redis::start();
    fill(&r);
    // a gate holding a job, and a running cap
    assert_eq!(r.int(&["ORCA.GATE", "grading", "img", "CLOSE"]), 1);
    let held = r.enqueue("grading", json!({"key": "held-1", "gate": "img"}));
    r.cmd(&["ORCA.SETTINGS", "grading", "MAXRUNNING", "2"])
        .unwrap();
    r.cmd(&[
        "ACL",
        "SETUSER",
        "viewer",
        "on",
        ">viewer-secret",
        "resetkeys",
        "~*",
        "resetchannels",
        "-@all",
        "+orca.list",
        "+orca.status",
        "+orca.stats",
        "+orca.len",
        "+orca.result",
        "+scan",
        "+type",
        "+time",
    ])
    .unwrap();
    let url = format!("redis://viewer:viewer-secret@127.0.0.1:{}", r.port);
    let d = Dashboard::start(&url, &["--read-only"]);
    let b = Browser::start().await;

    b.goto(&d.url("/")).await;
    b.wait_for("#queues").await;
    assert_eq!(b.text("#mode").await, "read-only");
    assert_eq!(b.text("tr[data-queue=grading] td.queued").await, "12");
    // the password never shows
    assert_eq!(
        b.text(".redis").await,
        format!("redis://viewer:***@127.0.0.1:{}", r.port)
    );
    assert!(!b.client.source().await.unwrap().contains("viewer-secret"));
    b.screenshot("read-only-overview").await;

    // Every page reads; no page offers an action.
    let first = r.order("grading")[0].clone();
    for path in [
        "/queue?q=grading".to_string(),
        "/queue?q=grading&state=held".to_string(),
        "/queue?q=grading&state=running".to_string(),
        "/queue?q=grading&state=delayed".to_string(),
        "/queue/find?q=grading&collation=user.1".to_string(),
        "/queue/gates?q=grading".to_string(),
        "/queue/gate?q=grading&gate=img".to_string(),
        "/queue/stats?q=grading".to_string(),
        "/queue/settings?q=grading".to_string(),
        "/queue/dead?q=grading".to_string(),
        format!("/job?q=grading&key={}", enc(&first)),
        format!("/job?q=grading&key={}", enc(&held)),
    ] {
        b.goto(&d.url(&path)).await;
        b.wait_for("main").await;
        assert_eq!(b.count("#error").await, 0, "{path}: {}", b.body().await);
        assert_eq!(
            b.count("form[method=post]").await,
            0,
            "{path} offers an action"
        );
        assert_eq!(
            b.count("#unreadable, #queue-settings-note, #cap-note")
                .await,
            0,
            "{path}: {}",
            b.body().await
        );
    }
    b.goto(&d.url("/queue?q=grading")).await;
    assert_eq!(b.texts("#jobs td.position").await.len(), 12);
    b.screenshot("read-only-queue").await;
    // The read commands show everything: dead letters (ORCA.LIST ... STATE
    // DEAD), gates and held jobs, settings (ORCA.STATS), running jobs.
    b.goto(&d.url("/queue/dead?q=grading")).await;
    b.wait_for("#dead").await;
    assert_eq!(b.texts("#dead td.cause").await, ["failed"]);
    b.goto(&d.url("/queue/gates?q=grading")).await;
    assert_eq!(b.wait_for("#gates tr[data-gate=img] td.held").await, "1");
    b.goto(&d.url("/queue/gate?q=grading&gate=img")).await;
    assert_eq!(b.wait_for("#gate-held").await, "1");
    assert_eq!(b.attrs("#jobs tbody tr", "data-key").await, [held]);
    b.goto(&d.url("/queue?q=grading&state=running")).await;
    assert_eq!(b.wait_for("#running td.count").await, "1");
    b.goto(&d.url("/queue/settings?q=grading")).await;
    assert!(b.wait_for("#settings-source").await.contains("ORCA.STATS"));
    assert_eq!(
        b.text("#queue-settings tr[data-field=order] .value").await,
        "lifo"
    );
    assert_eq!(
        b.text("#queue-settings tr[data-field=maxrunning] .value")
            .await,
        "2"
    );
    assert_eq!(b.count("#settings-form, #set-order").await, 0);
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&first))))
        .await;
    assert_eq!(b.wait_for("#job-state").await, "queued");

    // A POST is refused even when a form is forged in the page.
    let msg = b
        .script_to(
            "const f = document.createElement('form'); f.method = 'post'; f.action = '/action/delete'; \
             for (const [k, v] of [['q', 'grading'], ['key', arguments[0]], ['csrf', 'x']]) { \
               const i = document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); } \
             document.body.appendChild(f); f.submit(); return 1;",
            vec![json!(first)],
            "#error",
        )
        .await;
    assert!(msg.contains("read-only"), "{msg}");
    for (path, body) in [
        ("/action/purge", "q=grading&confirm=yes"),
        ("/action/gate", "q=grading&gate=img&op=drop&confirm=yes"),
        ("/action/gate", "q=grading&gate=img&op=open"),
        ("/action/settings", "q=grading&maxrunning=0"),
    ] {
        let (code, _) = d.http(
            "POST",
            path,
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body,
        );
        assert_eq!(code, 403, "{path}");
    }
    assert_eq!(r.field_int(&["ORCA.STATS", "grading"], "held"), Some(1));
    assert_eq!(
        r.field_int(&["ORCA.SETTINGS", "grading"], "maxrunning"),
        Some(2)
    );
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "grading", &first], "state")
            .as_deref(),
        Some("queued")
    );
    assert_eq!(r.field_int(&["ORCA.STATS", "grading"], "dead"), Some(1));
    b.close().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_page() {
    let r = Redis::start();
    fill(&r);
    r.cmd(&["SET", "plain", "x"]).unwrap();
    let mut d = Dashboard::start(&r.url(), &[]);
    let b = Browser::start().await;
    let cases: [(&str, &str); 12] = [
        ("/queue?q=nope", "no queue named “nope”"),
        ("/queue?q=plain", "is a Redis string, not an Orca queue"),
        ("/queue", "Which queue?"),
        (
            "/queue?q=grading&page=99999999999999999999999999",
            "out of range",
        ),
        ("/queue?q=grading&page=-3", "whole number"),
        ("/queue?q=grading&per=abc", "whole number"),
        ("/queue?q=grading&per=100000", "out of range"),
        ("/queue?q=grading&page=%FF%FE", "whole number"),
        (
            "/job?q=grading&key=not-a-key",
            "No job with orca key not-a-key",
        ),
        ("/job?q=grading", "Which job?"),
        ("/queue?q=grading&value=x", "needs a metadata field"),
        ("/no/such/page", "No such page"),
    ];
    for (path, expect) in cases {
        b.goto(&d.url(path)).await;
        let msg = b.wait_for("#error").await;
        assert!(msg.contains(expect), "{path}: {msg}");
    }
    b.goto(&d.url("/queue?q=nope")).await;
    b.screenshot("error").await;
    // A page number past the end is a page that says so.
    b.goto(&d.url("/queue?q=grading&page=1099511627776")).await;
    assert!(b.wait_for("#past-end").await.contains("past the end"));
    // Huge scans start past the end.
    b.goto(&d.url("/queue/find?q=grading&key=x&from=1099511627776"))
        .await;
    assert!(b.wait_for("#scanned").await.contains("past the end"));
    // Names that need escaping work end to end.
    let odd = "odd / name?&#%é";
    r.enqueue(odd, json!({"key": "<script>alert(1)</script>"}));
    b.goto(&d.url(&format!("/queue?q={}", enc(odd)))).await;
    assert_eq!(b.wait_for("#queue-name").await, odd);
    assert_eq!(
        b.text("#jobs td.config-key").await,
        "<script>alert(1)</script>"
    );
    // Raw requests: wrong methods, junk forms, oversized bodies.
    let (code, _) = d.http("GET", "/action/move", &[], "");
    assert_eq!(code, 405);
    let (code, page) = d.http(
        "POST",
        "/action/move",
        &[("Content-Type", "text/plain")],
        "junk",
    );
    assert_eq!(code, 400, "{page}");
    let big = "a".repeat(1 << 20);
    let (code, _) = d.http(
        "POST",
        "/action/move",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &big,
    );
    assert_eq!(code, 413);
    assert!(d.alive());
    assert_eq!(d.http("GET", "/healthz", &[], "").0, 200);
    b.close().await;
}

#[tokio::test]
async fn redis_down_is_a_clear_page() {
    let port = common::free_port();
    let mut d = Dashboard::start(&format!("redis://127.0.0.1:{port}"), &[]);
    let (code, page) = d.http("GET", "/queue?q=grading", &[], "");
    assert_eq!(code, 503, "{page}");
    assert!(page.contains("Redis is unavailable"));
    // the overview too (it was a 200 with a stale or empty list)
    let (code, page) = d.http("GET", "/", &[], "");
    assert_eq!(code, 503, "{page}");
    assert!(page.contains("Redis is unavailable"));
    assert!(d.alive());
}

#[tokio::test]
async fn long_queues_are_filtered_and_searched_by_windows() {
    let r = Redis::start();
    let mut c = r.conn();
    let mut p = redis::pipe();
    for i in 0..250 {
        let course = if i == 201 { "rare" } else { "common" };
        let cfg = json!({"key": format!("k-{i}"), "collation": {"type": "team", "id": (i % 50).to_string()},
                         "metadata_table": {"course": course, "tags": ["a", course]}});
        p.cmd("ORCA.ENQUEUE")
            .arg("long")
            .arg(cfg.to_string())
            .ignore();
    }
    p.query::<()>(&mut c).unwrap();
    // Filtering by metadata reads payloads: a token's holders only.
    let d = Dashboard::start(&r.url(), &["--scan-window", "100", "--token", TOKEN]);
    let b = Browser::start().await;
    b.login(&d).await;

    // Longer than the window: the filter scans windows of 100 positions,
    // and finds what the module's own FILTER finds, at the same position.
    let pos = r
        .field_int(&["ORCA.STATUS", "long", &orca_key("k-201", "")], "position")
        .unwrap();
    let filtered = match r
        .cmd(&["ORCA.LIST", "long", "FILTER", "tags", "rare"])
        .unwrap()
    {
        redis::Value::Array(jobs) => jobs.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!(filtered, 1);
    b.goto(&d.url("/queue?q=long&field=tags&value=rare")).await;
    let mut summaries = vec![b.wait_for("#scanned").await];
    let mut seen = b.texts("#jobs td.position").await;
    while b.count("#scan-next").await > 0 {
        summaries.push(b.click_to("#scan-next", "#scanned").await);
        seen.extend(b.texts("#jobs td.position").await);
    }
    let summaries: Vec<&str> = summaries
        .iter()
        .map(|s| s.split(" queued").next().unwrap())
        .collect();
    assert_eq!(
        summaries,
        [
            "Scanned positions 1–100 of 250",
            "Scanned positions 101–200 of 250",
            "Scanned positions 201–250 of 250"
        ]
    );
    assert_eq!(seen, [pos.to_string()]);
    b.screenshot("filter-windows").await;

    // A collation: its five jobs are spread over the windows.
    b.goto(&d.url("/queue/find?q=long&collation=team.7")).await;
    let mut seen = b.texts("#jobs td.position").await;
    while b.count("#scan-next").await > 0 {
        b.click_to("#scan-next", "#scanned").await;
        seen.extend(b.texts("#jobs td.position").await);
    }
    let mut expected: Vec<String> = (0..250)
        .filter(|i| i % 50 == 7)
        .map(|i| {
            r.field_int(
                &["ORCA.STATUS", "long", &orca_key(&format!("k-{i}"), "")],
                "position",
            )
            .unwrap()
            .to_string()
        })
        .collect();
    expected.sort_by_key(|p| p.parse::<u64>().unwrap());
    assert_eq!(seen, expected);
    b.close().await;
}
