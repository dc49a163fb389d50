//! The grading policies in the browser: gates (held jobs, open, drop with
//! its confirmation and the dropped configs, close), the queue's settings
//! (shown, changed, refused with the typed values kept), the running cap
//! (running per collation, jobs waiting only for the cap), listings by
//! state, and dead letters by cause. Real redis-server with the module,
//! the dashboard binary and headless Chromium, as in browser.rs.

mod common;

use std::time::Duration;

use common::{bearer, enc, Browser, Dashboard, Redis, TOKEN};
use serde_json::json;

/// Pages read ORCA.STATS through a cache (`--stats-ttl 1` here): wait it out
/// after changing the queue behind the dashboard's back.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

fn held_config(key: &str, user: u32, gate: &str) -> String {
    // spacing and a 1.50 on purpose: drops must give configs back as given
    format!(
        r#"{{"key": "{key}", "response_url": "http://web/cb/{key}", "collation": {{"type": "user", "id": "{user}"}}, "gate": "{gate}", "weight": 1.50}}"#
    )
}

fn enqueue_raw(r: &Redis, queue: &str, config: &str) -> String {
    r.field_str(&["ORCA.ENQUEUE", queue, config], "key")
        .expect("ORCA.ENQUEUE replies a key")
}

/// The body of a raw HTTP response.
fn body(raw: &str) -> &str {
    raw.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[tokio::test]
async fn gates_are_listed_opened_dropped_and_closed() {
    let r = Redis::start();
    for g in ["img-hw3", "img-hw4", "empty"] {
        assert_eq!(r.int(&["ORCA.GATE", "grading", g, "CLOSE"]), 1);
    }
    let mut hw3 = Vec::new();
    for (i, user) in [1, 2, 3].into_iter().enumerate() {
        hw3.push(enqueue_raw(
            &r,
            "grading",
            &held_config(&format!("h3-{i}"), user, "img-hw3"),
        ));
    }
    let hw4_configs: Vec<String> = (0..2)
        .map(|i| held_config(&format!("h4-{i}"), 4, "img-hw4"))
        .collect();
    let hw4: Vec<String> = hw4_configs
        .iter()
        .map(|c| enqueue_raw(&r, "grading", c))
        .collect();
    for i in 0..4 {
        r.enqueue(
            "grading",
            json!({"key": format!("q-{i}"), "collation": {"type": "user", "id": "9"}}),
        );
    }
    // With a token: the dropped configs are shown to its holders only.
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1", "--token", TOKEN]);
    let b = Browser::start().await;
    b.login(&d).await;

    // Overview and queue head: held jobs and closed gates.
    b.goto(&d.url("/")).await;
    b.wait_for("#queues").await;
    assert_eq!(b.text("tr[data-queue=grading] .held").await, "5");
    assert_eq!(
        b.text("tr[data-queue=grading] a.gates").await,
        "3 closed gates"
    );
    b.click_to("tr[data-queue=grading] a.gates", "#gates").await;
    assert_eq!(b.text("#count-held b").await, "5");
    assert_eq!(b.text("#count-gates b").await, "3");

    // The gates tab: every closed gate with its held count, as ORCA.STATS says.
    let gates = r.map_field(&["ORCA.STATS", "grading"], "gates");
    assert_eq!(gates.len(), 3);
    assert_eq!(
        b.attrs("#gates tbody tr", "data-gate").await,
        gates.iter().map(|(g, _)| g.clone()).collect::<Vec<_>>()
    );
    assert_eq!(
        b.texts("#gates td.held").await,
        gates.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>()
    );
    assert_eq!(b.text("#gates tr[data-gate=img-hw3] td.held").await, "3");
    assert_eq!(b.text("#gates tr[data-gate=empty] td.held").await, "0");
    b.screenshot("gates").await;

    // A gate's page: its held jobs in arrival order, paged.
    b.click_to("#gates tr[data-gate=img-hw3] a.mono", "#gate-name")
        .await;
    assert_eq!(b.text("#gate-name").await, "img-hw3");
    assert_eq!(b.text("#gate-held").await, "3");
    let listed = r.list_field(
        &["ORCA.LIST", "grading", "STATE", "HELD", "GATE", "img-hw3"],
        "key",
    );
    assert_eq!(listed, hw3);
    assert_eq!(b.attrs("#jobs tbody tr", "data-key").await, listed);
    b.screenshot("gate").await;
    b.goto(&d.url("/queue/gate?q=grading&gate=img-hw3&per=2&page=2"))
        .await;
    assert_eq!(
        b.attrs("#jobs tbody tr", "data-key").await,
        [hw3[2].clone()]
    );
    assert!(b.text("#pager").await.contains("page 2 of 2"));

    // Held jobs under the jobs tab's state links, with their gate.
    b.goto(&d.url("/queue?q=grading")).await;
    assert_eq!(b.text("#state-held b").await, "5");
    b.click_to("#state-held", "#jobs").await;
    assert_eq!(
        b.attrs("#jobs tbody tr", "data-key").await,
        r.list_field(&["ORCA.LIST", "grading", "STATE", "HELD"], "key")
    );
    assert_eq!(
        b.texts("#jobs td.gate").await,
        ["img-hw3", "img-hw3", "img-hw3", "img-hw4", "img-hw4"]
    );

    // A held job's page: state held, its gate, no move buttons.
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&hw4[0]))))
        .await;
    assert_eq!(b.wait_for("#job-state").await, "held");
    assert_eq!(b.text("#job-gate").await, "img-hw4");
    assert!(b.text("#job-held").await.contains("closed gate img-hw4"));
    assert_eq!(b.count("#move-front").await, 0);
    assert_eq!(b.count("#delete").await, 1);
    b.screenshot("job-held").await;

    // Open img-hw3: all three enter the queue, the gate is forgotten.
    b.goto(&d.url("/queue/gate?q=grading&gate=img-hw3")).await;
    assert_eq!(
        b.click_to("#open-gate button", "#notice").await,
        "Opened the gate: 3 held jobs entered the queue."
    );
    assert_eq!(
        b.path().await,
        "/queue/gates?q=grading&done=gate-opened&n=3"
    );
    for k in &hw3 {
        assert_eq!(
            r.field_str(&["ORCA.STATUS", "grading", k], "state")
                .as_deref(),
            Some("queued")
        );
    }
    assert_eq!(
        b.attrs("#gates tbody tr", "data-gate").await,
        ["empty", "img-hw4"]
    );

    // Drop img-hw4: refused without the confirmation, nothing removed.
    b.goto(&d.url("/queue/gate?q=grading&gate=img-hw4")).await;
    let confirm = b.wait_for("#drop label").await;
    assert!(
        confirm.contains("remove the 2 held jobs of this gate"),
        "{confirm}"
    );
    assert!(b
        .text("#drop")
        .await
        .contains("can be downloaded there as JSON"));
    assert!(b
        .click_to("#drop-gate", "#error")
        .await
        .contains("tick the confirmation box first"));
    assert_eq!(r.field_int(&["ORCA.STATS", "grading"], "held"), Some(2));
    // ... and done with it: the page after shows every removed config.
    b.goto(&d.url("/queue/gate?q=grading&gate=img-hw4")).await;
    b.wait_for("#drop-confirm").await;
    b.click("#drop-confirm").await;
    let summary = b.click_to("#drop-gate", "#dropped-summary").await;
    assert!(
        summary.starts_with("Removed 2 held jobs of gate “img-hw4”"),
        "{summary}"
    );
    assert_eq!(b.count("#dropped-differs").await, 0);
    assert_eq!(
        b.texts("#dropped td.response-url").await,
        ["http://web/cb/h4-0", "http://web/cb/h4-1"]
    );
    assert_eq!(b.texts("#dropped td.config-key").await, ["h4-0", "h4-1"]);
    b.screenshot("dropped").await;
    for k in &hw4 {
        assert_eq!(
            r.cmd(&["ORCA.STATUS", "grading", k]).unwrap(),
            redis::Value::Nil
        );
    }
    assert!(!r
        .map_field(&["ORCA.STATS", "grading"], "gates")
        .iter()
        .any(|(g, _)| g == "img-hw4"));
    // The download: every config exactly as given.
    let dropped_page = b.path().await;
    let href = b.attrs("#download", "href").await.remove(0);
    let (code, raw) = d.http("GET", &href, &[("Authorization", &bearer())], "");
    assert_eq!(code, 200);
    assert!(
        raw.contains("Content-Disposition: attachment")
            || raw.contains("content-disposition: attachment")
    );
    let file: serde_json::Value = serde_json::from_str(body(&raw)).expect("JSON download");
    assert_eq!(file["gate"], "img-hw4");
    assert_eq!(file["count"], 2);
    for c in &hw4_configs {
        assert!(body(&raw).contains(c.as_str()), "{c} not as given in {raw}");
    }
    // The page stays available, and is listed on the gates tab.
    b.goto(&d.url("/queue/gates?q=grading")).await;
    assert_eq!(b.texts("#drops td:first-child").await, ["img-hw4"]);
    b.click_to("#drops a", "#dropped-summary").await;
    assert_eq!(b.path().await, dropped_page);
    b.goto(&d.url("/queue/dropped?q=grading&id=nope")).await;
    assert!(b.wait_for("#error").await.contains("no longer keeps"));
    b.goto(&d.url(&dropped_page.replace("q=grading", "q=other")))
        .await;
    assert!(b.wait_for("#error").await.contains("no longer keeps"));

    // Jobs held after the confirmation was drawn are dropped too, and the
    // page says the count differs.
    assert_eq!(r.int(&["ORCA.GATE", "grading", "late", "CLOSE"]), 1);
    let late1 = enqueue_raw(&r, "grading", &held_config("late-1", 5, "late"));
    settle().await;
    b.goto(&d.url("/queue/gate?q=grading&gate=late")).await;
    assert_eq!(b.wait_for("#gate-held").await, "1");
    let late2 = enqueue_raw(&r, "grading", &held_config("late-2", 5, "late"));
    b.click("#drop-confirm").await;
    b.click_to("#drop-gate", "#dropped-summary").await;
    assert!(b
        .text("#dropped-differs")
        .await
        .contains("The confirmation said 1"));
    assert_eq!(
        b.texts("#dropped td.config-key").await,
        ["late-1", "late-2"]
    );
    for k in [&late1, &late2] {
        assert_eq!(
            r.cmd(&["ORCA.STATUS", "grading", k]).unwrap(),
            redis::Value::Nil
        );
    }

    // Close a gate from the form: new jobs naming it are held.
    b.goto(&d.url("/queue/gates?q=grading")).await;
    assert!(b
        .submit_to("#close-gate", &[("gate", "img-hw5")], "#notice")
        .await
        .contains("Closed the gate"));
    assert_eq!(b.text("#gate-name").await, "img-hw5");
    assert_eq!(b.count("#drop").await, 1);
    let k = enqueue_raw(&r, "grading", &held_config("h5", 6, "img-hw5"));
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "grading", &k], "state")
            .as_deref(),
        Some("held")
    );
    b.goto(&d.url("/queue/gates?q=grading")).await;
    assert!(b
        .submit_to("#close-gate", &[("gate", "img-hw5")], "#notice")
        .await
        .contains("already closed"));
    // A gate that is not closed offers to close it.
    b.goto(&d.url("/queue/gate?q=grading&gate=img-hw3")).await;
    assert!(b.wait_for("#gate-state").await.contains("not closed"));
    assert!(b
        .click_to("#close-this-gate button", "#notice")
        .await
        .contains("Closed the gate"));
    assert!(r
        .map_field(&["ORCA.STATS", "grading"], "gates")
        .iter()
        .any(|(g, _)| g == "img-hw3"));

    // The module's refusal is shown, nothing changes.
    r.cmd(&["CONFIG", "SET", "orca.max-gate-length", "8"])
        .unwrap();
    b.goto(&d.url("/queue/gates?q=grading")).await;
    let msg = b
        .submit_to("#close-gate", &[("gate", "a-very-long-gate")], "#error")
        .await;
    assert!(
        msg.contains("gate name is 16 bytes; the limit is 8 (orca.max-gate-length)"),
        "{msg}"
    );
    b.screenshot("gate-refused").await;
    assert!(!r
        .map_field(&["ORCA.STATS", "grading"], "gates")
        .iter()
        .any(|(g, _)| g == "a-very-long-gate"));
    // Bad forms get a clear page.
    b.goto(&d.url("/queue/gates?q=grading")).await;
    let msg = b
        .script_to(
            "const f = document.getElementById('close-gate'); \
             f.querySelector('input[name=gate]').removeAttribute('required'); \
             f.querySelector('input[name=gate]').value = ''; f.submit(); return 1;",
            vec![],
            "#error",
        )
        .await;
    assert!(msg.contains("The gate name is empty"), "{msg}");
    for (fields, expect) in [
        ([("op", "explode"), ("gate", "x")], "Which gate action?"),
        // a gate action on a queue that does not exist creates nothing
        (
            [("q", "no-such-queue"), ("gate", "x")],
            "no queue named “no-such-queue”",
        ),
    ] {
        b.goto(&d.url("/queue/gates?q=grading")).await;
        let msg = b.submit_to("#close-gate", &fields, "#error").await;
        assert!(msg.contains(expect), "{msg}");
    }
    assert_eq!(
        r.cmd(&["EXISTS", "no-such-queue"]).unwrap(),
        redis::Value::Int(0)
    );

    // CSRF: a tampered token opens nothing.
    b.goto(&d.url("/queue/gate?q=grading&gate=img-hw5")).await;
    b.wait_for("#open-gate").await;
    b.forge_csrf().await;
    assert!(b
        .click_to("#open-gate button", "#error")
        .await
        .contains("CSRF token"));
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "grading", &k], "state")
            .as_deref(),
        Some("held")
    );
    let (code, _) = d.http(
        "POST",
        "/action/gate",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", &bearer()),
        ],
        "csrf=x&q=grading&gate=img-hw5&op=drop&confirm=yes",
    );
    assert_eq!(code, 403);
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "grading", &k], "state")
            .as_deref(),
        Some("held")
    );
    b.close().await;
}

#[tokio::test]
async fn settings_are_shown_changed_and_refused_clearly() {
    let r = Redis::start();
    r.enqueue("grading", json!({"key": "a"}));
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1"]);
    let b = Browser::start().await;
    let setting = |f: &str| r.field(&["ORCA.SETTINGS", "grading"], f);

    // Every setting as the server has it, with a human reading.
    b.goto(&d.url("/queue/settings?q=grading")).await;
    b.wait_for("#queue-settings").await;
    assert!(b
        .text("#settings-source")
        .await
        .contains("ORCA.SETTINGS, read now"));
    for (field, value) in [
        ("order", "lifo"),
        ("lifetime", "0"),
        ("autodelay_window", "0"),
        ("maxrunning", "0"),
        ("deadmax", "100000"),
        ("resultmax", "100000"),
    ] {
        assert_eq!(
            b.text(&format!("#queue-settings tr[data-field={field}] .value"))
                .await,
            value,
            "{field}"
        );
    }

    // Change several at once, durations with units.
    b.submit_to(
        "#settings-form",
        &[
            ("order", "fifo"),
            ("lifetime", "1h30m"),
            ("autodelay_window", "15m"),
            ("autodelay_step", "1m"),
            ("autodelay_cap", "10m"),
            ("maxrunning", "2"),
            ("deadmax", "50"),
            ("deadttl", "1d"),
            ("resultmax", "10"),
        ],
        "#notice",
    )
    .await;
    assert_eq!(b.text("#notice").await, "Saved the queue's settings.");
    for (field, value) in [
        ("lifetime", 5_400_000),
        ("autodelay_window", 900_000),
        ("autodelay_step", 60_000),
        ("autodelay_cap", 600_000),
        ("maxrunning", 2),
        ("deadmax", 50),
        ("deadttl", 86_400_000),
        ("resultmax", 10),
    ] {
        assert_eq!(setting(field), Some(redis::Value::Int(value)), "{field}");
    }
    assert_eq!(
        setting("order"),
        Some(redis::Value::BulkString(b"fifo".to_vec()))
    );
    assert_eq!(
        b.text("#queue-settings tr[data-field=lifetime] .value")
            .await,
        "5400000"
    );
    assert_eq!(
        b.text("#queue-settings tr[data-field=lifetime] .hint")
            .await,
        "1h 30m"
    );
    assert_eq!(
        b.attrs("#set-lifetime", "value").await,
        ["1h30m".to_string()]
    );
    b.screenshot("settings-saved").await;

    // Nothing changed: nothing sent.
    assert_eq!(
        b.click_to("#save-settings", "#notice").await,
        "Nothing to save: no setting was changed."
    );

    // Only what changed is sent: a change made meanwhile elsewhere stays.
    b.goto(&d.url("/queue/settings?q=grading")).await;
    b.wait_for("#settings-form").await;
    r.cmd(&["ORCA.SETTINGS", "grading", "LIFETIME", "777"])
        .unwrap();
    b.submit_to("#settings-form", &[("maxrunning", "3")], "#notice")
        .await;
    assert_eq!(setting("maxrunning"), Some(redis::Value::Int(3)));
    assert_eq!(setting("lifetime"), Some(redis::Value::Int(777)));

    // Invalid input: every error said, the typed values kept, nothing sent.
    b.goto(&d.url("/queue/settings?q=grading")).await;
    b.wait_for("#settings-form").await;
    let msg = b
        .submit_to(
            "#settings-form",
            &[("lifetime", "soon"), ("maxrunning", "-1"), ("deadmax", "7")],
            "#settings-error",
        )
        .await;
    assert!(msg.contains("Nothing was changed"), "{msg}");
    assert!(b
        .text("tr[data-field=lifetime] .field-error")
        .await
        .contains("“soon” is not a duration"));
    assert!(b
        .text("tr[data-field=maxrunning] .field-error")
        .await
        .contains("not a whole number"));
    assert_eq!(
        b.attrs("#set-lifetime", "value").await,
        ["soon".to_string()]
    );
    assert_eq!(b.attrs("#set-deadmax", "value").await, ["7".to_string()]);
    assert_eq!(b.count("tr.invalid").await, 2);
    b.screenshot("settings-invalid").await;
    assert_eq!(setting("deadmax"), Some(redis::Value::Int(50)));
    assert_eq!(setting("lifetime"), Some(redis::Value::Int(777)));
    // ... fixed on the same page, it goes through.
    b.submit_to(
        "#settings-form",
        &[("lifetime", "0"), ("maxrunning", "0")],
        "#notice",
    )
    .await;
    assert_eq!(setting("deadmax"), Some(redis::Value::Int(7)));
    assert_eq!(setting("lifetime"), Some(redis::Value::Int(0)));
    assert_eq!(setting("maxrunning"), Some(redis::Value::Int(0)));
    // An auto delay step without a window.
    let msg = b
        .submit_to(
            "#settings-form",
            &[("autodelay_window", "0"), ("autodelay_step", "30s")],
            "#settings-error",
        )
        .await;
    assert!(msg.contains("Nothing was changed"), "{msg}");
    assert!(b
        .text("tr[data-field=autodelay_window] .field-error")
        .await
        .contains("needs a window"));
    assert_eq!(setting("autodelay_step"), Some(redis::Value::Int(60_000)));
    b.close().await;
    drop(d);

    // The server refuses (this Redis user may not run ORCA.SETTINGS): the
    // page says so and keeps what was typed.
    r.cmd(&[
        "ACL",
        "SETUSER",
        "staff",
        "on",
        ">staff-secret",
        "~*",
        "&*",
        "+@all",
        "-orca.settings",
    ])
    .unwrap();
    let d = Dashboard::start(
        &format!("redis://staff:staff-secret@127.0.0.1:{}", r.port),
        &["--stats-ttl", "1"],
    );
    let b = Browser::start().await;
    b.goto(&d.url("/queue/settings?q=grading")).await;
    // read from ORCA.STATS instead, with a note
    assert!(b
        .wait_for("#queue-settings-note")
        .await
        .contains("ORCA.SETTINGS could not be read"));
    assert_eq!(
        b.text("#queue-settings tr[data-field=deadmax] .value")
            .await,
        "7"
    );
    let msg = b
        .submit_to("#settings-form", &[("deadmax", "9")], "#settings-error")
        .await;
    assert!(
        msg.contains("The server refused the change, nothing was changed: not permitted"),
        "{msg}"
    );
    assert!(msg.contains("ORCA.SETTINGS grading DEADMAX 9"), "{msg}");
    assert_eq!(b.attrs("#set-deadmax", "value").await, ["9".to_string()]);
    assert_eq!(setting("deadmax"), Some(redis::Value::Int(7)));
    b.screenshot("settings-refused").await;
    b.close().await;
}

#[tokio::test]
async fn the_running_cap_and_the_other_states_are_shown() {
    let r = Redis::start();
    r.cmd(&["ORCA.SETTINGS", "grading", "MAXRUNNING", "1"])
        .unwrap();
    let mut user1 = Vec::new();
    for i in 0..3 {
        user1.push(r.enqueue(
            "grading",
            json!({"key": format!("u1-{i}"), "collation": {"type": "user", "id": "1"}}),
        ));
    }
    let user2 = r.enqueue(
        "grading",
        json!({"key": "u2", "collation": {"type": "user", "id": "2"}, "priority": 60000}),
    );
    // user.1 runs one job: its other jobs wait only for the cap
    let running = r
        .field_str(&["ORCA.POP", "grading", "LEASE", "600000"], "key")
        .unwrap();
    assert!(user1.contains(&running));
    let imm = r
        .field_str(
            &[
                "ORCA.IMMEDIATE",
                "grading",
                &json!({"key": "imm", "collation": {"type": "user", "id": "1"}}).to_string(),
            ],
            "key",
        )
        .unwrap();
    // a job waiting for its retry
    r.enqueue("retry", json!({"key": "r1"}));
    let rk = r
        .field_str(&["ORCA.POP", "retry", "LEASE", "600000"], "key")
        .unwrap();
    let lease = r
        .field_str(&["ORCA.STATUS", "retry", &rk], "lease")
        .unwrap();
    r.cmd(&["ORCA.NACK", "retry", &rk, &lease, "DELAY", "600000"])
        .unwrap();
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1"]);
    let b = Browser::start().await;

    // The jobs page marks the jobs waiting only for the cap, as ORCA.STATUS does.
    b.goto(&d.url("/queue?q=grading")).await;
    b.wait_for("#jobs").await;
    assert!(b.text("#cap-line").await.contains("at most 1 running"));
    for k in r.order("grading") {
        let capped = r.field_int(&["ORCA.STATUS", "grading", &k], "capped") == Some(1);
        let badges = b
            .count(&format!("#jobs tr[data-key='{k}'] .badge.capped"))
            .await;
        assert_eq!(badges, usize::from(capped), "{k}");
        assert_eq!(capped, k != user2 && k != imm, "{k}");
    }
    b.screenshot("queue-capped").await;
    let waiting = user1.iter().find(|k| **k != running).unwrap();
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(waiting))))
        .await;
    assert!(b
        .wait_for("#job-capped")
        .await
        .contains("collation user.1 is at the queue's running cap"));
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&user2))))
        .await;
    b.wait_for("#job-state").await;
    assert_eq!(b.count("#job-capped").await, 0);

    // Running jobs: by deadline, with the running counts per collation.
    b.goto(&d.url("/queue?q=grading")).await;
    assert_eq!(b.text("#state-leased b").await, "1");
    b.click_to("#state-leased", "#jobs").await;
    assert_eq!(
        b.attrs("#jobs tbody tr", "data-key").await,
        std::slice::from_ref(&running)
    );
    assert_eq!(
        b.texts("#jobs td.lease").await,
        [r.field_str(&["ORCA.STATUS", "grading", &running], "lease")
            .unwrap()]
    );
    assert!(b.text("#jobs td.deadline").await.starts_with("in "));
    assert_eq!(
        b.attrs("#running tbody tr", "data-collation").await,
        ["user.1"]
    );
    assert_eq!(b.text("#running td.count").await, "1");
    assert_eq!(b.count("#running .badge.capped").await, 1);
    assert!(b
        .text("#running-cap")
        .await
        .contains("1 collation at the cap"));
    b.screenshot("running").await;
    // the same table on the settings page
    b.goto(&d.url("/queue/settings?q=grading")).await;
    assert_eq!(
        b.wait_for("#running tr[data-collation='user.1'] td.count")
            .await,
        "1"
    );
    // Cancelling the running job frees the collation: nothing capped.
    b.goto(&d.url("/queue?q=grading&state=running")).await;
    b.wait_for("#jobs").await;
    assert!(b
        .click_to("#jobs button.danger", "#notice")
        .await
        .contains("Deleted"));
    assert_eq!(
        r.cmd(&["ORCA.STATUS", "grading", &running]).unwrap(),
        redis::Value::Nil
    );
    settle().await;
    b.goto(&d.url("/queue?q=grading")).await;
    b.wait_for("#jobs").await;
    assert_eq!(b.count("#jobs .badge.capped").await, 0);

    // Delayed jobs: waiting for their retry.
    b.goto(&d.url("/queue?q=retry&state=delayed")).await;
    b.wait_for("#jobs").await;
    assert_eq!(b.attrs("#jobs tbody tr", "data-key").await, [rk]);
    assert!(
        b.text("#jobs td.retry").await.starts_with("in 9m")
            || b.text("#jobs td.retry").await.starts_with("in 10m")
    );
    assert_eq!(b.text("#state-delayed b").await, "1");
    b.screenshot("delayed").await;
    // no state of that name
    b.goto(&d.url("/queue?q=retry&state=dead")).await;
    assert!(b.wait_for("#error").await.contains("Unknown state"));
    b.close().await;
}

#[tokio::test]
async fn dead_letters_show_their_cause() {
    let r = Redis::start();
    r.cmd(&["CONFIG", "SET", "orca.max-attempts", "1"]).unwrap();
    for k in ["nacked", "timed-out", "waited"] {
        r.enqueue("grading", json!({"key": k}));
    }
    // failed: NACKed on its last attempt
    let k1 = r
        .field_str(&["ORCA.POP", "grading", "LEASE", "600000"], "key")
        .unwrap();
    let lease = r
        .field_str(&["ORCA.STATUS", "grading", &k1], "lease")
        .unwrap();
    r.cmd(&["ORCA.NACK", "grading", &k1, &lease]).unwrap();
    // lease-expired: the lease ran out on its last attempt (the server's timer)
    let k2 = r
        .field_str(&["ORCA.POP", "grading", "LEASE", "1"], "key")
        .unwrap();
    let dead = || r.field_int(&["ORCA.STATS", "grading"], "dead").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while dead() < 2 {
        assert!(std::time::Instant::now() < deadline, "lease never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    // expired: waited longer than the queue's lifetime
    r.cmd(&[
        "ORCA.SETTINGS",
        "grading",
        "LIFETIME",
        "1",
        "DEADMAX",
        "500",
    ])
    .unwrap();
    while dead() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "lifetime never ran out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    r.cmd(&["ORCA.SETTINGS", "grading", "LIFETIME", "0"])
        .unwrap();
    let k3 = r
        .list_field(&["ORCA.LIST", "grading", "STATE", "DEAD"], "key")
        .remove(2);
    let d = Dashboard::start(&r.url(), &["--stats-ttl", "1"]);
    let b = Browser::start().await;

    b.goto(&d.url("/queue/dead?q=grading")).await;
    b.wait_for("#dead").await;
    assert_eq!(
        b.attrs("#dead tbody tr", "data-key").await,
        [k1.clone(), k2.clone(), k3.clone()]
    );
    assert_eq!(
        b.texts("#dead td.cause").await,
        r.list_field(&["ORCA.LIST", "grading", "STATE", "DEAD"], "cause")
    );
    assert_eq!(
        b.texts("#dead td.cause").await,
        ["failed", "lease-expired", "expired"]
    );
    assert!(b.text("main").await.contains("at most 500 kept"));
    b.screenshot("dead-causes").await;
    b.goto(&d.url(&format!("/job?q=grading&key={}", enc(&k3))))
        .await;
    assert_eq!(b.wait_for("#job-state").await, "dead");
    assert_eq!(
        b.text("#job-fields tr[data-field=cause] .value").await,
        "expired"
    );
    // Requeue the one whose lifetime ran out.
    assert!(b.click_to("#requeue", "#notice").await.contains("Requeued"));
    assert_eq!(
        r.field_str(&["ORCA.STATUS", "grading", &k3], "state")
            .as_deref(),
        Some("queued")
    );
    b.goto(&d.url("/queue/dead?q=grading")).await;
    b.wait_for("#dead").await;
    assert_eq!(b.texts("#dead td.cause").await, ["failed", "lease-expired"]);
    b.close().await;
}
