//! Serialized queues for the fuzzer: `ORCA.IMPORT` blobs (read from an
//! AOF rewrite or built by the core in-process) and `RESTORE` payloads.

use crate::common::*;
use orca::core::settings::AutoDelay;
use orca::core::{encode_key, parse_config, Move, Order, Policy, Queue};

use super::{eq_ci, now_ms};

/// An `ORCA.IMPORT` blob (`Queue::encode` format) split into header and units.
#[derive(Clone)]
pub struct Blob {
    pub header: Vec<u8>,
    pub units: Vec<Vec<u8>>,
}

pub fn read_u64(b: &[u8], at: &mut usize) -> Option<u64> {
    let s = b.get(*at..*at + 8)?;
    *at += 8;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

pub fn read_bytes(b: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let n = usize::try_from(read_u64(b, at)?).ok()?;
    let end = at.checked_add(n)?;
    let s = b.get(*at..end)?.to_vec();
    *at = end;
    Some(s)
}

impl Blob {
    pub fn parse(b: &[u8]) -> Option<Blob> {
        let mut at = 0;
        let header = read_bytes(b, &mut at)?;
        let n = read_u64(b, &mut at)?;
        let mut units = Vec::new();
        for _ in 0..n {
            units.push(read_bytes(b, &mut at)?);
        }
        (at == b.len()).then_some(Blob { header, units })
    }

    pub fn encode_with_count(&self, count: u64) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.header.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&count.to_le_bytes());
        for u in &self.units {
            out.extend_from_slice(&(u.len() as u64).to_le_bytes());
            out.extend_from_slice(u);
        }
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        self.encode_with_count(self.units.len() as u64)
    }
}

/// What a DUMP payload of this server starts with (object type + module
/// id) and ends with (RDB version), learned from a real DUMP.
#[derive(Clone)]
pub struct DumpFormat {
    pub prefix: Vec<u8>,
    pub version: [u8; 2],
}

impl DumpFormat {
    pub fn learn(dump: &[u8]) -> Option<DumpFormat> {
        // type RDB_TYPE_MODULE_2 (7), then the 64-bit module id as an RDB
        // length (0x81 + 8 bytes big-endian).
        if dump.len() < 20 || dump[0] != 7 || dump[1] != 0x81 {
            return None;
        }
        let n = dump.len();
        if crc64(&dump[..n - 8]).to_le_bytes() != dump[n - 8..] {
            return None;
        }
        Some(DumpFormat {
            prefix: dump[..10].to_vec(),
            version: [dump[n - 10], dump[n - 9]],
        })
    }

    /// Seal a payload body with the RDB version and a correct CRC.
    pub fn seal(&self, mut body: Vec<u8>) -> Vec<u8> {
        body.extend_from_slice(&self.version);
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    /// A RESTORE payload carrying `blob` the way `rdb_save` writes a queue:
    /// header string, unit count, unit strings, module EOF.
    pub fn payload(&self, blob: &Blob, count: u64) -> Vec<u8> {
        const OPCODE_UINT: u64 = 2;
        const OPCODE_STRING: u64 = 5;
        let mut b = self.prefix.clone();
        rdb_len(&mut b, OPCODE_STRING);
        rdb_len(&mut b, blob.header.len() as u64);
        b.extend_from_slice(&blob.header);
        rdb_len(&mut b, OPCODE_UINT);
        rdb_len(&mut b, count);
        for u in &blob.units {
            rdb_len(&mut b, OPCODE_STRING);
            rdb_len(&mut b, u.len() as u64);
            b.extend_from_slice(u);
        }
        rdb_len(&mut b, 0); // RDB_MODULE_OPCODE_EOF
        self.seal(b)
    }
}

/// Blobs of the `ORCA.IMPORT` commands in the base file of the server's AOF.
pub fn aof_import_blobs(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let adir = dir.join("appendonlydir");
    let Ok(manifest) = std::fs::read_to_string(adir.join("appendonly.aof.manifest")) else {
        return Vec::new();
    };
    let Some(base) = manifest.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "b").then(|| f[1].to_string())
    }) else {
        return Vec::new();
    };
    let Ok(bytes) = std::fs::read(adir.join(base)) else {
        return Vec::new();
    };
    parse_resp_commands(&bytes)
        .0
        .into_iter()
        .filter(|c| c.len() == 3 && eq_ci(&c[0], "ORCA.IMPORT"))
        .map(|mut c| c.pop().unwrap_or_default())
        .collect()
}

/// A valid serialized queue with every kind of unit: collations, immediate
/// jobs, leases, retries, dead jobs, results, cancellations, held jobs and
/// closed gates, submission windows, and policy settings in the header.
/// Returns the blob and the orca keys it holds.
pub fn core_blob(rng: &mut Rng, tag: u64) -> (Blob, Vec<String>) {
    let order = if rng.chance(50) {
        Order::Lifo
    } else {
        Order::Fifo
    };
    let mut q = Queue::new(order);
    if rng.chance(60) {
        let mut st = *q.settings();
        st.lifetime = *rng.pick(&[0, 0, 200, 60_000]);
        if rng.chance(60) {
            st.autodelay = AutoDelay {
                window: *rng.pick(&[1000, 60_000]),
                step: *rng.pick(&[0, 10, 1000]),
                cap: *rng.pick(&[0, 2500]),
            };
        }
        st.max_running = rng.below(3) as u32;
        st.dead_max = *rng.pick(&[0, 2, 100_000]);
        st.dead_ttl = *rng.pick(&[0, 500, 600_000]);
        st.result_max = *rng.pick(&[0, 1, 100_000]);
        q.set_settings(st).expect("valid settings");
    }
    let policy = Policy {
        max_attempts: 2,
        retry_base: 1000,
        retry_cap: 60_000,
    };
    let mut now = now_ms() - 30_000;
    let mut keys: Vec<String> = Vec::new();
    let mut leases: Vec<([u8; 32], u64)> = Vec::new();
    let steps = 5 + rng.below(40);
    for _ in 0..steps {
        now += rng.below(500) as i64;
        match rng.below(15) {
            0..=5 => {
                // Pool names collide with the live stream's jobs; g-names do not.
                let name = if rng.chance(40) {
                    format!("k{}", rng.below(48))
                } else {
                    format!("g{tag}-{}", rng.below(40))
                };
                let coll = match rng.below(3) {
                    0 => String::new(),
                    1 => format!(
                        ",\"collation\":{{\"type\":\"user\",\"id\":\"{}\"}}",
                        rng.below(4)
                    ),
                    _ => format!(
                        ",\"collation\":{{\"type\":\"team\",\"id\":{}}}",
                        rng.below(4)
                    ),
                };
                let gate = if rng.chance(30) {
                    format!(",\"gate\":\"img{}\"", rng.below(3))
                } else {
                    String::new()
                };
                let cfg = format!(
                    "{{\"key\":\"{name}\",\"response_url\":\"http://cb/{name}\"{coll}{gate},\"priority\":{}}}",
                    rng.below(3000)
                );
                let Ok(c) = parse_config(cfg.as_bytes()) else {
                    continue;
                };
                keys.push(encode_key(&c.job_key));
                if rng.chance(80) {
                    let _ = q.enqueue(&c, cfg.as_bytes(), now);
                } else {
                    let _ = q.put_immediate(&c, cfg.as_bytes(), now);
                }
            }
            6 | 7 => {
                let lease = if rng.chance(20) {
                    0
                } else {
                    1 + rng.below(60_000) as i64
                };
                if let Ok((ds, _)) =
                    q.pop_deliveries(now, lease, 1 + rng.below(2) as usize, &policy)
                {
                    for d in ds {
                        if let Some((t, _)) = d.lease {
                            leases.push((d.job.key, t));
                        }
                    }
                }
            }
            8 if !leases.is_empty() => {
                let (k, t) = leases.remove(rng.below(leases.len() as u64) as usize);
                let delay = if rng.chance(30) { Some(0) } else { None };
                let _ = q.nack(&k, t, delay, now, &policy);
            }
            9 if !leases.is_empty() => {
                let (k, t) = leases.remove(rng.below(leases.len() as u64) as usize);
                let _ = q.ack(&k, t, Some(b"{\"score\":1}"), now, 3_600_000);
            }
            10 if !leases.is_empty() => {
                let (k, _) = leases[rng.below(leases.len() as u64) as usize];
                let _ = q.cancel(&k);
            }
            11 | 12 => {
                let g = format!("img{}", rng.below(3));
                q.close_gate(g.as_bytes()).expect("a good gate name");
            }
            13 => {
                let g = format!("img{}", rng.below(3));
                if rng.chance(50) {
                    let _ = q.open_gate(g.as_bytes());
                } else {
                    let _ = q.drop_gate(g.as_bytes());
                }
            }
            _ => {
                if let Some(k) = q.pop_order().first().copied() {
                    let how = if rng.chance(50) {
                        Move::Release
                    } else {
                        Move::Delay { buffer: 1000 }
                    };
                    let _ = q.move_job(&k, how, now);
                }
            }
        }
    }
    assert!(q.check().is_ok(), "core-built queue fails check()");
    let blob = Blob::parse(&q.encode()).expect("core blob parses");
    (blob, keys)
}
