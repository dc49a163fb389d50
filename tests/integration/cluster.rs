//! Redis Cluster: three masters with the module, joined by
//! `redis-cli --cluster create`; a cluster client routes every queue to its
//! slot's node, and a queue moved to another node by `MIGRATE` arrives
//! intact.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::ConnectionLike;
use redis::Value;

/// A cluster node: its cluster bus port is chosen free too
/// (`--cluster-port`), so it need not be port + 10000.
fn start_node() -> Server {
    let bus = free_port().to_string();
    Server::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        &bus,
        "--cluster-node-timeout",
        "5000",
        "--cluster-require-full-coverage",
        "yes",
    ])
}

/// Run `redis-cli --cluster create` (bounded in time; killed by pid).
fn create_cluster(nodes: &[Server]) {
    let mut cmd = Command::new(redis_cli_bin());
    cmd.arg("--cluster").arg("create");
    for n in nodes {
        cmd.arg(format!("127.0.0.1:{}", n.port));
    }
    cmd.args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run redis-cli --cluster create");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait().expect("wait redis-cli") {
            Some(_) => break,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("redis-cli --cluster create did not finish");
            }
        }
    }
    let out = child.wait_with_output().expect("redis-cli output");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("All 16384 slots covered"),
        "redis-cli --cluster create failed:\n{text}"
    );
}

fn cluster_info(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let text = as_string(&ok(c, &args!["CLUSTER", "INFO"]));
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn wait_cluster_ok(nodes: &[Server]) {
    for n in nodes {
        let mut c = n.conn();
        wait_for("cluster_state:ok", Duration::from_secs(30), || {
            let i = cluster_info(&mut c);
            i.get("cluster_state").map(String::as_str) == Some("ok")
                && i.get("cluster_known_nodes").map(String::as_str) == Some("3")
                && i.get("cluster_slots_ok").map(String::as_str) == Some("16384")
        });
    }
}

/// A command through the cluster client; an error reply is `Err`.
fn cl(c: &mut ClusterConnection, a: &[Vec<u8>]) -> redis::RedisResult<Value> {
    let mut cmd = redis::Cmd::new();
    for x in a {
        cmd.arg(x.as_slice());
    }
    match c.req_command(&cmd) {
        Ok(Value::ServerError(e)) => Err(e.into()),
        r => r,
    }
}

fn cl_ok(c: &mut ClusterConnection, a: &[Vec<u8>]) -> Value {
    cl(c, a).unwrap_or_else(|e| panic!("{} failed through the cluster: {e}", show_args(a)))
}

fn cl_pop(c: &mut ClusterConnection, q: &str, lease: i64) -> Option<Fields> {
    match cl_ok(c, &args!["ORCA.POP", q, "LEASE", lease]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// Index of the node that serves `key` (the others answer MOVED).
fn owner(conns: &mut [redis::Connection], key: &str) -> usize {
    let mut found = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        let v = raw(c, &args!["ORCA.LEN", key]);
        match error_text(&v) {
            None => found.push(i),
            Some(e) => assert!(e.starts_with("MOVED"), "ORCA.LEN {key} on node {i}: {e}"),
        }
    }
    assert_eq!(found.len(), 1, "{key} served by nodes {found:?}");
    found[0]
}

fn check_everywhere(conns: &mut [redis::Connection], queues: &[String]) {
    for q in queues {
        let mut answered = 0;
        for c in conns.iter_mut() {
            let v = raw(c, &args!["ORCA.CHECK", q]);
            match error_text(&v) {
                None => {
                    assert!(
                        matches!(&v, Value::Okay)
                            || matches!(&v, Value::SimpleString(s) if s == "OK")
                    );
                    answered += 1;
                }
                Some(e) => assert!(e.starts_with("MOVED"), "ORCA.CHECK {q}: {e}"),
            }
        }
        assert_eq!(answered, 1, "{q}");
    }
}

#[test]
fn cluster_routes_queues_and_moves_one_intact() {
    let nodes: Vec<Server> = (0..3).map(|_| start_node()).collect();
    create_cluster(&nodes);
    wait_cluster_ok(&nodes);
    let mut conns: Vec<redis::Connection> = nodes.iter().map(|n| n.conn()).collect();

    let client = ClusterClient::new(
        nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect::<Vec<_>>(),
    )
    .expect("cluster client");
    let mut cc = client.get_connection().expect("cluster connection");

    // ~50 queues over the three nodes.
    let queues: Vec<String> = (0..50).map(|i| format!("cq:{i}")).collect();
    let mut expected_len = BTreeMap::new();
    for (i, q) in queues.iter().enumerate() {
        if i % 3 == 0 {
            cl_ok(&mut cc, &args!["ORCA.SETTINGS", q, "ORDER", "FIFO"]);
        }
        for j in 0..6 {
            let coll = ["user.1", "user.2", "team.t"][j % 3];
            let coll = if j == 5 { None } else { Some(coll) };
            cl_ok(
                &mut cc,
                &args![
                    "ORCA.ENQUEUE",
                    q,
                    config(&format!("{q}-j{j}"), coll, j as i64 * 10)
                ],
            );
        }
        cl_ok(
            &mut cc,
            &args![
                "ORCA.IMMEDIATE",
                q,
                config(&format!("{q}-imm"), Some("user.1"), 0)
            ],
        );
        let f = cl_pop(&mut cc, q, LONG).expect("pop");
        let v = cl_ok(
            &mut cc,
            &args!["ORCA.ACK", q, text(&f, "key"), text(&f, "lease")],
        );
        assert_eq!(as_int(&v), 1);
        expected_len.insert(q.clone(), 6);
    }
    let mut per_node = [0usize; 3];
    for q in &queues {
        per_node[owner(&mut conns, q)] += 1;
    }
    assert!(
        per_node.iter().all(|&n| n > 0),
        "queues not spread: {per_node:?}"
    );

    // MPOP's queues are checked as any key (its `getkeys-api`): a queue of
    // another node is redirected, queues of two nodes are refused, and a
    // count Redis cannot read is refused by the module (tenants::cluster).
    let (a, b) = (&queues[0], &queues[1]);
    let na = owner(&mut conns, a);
    let q_other = queues.iter().find(|q| owner(&mut conns, q) != na).unwrap();
    let e = error_text(&raw(
        &mut conns[(na + 1) % 3],
        &args!["ORCA.MPOP", 1, a, "LEASE", 0],
    ))
    .unwrap();
    assert!(e.starts_with("MOVED"), "{e}");
    let e = error_text(&raw(
        &mut conns[na],
        &args!["ORCA.MPOP", 2, a, q_other, "LEASE", 0],
    ))
    .unwrap();
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    let e = error_text(&raw(
        &mut conns[na],
        &args!["ORCA.MPOP", "02", a, q_other, "LEASE", 0],
    ))
    .unwrap();
    assert!(e.starts_with("ERR numkeys"), "{e}");
    for q in [a, b] {
        assert_eq!(as_int(&cl_ok(&mut cc, &args!["ORCA.LEN", q])), 6, "{q}");
    }

    // The live queue to move: collations, leases (long and short), a retry,
    // a dead job and a result.
    let live = "cq:live";
    cl_ok(&mut cc, &args!["ORCA.SETTINGS", live, "ORDER", "LIFO"]);
    for j in 0..12 {
        let coll = ["user.1", "user.2", "team.t", "user.3"][j % 4];
        cl_ok(
            &mut cc,
            &args![
                "ORCA.ENQUEUE",
                live,
                config(&format!("live-{j}"), Some(coll), j as i64 * 5)
            ],
        );
    }
    cl_ok(
        &mut cc,
        &args!["ORCA.IMMEDIATE", live, config("live-imm", None, 0)],
    );
    let long1 = cl_pop(&mut cc, live, LONG).unwrap();
    let long2 = cl_pop(&mut cc, live, LONG).unwrap();
    let short = cl_pop(&mut cc, live, 4000).unwrap();
    let acked = cl_pop(&mut cc, live, LONG).unwrap();
    cl_ok(
        &mut cc,
        &args![
            "ORCA.ACK",
            live,
            text(&acked, "key"),
            text(&acked, "lease"),
            "RESULT",
            "97"
        ],
    );
    let nacked = cl_pop(&mut cc, live, LONG).unwrap();
    cl_ok(
        &mut cc,
        &args![
            "ORCA.NACK",
            live,
            text(&nacked, "key"),
            text(&nacked, "lease"),
            "DELAY",
            LONG
        ],
    );
    let src = owner(&mut conns, live);
    ok(
        &mut conns[src],
        &args!["CONFIG", "SET", "orca.max-attempts", "1"],
    );
    let dies = cl_pop(&mut cc, live, LONG).unwrap();
    let v = fields(cl_ok(
        &mut cc,
        &args!["ORCA.NACK", live, text(&dies, "key"), text(&dies, "lease")],
    ));
    assert_eq!(text(&v, "outcome"), "dead");
    ok(
        &mut conns[src],
        &args!["CONFIG", "SET", "orca.max-attempts", "5"],
    );
    ok(
        &mut conns[src],
        &args!["ORCA.MOVE", live, key_of("live-0"), "DELAY"],
    );
    let live_len = as_int(&cl_ok(&mut cc, &args!["ORCA.LEN", live]));
    expected_len.insert(live.to_string(), live_len);
    let before = digest(&mut conns[src], live);
    assert_check(&mut conns[src], live);

    // Move its slot to another node.
    let dst = (src + 1) % 3;
    let slot = as_int(&ok(&mut conns[src], &args!["CLUSTER", "KEYSLOT", live]));
    let src_id = as_string(&ok(&mut conns[src], &args!["CLUSTER", "MYID"]));
    let dst_id = as_string(&ok(&mut conns[dst], &args!["CLUSTER", "MYID"]));
    ok(
        &mut conns[dst],
        &args!["CLUSTER", "SETSLOT", slot, "IMPORTING", &src_id],
    );
    ok(
        &mut conns[src],
        &args!["CLUSTER", "SETSLOT", slot, "MIGRATING", &dst_id],
    );
    let keys = match ok(
        &mut conns[src],
        &args!["CLUSTER", "GETKEYSINSLOT", slot, 1000],
    ) {
        Value::Array(k) => k.iter().map(as_string).collect::<Vec<_>>(),
        v => panic!("{v:?}"),
    };
    assert!(keys.contains(&live.to_string()), "{keys:?}");
    let mut migrate = args![
        "MIGRATE",
        "127.0.0.1",
        nodes[dst].port.to_string(),
        "",
        0,
        5000,
        "KEYS"
    ];
    migrate.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    ok(&mut conns[src], &migrate);
    for i in [dst, src, 3 - src - dst] {
        ok(
            &mut conns[i],
            &args!["CLUSTER", "SETSLOT", slot, "NODE", &dst_id],
        );
    }
    wait_cluster_ok(&nodes);

    // Intact on the new node, gone from the old one.
    assert_eq!(owner(&mut conns, live), dst);
    assert_eq!(
        as_int(&ok(
            &mut conns[src],
            &args!["CLUSTER", "COUNTKEYSINSLOT", slot]
        )),
        0
    );
    assert_eq!(
        digest(&mut conns[dst], live),
        before,
        "the queue changed in the move"
    );
    let short_key = text(&short, "key");
    let st = fields(ok(&mut conns[dst], &args!["ORCA.STATUS", live, &short_key]));
    assert_eq!(
        text(&st, "state"),
        "leased",
        "the short lease must still run after the move"
    );
    let mut all: Vec<String> = queues.clone();
    all.push(live.to_string());
    check_everywhere(&mut conns, &all);

    // Still served through the cluster client (which follows MOVED).
    for q in &all {
        let n = as_int(&cl_ok(&mut cc, &args!["ORCA.LEN", q]));
        assert_eq!(n, expected_len[q], "{q}");
    }
    let v = cl_ok(
        &mut cc,
        &args!["ORCA.ACK", live, text(&long1, "key"), text(&long1, "lease")],
    );
    assert_eq!(
        as_int(&v),
        1,
        "a lease taken before the move must complete after it"
    );
    let f = cl_pop(&mut cc, live, LONG).expect("pop after the move");
    let v = cl_ok(
        &mut cc,
        &args![
            "ORCA.ACK",
            live,
            text(&f, "key"),
            text(&f, "lease"),
            "RESULT",
            "ok"
        ],
    );
    assert_eq!(as_int(&v), 1);
    let r = cl_ok(&mut cc, &args!["ORCA.RESULT", live, text(&acked, "key")]);
    assert_eq!(
        as_bytes(&r),
        b"97".to_vec(),
        "the result moved with the queue"
    );
    // The short lease expires on the new node (its timer knows the queue).
    wait_for(
        "the short lease to expire on the new node",
        Duration::from_secs(10),
        || match cl_ok(&mut cc, &args!["ORCA.STATUS", live, &short_key]) {
            Value::Nil => false,
            v => text(&fields(v), "state") == "queued",
        },
    );
    let v = cl_ok(
        &mut cc,
        &args![
            "ORCA.EXTEND",
            live,
            text(&long2, "key"),
            text(&long2, "lease"),
            LONG
        ],
    );
    assert!(as_int(&v) > 0);
    check_everywhere(&mut conns, &all);
    assert_check(&mut conns[dst], live);
}

/// A hand-off (`ACK ... FORWARD`) names its second queue as a key: within
/// one slot (a hash tag) it works through the cluster client; across slots
/// the server answers CROSSSLOT and neither queue changes.
#[test]
fn cluster_hands_off_within_a_slot_and_refuses_across_slots() {
    let nodes: Vec<Server> = (0..3).map(|_| start_node()).collect();
    create_cluster(&nodes);
    wait_cluster_ok(&nodes);
    let mut conns: Vec<redis::Connection> = nodes.iter().map(|n| n.conn()).collect();
    let client = ClusterClient::new(
        nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect::<Vec<_>>(),
    )
    .expect("cluster client");
    let mut cc = client.get_connection().expect("cluster connection");
    let (compile, test) = ("{sub}:compile", "{sub}:test");
    for j in ["a", "b"] {
        cl_ok(&mut cc, &args!["ORCA.ENQUEUE", compile, config(j, None, 0)]);
    }
    let f = cl_pop(&mut cc, compile, LONG).expect("pop");
    let v = cl_ok(
        &mut cc,
        &args![
            "ORCA.ACK",
            compile,
            text(&f, "key"),
            lease(&f),
            "FORWARD",
            test,
            config("a-test", None, 0)
        ],
    );
    assert!(matches!(&v, Value::Array(a) if a.len() == 2), "{v:?}");
    assert_eq!(as_int(&cl_ok(&mut cc, &args!["ORCA.LEN", test])), 1);

    // Across slots: refused on the node that owns the first queue.
    let f = cl_pop(&mut cc, compile, LONG).expect("pop");
    let n = owner(&mut conns, compile);
    let before = digest(&mut conns[n], compile);
    let e = error_text(&raw(
        &mut conns[n],
        &args![
            "ORCA.ACK",
            compile,
            text(&f, "key"),
            lease(&f),
            "FORWARD",
            "elsewhere",
            config("b-test", None, 0)
        ],
    ))
    .expect("an error");
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    assert_eq!(digest(&mut conns[n], compile), before);
    assert_eq!(as_int(&cl_ok(&mut cc, &args!["EXISTS", "elsewhere"])), 0);
    // The delivery is still held: it finishes within the slot.
    cl_ok(
        &mut cc,
        &args![
            "ORCA.ACK",
            compile,
            text(&f, "key"),
            lease(&f),
            "FORWARD",
            test,
            config("b-test", None, 0)
        ],
    );
    assert_eq!(as_int(&cl_ok(&mut cc, &args!["ORCA.LEN", test])), 2);
    check_everywhere(&mut conns, &[compile.into(), test.into()]);
}
