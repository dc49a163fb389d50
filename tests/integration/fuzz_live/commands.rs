//! The commands the fuzzer sends: `ORCA.*` (well-formed or not), garbage,
//! key commands, `CONFIG SET`, `ORCA.IMPORT` and `RESTORE` of real and
//! mutated queues, and the mix of one step.

use crate::common::*;

use super::blobs::*;
use super::replies::*;
use super::*;

impl Fuzz {
    /// A well-formed (or nearly) `ORCA.*` command.
    pub(super) fn orca_command(&mut self) -> Vec<Vec<u8>> {
        let which = self.below(118);
        let mut a: Vec<Vec<u8>>;
        match which {
            0..=21 => {
                a = vec![self.name("ORCA.ENQUEUE"), self.queue(), self.config()];
                a.extend(self.options(&[("NOW", 0)]));
            }
            22..=27 => {
                a = vec![self.name("ORCA.IMMEDIATE"), self.queue(), self.config()];
                a.extend(self.options(&[("NOW", 0)]));
            }
            28..=30 => {
                a = vec![
                    self.name("ORCA.REENQUEUE"),
                    self.queue(),
                    self.config(),
                    self.ms(false),
                ];
            }
            31..=35 => {
                let how = match self.below(10) {
                    0..=4 => "RELEASE",
                    5..=8 => "DELAY",
                    _ => *self.rng.pick(KEYWORDS),
                };
                a = vec![
                    self.name("ORCA.MOVE"),
                    self.queue(),
                    self.orca_key(),
                    self.case(how),
                ];
                a.extend(self.options(&[("NOW", 0), ("BUFFER", 0)]));
            }
            36..=39 => a = vec![self.name("ORCA.DELETE"), self.queue(), self.orca_key()],
            40..=53 => {
                a = vec![self.name("ORCA.POP"), self.queue()];
                a.extend(self.options(POP_OPTIONS));
            }
            54..=60 => {
                let (q, k, l) = self.lease_target();
                a = vec![self.name("ORCA.ACK"), q, k, l];
                a.extend(self.options(&[("RESULT", 4), ("TTL", 0), ("NOW", 0)]));
                if self.pct(10) {
                    a.push(self.case("STOP"));
                }
                a.extend(self.forward_option());
                if self.pct(30) {
                    a.extend(self.next_option());
                }
            }
            61..=66 => {
                let (q, k, l) = self.lease_target();
                a = vec![self.name("ORCA.NACK"), q, k, l];
                a.extend(self.options(&[
                    ("DELAY", 1),
                    ("NOW", 0),
                    ("MAXATTEMPTS", 3),
                    ("ERROR", 4),
                ]));
                a.extend(self.forward_option());
                if self.pct(30) {
                    a.extend(self.next_option());
                }
            }
            67..=70 => {
                let (q, k, l) = self.lease_target();
                a = vec![self.name("ORCA.EXTEND"), q, k, l, self.ms(true)];
                a.extend(self.options(&[("NOW", 0)]));
            }
            71..=72 => a = vec![self.name("ORCA.RESULT"), self.queue(), self.orca_key()],
            73..=76 => {
                a = vec![self.name("ORCA.DEAD"), self.queue()];
                match self.below(6) {
                    0..=2 => {
                        a.push(self.case("LIST"));
                        a.extend(self.options(&[("OFFSET", 6), ("LIMIT", 6)]));
                    }
                    3..=4 => {
                        a.push(self.case("REQUEUE"));
                        a.push(self.orca_key());
                        a.extend(self.options(&[("NOW", 0)]));
                    }
                    _ => {
                        a.push(self.case("PURGE"));
                        if self.pct(10) {
                            a.push(b"x".to_vec());
                        }
                    }
                }
            }
            77..=79 => {
                a = vec![self.name("ORCA.TICK"), self.queue()];
                a.extend(self.options(&[("NOW", 0), ("MAXATTEMPTS", 3)]));
            }
            80..=81 => a = vec![self.name("ORCA.LEN"), self.queue()],
            82..=83 => a = vec![self.name("ORCA.CHECK"), self.queue()],
            84..=87 => a = vec![self.name("ORCA.STATUS"), self.queue(), self.orca_key()],
            88..=91 => {
                a = vec![self.name("ORCA.LIST"), self.queue()];
                a.extend(self.options(&[("OFFSET", 6), ("LIMIT", 6)]));
                if self.pct(40) {
                    let (f, v) = match self.below(5) {
                        0 => ("course", "cs2500"),
                        1 => ("tags", "a"),
                        2 => ("n", "3"),
                        3 => ("missing", ""),
                        _ => ("course", "\u{0}\u{ff}"),
                    };
                    let at = self.below(a.len() as u64 - 1) as usize + 2;
                    let at = at.min(a.len());
                    let mut filt = vec![self.case("FILTER"), f.as_bytes().to_vec()];
                    if self.pct(90) {
                        filt.push(v.as_bytes().to_vec());
                    }
                    a.splice(at..at, filt);
                }
            }
            92..=93 => a = vec![self.name("ORCA.STATS"), self.queue()],
            94..=95 => {
                a = vec![self.name("ORCA.SETTINGS"), self.queue()];
                a.extend(self.options(&[("ORDER", 5)]));
            }
            96..=99 => {
                a = vec![self.name("ORCA.IMPORT"), self.queue(), self.import_blob()];
                self.counts.imports += 1;
            }
            100..=104 => a = self.gate_command(),
            105..=108 => a = self.mpop_command(),
            109..=111 => a = self.settings_command(),
            112..=113 => a = self.list_state_command(),
            _ => a = self.mack_command(),
        }
        a
    }

    /// An `ORCA.*` command with random arity and arguments from every pool.
    pub(super) fn garbage_command(&mut self) -> Vec<Vec<u8>> {
        let cmd = *self.rng.pick(ORCA_COMMANDS);
        let mut a = vec![self.name(cmd)];
        let n = self.below(9);
        for i in 0..n {
            let arg = match self.below(10) {
                _ if i == 0 && self.pct(70) => self.queue(),
                0 => self.queue(),
                1 => self.orca_key(),
                2 | 3 => {
                    let kw = *self.rng.pick(KEYWORDS);
                    self.case(kw)
                }
                4 | 5 => self.edge_int(),
                6 => self.config(),
                7 => self.lease_target().2,
                _ => self.random_bytes(30),
            };
            a.push(arg);
        }
        a
    }

    /// Commands of Redis itself on queue keys: other types, renames,
    /// copies, expiry, dumps and restores.
    pub(super) fn key_command(&mut self) -> Vec<Vec<u8>> {
        let q = self.queue();
        let q2 = self.queue();
        match self.below(31) {
            0 => args!["SET", q, self.random_bytes(8)],
            1 => args!["RPUSH", q, "a", "b"],
            2 => args!["HSET", q, "f", "v"],
            3 => args!["ZADD", q, "1", "m"],
            4 | 5 => args!["DEL", q],
            6 => args!["UNLINK", q],
            7 => args!["RENAME", q, q2],
            8 => args!["COPY", q, self.rng.pick(COPIES).to_vec(), "REPLACE"],
            9 => args!["COPY", q, q2],
            10 => args!["PEXPIRE", q, (1 + self.below(300)).to_string()],
            11 => args!["PERSIST", q],
            12 => args!["TYPE", q],
            13 => args!["OBJECT", "ENCODING", q],
            14 => args!["MEMORY", "USAGE", q],
            15 => args!["DEBUG", "DIGEST-VALUE", q],
            16..=18 => args!["DUMP", q],
            19..=22 => self.restore_command(),
            23 => args!["MOVE", q, "1"],
            24 if self.pct(20) => args!["SWAPDB", "0", "1"],
            25 => args!["EXISTS", q, q2],
            26 => {
                let v = self.config();
                args!["SETRANGE", q, "0", v]
            }
            27 => match self.blocker_id {
                Some(id) => {
                    let how = *self.rng.pick(&["TIMEOUT", "ERROR"]);
                    args!["CLIENT", "UNBLOCK", id, how]
                }
                None => args!["PING"],
            },
            28 => self.config_set(),
            // Writes are paused (as FAILOVER and SHUTDOWN do): nothing may
            // be written or replicated meanwhile, timers included.
            29 if self.pct(30) => {
                let how = *self.rng.pick(&["WRITE", "ALL"]);
                args!["CLIENT", "PAUSE", (1 + self.below(60)).to_string(), how]
            }
            _ => args!["INFO", "orca"],
        }
    }

    pub(super) fn config_set(&mut self) -> Vec<Vec<u8>> {
        let (name, values) = *self.rng.pick(SETTINGS);
        // Mostly back to the default, so lowered limits do not linger.
        let default = SETTING_DEFAULTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|d| d.1);
        let v: Vec<u8> = match (self.below(10), default) {
            (0, _) => self.edge_int(),
            (1..=5, Some(d)) => d.as_bytes().to_vec(),
            _ => self.rng.pick(values).as_bytes().to_vec(),
        };
        // Never raise a limit above its default (see SETTINGS).
        let raises = |v: &[u8]| -> bool {
            let Some(def) = SETTING_DEFAULTS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|d| d.1)
            else {
                return false;
            };
            let limit = name.starts_with("orca.max-")
                && name != "orca.max-attempts"
                && name != "orca.max-running";
            match (
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok()),
                def.parse::<i64>(),
            ) {
                (Some(x), Ok(d)) => limit && x > d,
                _ => false,
            }
        };
        let v = if raises(&v) { b"1".to_vec() } else { v };
        args!["CONFIG", "SET", name, v]
    }

    /// A blob for `ORCA.IMPORT`: a real one (maybe mutated), or junk.
    pub(super) fn import_blob(&mut self) -> Vec<u8> {
        if self.blobs.is_empty() || self.pct(10) {
            return match self.below(3) {
                0 => self.random_bytes(200),
                1 => {
                    // A plausible header (version 1, or 2 with settings)
                    // with garbage units.
                    let mut header = vec![1, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                    if self.pct(70) {
                        header[0] = 2;
                        header.extend(std::iter::repeat_n(0, 64));
                    }
                    let mut b = Blob {
                        header,
                        units: Vec::new(),
                    };
                    for _ in 0..self.below(4) {
                        let mut u = vec![1 + self.below(8) as u8];
                        u.extend(self.random_bytes(120));
                        b.units.push(u);
                    }
                    b.encode()
                }
                _ => Vec::new(),
            };
        }
        let blob = self.rng.pick(&self.blobs).clone();
        if self.pct(25) {
            return blob.encode();
        }
        let (m, count) = self.mutate_blob(blob);
        if self.pct(10) {
            let mut b = m.encode_with_count(count);
            let extra = self.random_bytes(3);
            b.extend(extra);
            return b;
        }
        m.encode_with_count(count)
    }

    /// Unit-aware mutations of a serialized queue; returns the blob and the
    /// unit count to declare (usually the true one).
    pub(super) fn mutate_blob(&mut self, mut b: Blob) -> (Blob, u64) {
        let rounds = 1 + self.below(3);
        for _ in 0..rounds {
            let n = b.units.len();
            match self.below(13) {
                0 | 1 if n > 0 => {
                    // Overwrite 8 bytes with an edge value.
                    let i = self.below(n as u64) as usize;
                    let u = &b.units[i];
                    if u.len() >= 9 {
                        let at = 1 + self.below(u.len() as u64 - 8) as usize;
                        let v: i64 = *self.rng.pick(&[
                            0,
                            1,
                            -1,
                            i64::MIN,
                            i64::MAX,
                            MAX_TIME,
                            MAX_TIME + 1,
                            1 << 62,
                            (1 << 62) + (1 << 61),
                            (1 << 62) + (1 << 61) - 1,
                            -(1 << 62),
                            1 << 40,
                            2,
                        ]);
                        b.units[i][at..at + 8].copy_from_slice(&v.to_le_bytes());
                    }
                }
                2 | 3 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    let len = b.units[i].len();
                    if len > 0 {
                        let at = self.below(len as u64) as usize;
                        b.units[i][at] ^= 1 << self.below(8);
                    }
                }
                4 if n > 0 => {
                    // Replace a job key (any 32-byte window) with a known one.
                    let i = self.below(n as u64) as usize;
                    if let Some(k) = self.known_raw_key() {
                        let u = &mut b.units[i];
                        if u.len() >= 33 {
                            let at = 1 + self.below(u.len() as u64 - 32) as usize;
                            u[at..at + 32].copy_from_slice(&k);
                        }
                    }
                }
                5 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    let u = b.units[i].clone();
                    b.units.push(u);
                }
                6 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b.units.remove(i);
                }
                7 if !self.blobs.is_empty() => {
                    let other = self.rng.pick(&self.blobs).clone();
                    if !other.units.is_empty() {
                        let u = self.rng.pick(&other.units).clone();
                        b.units.push(u);
                    }
                }
                8 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    let len = b.units[i].len() as u64;
                    let cut = self.below(len + 1) as usize;
                    b.units[i].truncate(cut);
                }
                9 if n > 1 => {
                    let i = self.below(n as u64) as usize;
                    let j = self.below(n as u64) as usize;
                    b.units.swap(i, j);
                }
                10 => {
                    if b.header.len() >= 82 && self.pct(40) {
                        // A setting of a version-2 header (lifetime,
                        // windows, cap, bounds): 4 bytes anywhere in them.
                        let at = 18 + self.below(60) as usize;
                        let v: i64 = *self.rng.pick(&[0, 1, -1, i64::MIN, i64::MAX, MAX_TIME + 1]);
                        b.header[at..at + 4].copy_from_slice(&v.to_le_bytes()[..4]);
                    } else if b.header.len() >= 18 {
                        match self.below(4) {
                            0 => b.header[0] = *self.rng.pick(&[0, 1, 2, 3, 255]),
                            1 => b.header[1] = *self.rng.pick(&[1, 2, 255]),
                            2 => {
                                let v: i64 = *self.rng.pick(&[0, 1, -1, i64::MAX, 1 << 62]);
                                b.header[2..10].copy_from_slice(&v.to_le_bytes());
                            }
                            _ => {
                                let v: i64 = *self.rng.pick(&[0, 1, -1, i64::MIN, -(1 << 62)]);
                                b.header[10..18].copy_from_slice(&v.to_le_bytes());
                            }
                        }
                    }
                }
                11 if n > 0 => {
                    // A u32 attempts field or length prefix at an odd place.
                    let i = self.below(n as u64) as usize;
                    let u = &mut b.units[i];
                    if u.len() >= 5 {
                        let at = 1 + self.below(u.len() as u64 - 4) as usize;
                        u[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
                    }
                }
                _ => {
                    // The unit type byte.
                    if n > 0 {
                        let i = self.below(n as u64) as usize;
                        if !b.units[i].is_empty() {
                            b.units[i][0] = self.below(9) as u8;
                        }
                    }
                }
            }
        }
        let count = match self.below(20) {
            0 => b.units.len() as u64 + 1,
            1 => (b.units.len() as u64).saturating_sub(1),
            2 => u64::MAX,
            _ => b.units.len() as u64,
        };
        (b, count)
    }

    pub(super) fn known_raw_key(&mut self) -> Option<Vec<u8>> {
        if self.keys.is_empty() {
            return None;
        }
        use base64::Engine;
        let k = self.rng.pick(&self.keys).clone();
        base64::engine::general_purpose::STANDARD
            .decode(k)
            .ok()
            .filter(|v| v.len() == 32)
    }

    pub(super) fn restore_command(&mut self) -> Vec<Vec<u8>> {
        self.counts.restores += 1;
        let dst = match self.below(4) {
            0 => self.queue(),
            _ => self.rng.pick(COPIES).to_vec(),
        };
        let payload = match (self.dump_format.clone(), self.below(10)) {
            (Some(f), 0..=3) if !self.blobs.is_empty() => {
                // A structured payload from a (mutated) blob.
                let blob = self.rng.pick(&self.blobs).clone();
                if self.pct(30) {
                    let n = blob.units.len() as u64;
                    f.payload(&blob, n)
                } else {
                    let (m, count) = self.mutate_blob(blob);
                    f.payload(&m, count)
                }
            }
            (Some(f), 4..=6) if !self.dumps.is_empty() => {
                // A real dump with its body mutated and the CRC fixed.
                let d = self.rng.pick(&self.dumps).clone();
                let body = d[..d.len() - 10].to_vec();
                let keep = f.prefix.len().min(body.len());
                let tail = self.mutate(body[keep..].to_vec());
                let mut b = body[..keep].to_vec();
                b.extend(tail);
                f.seal(b)
            }
            (_, 7..=8) if !self.dumps.is_empty() => self.rng.pick(&self.dumps).clone(),
            _ => {
                let mut d = if self.dumps.is_empty() {
                    self.random_bytes(50)
                } else {
                    self.rng.pick(&self.dumps).clone()
                };
                if !d.is_empty() {
                    let i = self.below(d.len() as u64) as usize;
                    d[i] ^= 0x5a;
                }
                d
            }
        };
        let mut a = args!["RESTORE", dst, "0", payload];
        if self.pct(70) {
            a.push(b"REPLACE".to_vec());
        }
        a
    }

    /// One top-level step: a command, or a MULTI/EXEC or EVAL wrapping.
    pub(super) fn step(&mut self, out: &mut Vec<Sent>) {
        match self.below(1000) {
            0..=29 => {
                // MULTI ... EXEC
                self.counts.multi += 1;
                out.push(Sent::new(args!["MULTI"]));
                let mut inner = Vec::new();
                for _ in 0..1 + self.below(5) {
                    let a = if self.pct(80) {
                        self.orca_command()
                    } else {
                        self.garbage_command()
                    };
                    let s = Sent::new(a);
                    inner.push((s.args.clone(), s.queue.clone()));
                    out.push(s);
                }
                let mut exec = Sent::new(args![if self.pct(95) { "EXEC" } else { "DISCARD" }]);
                exec.inner = inner;
                out.push(exec);
            }
            30..=59 => {
                // EVAL wrapping one command.
                self.counts.eval += 1;
                let a = if self.pct(80) {
                    self.orca_command()
                } else {
                    self.garbage_command()
                };
                let script = if self.pct(60) {
                    "return redis.pcall(unpack(ARGV))"
                } else {
                    "return redis.call(unpack(ARGV))"
                };
                let mut e = args!["EVAL", script, "0"];
                e.extend(a.iter().cloned());
                let mut s = Sent::new(e);
                s.queue = a.get(1).cloned();
                s.inner = vec![(a, None)];
                out.push(s);
            }
            60..=159 => out.push(Sent::new(self.key_command())),
            160..=339 => out.push(Sent::new(self.garbage_command())),
            _ => out.push(Sent::new(self.orca_command())),
        }
    }
}
