//! Small generators: names in random case, queues, edge integers, times,
//! job configs (valid and mutated), orca keys and lease targets harvested
//! from replies, command options.

use crate::common::*;

use super::*;

impl Fuzz {
    // -- small generators ---------------------------------------------------

    pub(super) fn pct(&mut self, p: u64) -> bool {
        self.rng.chance(p)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    /// `s` in upper, lower or random case.
    pub(super) fn case(&mut self, s: &str) -> Vec<u8> {
        match self.below(6) {
            0..=2 => s.as_bytes().to_vec(),
            3 => s.to_ascii_lowercase().into_bytes(),
            _ => s
                .bytes()
                .map(|c| {
                    if self.rng.chance(50) {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                })
                .collect(),
        }
    }

    pub(super) fn random_bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.rng.next_u64() as u8).collect()
    }

    pub(super) fn queue(&mut self) -> Vec<u8> {
        match self.below(100) {
            0..=79 => self.rng.pick(QUEUES).to_vec(),
            80..=87 => self.rng.pick(COPIES).to_vec(),
            88..=97 => self.rng.pick(OTHERS).to_vec(),
            _ => self.random_bytes(12),
        }
    }

    pub(super) fn edge_int(&mut self) -> Vec<u8> {
        if self.pct(70) {
            self.rng.pick(EDGE_INTS).as_bytes().to_vec()
        } else {
            (self.rng.next_u64() as i64 >> self.below(64))
                .to_string()
                .into_bytes()
        }
    }

    /// A time or duration in ms: mostly valid, sometimes an edge value.
    pub(super) fn ms(&mut self, small: bool) -> Vec<u8> {
        match self.below(20) {
            0..=11 if small => self.below(200).to_string().into_bytes(),
            0..=11 => self.below(600_000).to_string().into_bytes(),
            12..=14 => (now_ms() + self.below(120_000) as i64 - 60_000)
                .to_string()
                .into_bytes(),
            15 => b"0".to_vec(),
            16 => MAX_TIME.to_string().into_bytes(),
            _ => self.edge_int(),
        }
    }

    /// A key name for configs: a small pool (so updates and regrades
    /// happen), unique names, or odd strings.
    pub(super) fn job_name(&mut self) -> String {
        match self.below(100) {
            0..=79 => format!("k{}", self.below(48)),
            80..=89 => {
                self.unique += 1;
                format!("u{}-{}", self.unique, self.rng.next_u64() % 1000)
            }
            90..=92 => String::new(),
            93..=94 => "x".repeat(1024 + self.below(3) as usize - 1),
            95 => "é😀\u{7f}\\u0000".to_string(),
            _ => format!("g{}-{}", self.below(8), self.below(40)),
        }
    }

    pub(super) fn url(&mut self, name: &str) -> Option<String> {
        match self.below(10) {
            0..=5 => Some(format!("http://cb/{name}")),
            6 => Some(String::new()),
            7 => Some("u".into()),
            _ => None,
        }
    }

    /// A Orca GradingJobConfig, mostly valid.
    pub(super) fn config(&mut self) -> Vec<u8> {
        let name = self.job_name();
        let url = self.url(&name);
        let mut fields: Vec<String> = Vec::new();
        if self.pct(97) {
            fields.push(format!("\"key\":{}", json_str(&name)));
        }
        if let Some(u) = &url {
            fields.push(format!("\"response_url\":{}", json_str(u)));
        }
        // Remember the orca key, so later commands can name the job.
        let okey = orca_key(&name, url.as_deref().unwrap_or(""));
        if self.pct(30) {
            push_bounded(&mut self.keys, okey.into_bytes(), 512, &mut self.rng);
        }
        if self.pct(60) {
            {
                let kind = match self.below(20) {
                    0..=9 => "\"user\"".to_string(),
                    10..=17 => "\"team\"".to_string(),
                    18 => "\"group\"".to_string(),
                    _ => "1".to_string(),
                };
                let id = match self.below(20) {
                    0..=11 => format!("\"{}\"", self.below(12)),
                    12..=14 => format!("{}", self.below(12)),
                    15 => "\"\"".to_string(),
                    16 => json_str(&"i".repeat(255 + self.below(3) as usize)),
                    17 => "-9223372036854775808".to_string(),
                    18 => "1.5".to_string(),
                    _ => "null".to_string(),
                };
                match self.below(12) {
                    0 => fields.push("\"collation\":null".into()),
                    1 => fields.push(format!("\"collation\":[{kind},{id}]")),
                    2 => fields.push(format!("\"collation\":{{\"type\":{kind}}}")),
                    3 => fields.push(format!(
                        "\"collation\":{{\"type\":{kind},\"id\":{id},\"id\":{id}}}"
                    )),
                    _ => fields.push(format!("\"collation\":{{\"type\":{kind},\"id\":{id}}}")),
                }
            }
        }
        if self.pct(60) {
            let p = match self.below(24) {
                0..=13 => self.below(5000).to_string(),
                14..=16 => "0".to_string(),
                17 => "9007199254740991".to_string(),
                18 => "9007199254740992".to_string(),
                19 => "-1".to_string(),
                20 => "1.5".to_string(),
                21 => "1e300".to_string(),
                22 => "\"5\"".to_string(),
                _ => "18446744073709551616".to_string(),
            };
            fields.push(format!("\"priority\":{p}"));
        }
        if self.pct(40) {
            let course = ["cs2500", "cs3500", "cs4500"][self.below(3) as usize];
            let tag = ["a", "b", "c"][self.below(3) as usize];
            fields.push(format!(
                "\"metadata_table\":{{\"course\":\"{course}\",\"tags\":[\"{tag}\",\"x\"],\"n\":{}}}",
                self.below(10)
            ));
        }
        if let Some(g) = self.gate_field() {
            fields.push(format!("\"gate\":{g}"));
        }
        match self.below(40) {
            0..=24 => fields.push("\"script\":[\"make\",\"test\"]".into()),
            25 => fields.push(format!("\"deep\":{}{}", "[".repeat(200), "]".repeat(200))),
            26 => fields.push(format!(
                "\"big\":\"{}\"",
                "b".repeat(self.below(300_000) as usize)
            )),
            27 => fields.push("\"key\":\"dup\"".into()),
            28 => fields.push("\"s\":\"\\ud800\\u0000\\n\"".into()),
            _ => {}
        }
        // Shuffle the fields a little.
        if fields.len() > 1 && self.pct(30) {
            let i = self.below(fields.len() as u64) as usize;
            let f = fields.remove(i);
            fields.push(f);
        }
        let mut json = format!("{{{}}}", fields.join(",")).into_bytes();
        match self.below(100) {
            0..=74 => {}
            75..=92 => json = self.mutate(json),
            93..=95 => json = format!(" \t\n{}\n ", String::from_utf8_lossy(&json)).into_bytes(),
            96 => json.extend_from_slice(b" trailing"),
            97 => json = b"[\"k\"]".to_vec(),
            98 => json = self.random_bytes(40),
            _ => json = Vec::new(),
        }
        json
    }

    /// Byte-level mutations.
    pub(super) fn mutate(&mut self, mut b: Vec<u8>) -> Vec<u8> {
        let rounds = 1 + self.below(3);
        for _ in 0..rounds {
            let n = b.len();
            match self.below(9) {
                0 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b.remove(i);
                }
                1 => {
                    let i = self.below(n as u64 + 1) as usize;
                    let c = *self.rng.pick(&[
                        b'"', b'{', b'}', b'[', b']', b',', b':', b'\\', 0, 0xff, b'9',
                    ]);
                    b.insert(i, c);
                }
                2 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b[i] ^= 1 << self.below(8);
                }
                3 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b.truncate(i);
                }
                4 if n > 2 => {
                    let i = self.below(n as u64) as usize;
                    let j = i + self.below((n - i) as u64) as usize;
                    let seg = b[i..j].to_vec();
                    let at = self.below(n as u64) as usize;
                    b.splice(at..at, seg);
                }
                5 if n > 1 => {
                    let i = self.below(n as u64) as usize;
                    let j = self.below(n as u64) as usize;
                    b.swap(i, j);
                }
                6 if n > 0 => {
                    // Replace a digit with an edge number.
                    if let Some(i) = b.iter().position(|c| c.is_ascii_digit()) {
                        let e = self.edge_int();
                        b.splice(i..i + 1, e);
                    }
                }
                7 => {
                    let i = self.below(n as u64 + 1) as usize;
                    b.splice(i..i, b"\\u0000".iter().copied());
                }
                _ => {
                    let i = self.below(n as u64 + 1) as usize;
                    b.insert(i, self.rng.next_u64() as u8);
                }
            }
        }
        b
    }

    pub(super) fn orca_key(&mut self) -> Vec<u8> {
        match self.below(100) {
            0..=74 if !self.keys.is_empty() => self.rng.pick(&self.keys).clone(),
            0..=79 => {
                let n = self.job_name();
                orca_key(&n, &format!("http://cb/{n}")).into_bytes()
            }
            80..=84 => {
                // A valid base64 of 32 random bytes: no such job.
                let raw: Vec<u8> = (0..32).map(|_| self.rng.next_u64() as u8).collect();
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .encode(raw)
                    .into_bytes()
            }
            85..=87 => {
                // 44 characters that are not base64 (or mis-padded).
                let mut k = if self.keys.is_empty() {
                    vec![b'A'; 44]
                } else {
                    self.rng.pick(&self.keys).clone()
                };
                let i = self.below(44) as usize;
                if i < k.len() {
                    k[i] = *self.rng.pick(&[b'.', b'=', b'-', b'_', 0, b' ']);
                }
                k
            }
            88..=90 => {
                let mut k = if self.keys.is_empty() {
                    vec![b'A'; 44]
                } else {
                    self.rng.pick(&self.keys).clone()
                };
                k.truncate(43);
                k
            }
            91..=93 => Vec::new(),
            _ => self.random_bytes(60),
        }
    }

    /// (queue, key, lease) of a harvested lease, or junk.
    pub(super) fn lease_target(&mut self) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        if !self.leases.is_empty() && self.pct(75) {
            self.counts.leases_used += 1;
            let i = self.below(self.leases.len() as u64) as usize;
            let (q, k, l) = self.leases[i].clone();
            // Sometimes the right lease on the wrong queue or key.
            return match self.below(20) {
                0 => (self.queue(), k, l),
                1 => {
                    let k2 = self.orca_key();
                    (q, k2, l)
                }
                _ => (q, k, l),
            };
        }
        let q = self.queue();
        let k = self.orca_key();
        let l = match self.below(4) {
            0 => self.edge_int(),
            1 => self.random_bytes(10),
            _ => (1 + self.below(5000)).to_string().into_bytes(),
        };
        (q, k, l)
    }

    /// Trailing options: each allowed one with some chance, in random order,
    /// sometimes an unknown one, a duplicate or a missing value.
    pub(super) fn options(&mut self, allowed: &[(&str, u8)]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut chosen: Vec<(&str, u8)> = allowed
            .iter()
            .copied()
            .filter(|_| self.rng.chance(35))
            .collect();
        if chosen.len() > 1 && self.pct(50) {
            chosen.reverse();
        }
        for (name, kind) in chosen {
            out.push(self.case(name));
            let v = self.option_value(kind);
            out.push(v);
        }
        match self.below(40) {
            0 => {
                let kw = *self.rng.pick(KEYWORDS);
                out.push(self.case(kw));
                let v = self.edge_int();
                out.push(v);
            }
            1 if !allowed.is_empty() => {
                let (name, kind) = *self.rng.pick(allowed);
                for _ in 0..2 {
                    out.push(self.case(name));
                    let v = self.option_value(kind);
                    out.push(v);
                }
            }
            2 if !allowed.is_empty() => {
                let (name, _) = *self.rng.pick(allowed);
                out.push(self.case(name));
            }
            3 => {
                let b = self.random_bytes(8);
                out.push(b);
            }
            _ => {}
        }
        out
    }

    /// Option value kinds: 0 time/ms, 1 small ms (lease/block), 2 count,
    /// 3 attempts, 4 bytes, 5 order, 6 offset/limit, 7 delivery format.
    pub(super) fn option_value(&mut self, kind: u8) -> Vec<u8> {
        if self.pct(8) {
            return self.edge_int();
        }
        match kind {
            0 => self.ms(false),
            1 if self.rng.chance(50) => (10_000 + self.below(600_000)).to_string().into_bytes(),
            1 => self.ms(true),
            2 => (1 + self.below(20)).to_string().into_bytes(),
            3 => self.below(8).to_string().into_bytes(),
            4 => {
                if self.pct(10) {
                    self.random_bytes(5000)
                } else {
                    self.random_bytes(40)
                }
            }
            5 => {
                let o = *self
                    .rng
                    .pick(&["LIFO", "FIFO", "lifo", "Fifo", "stack", ""]);
                o.as_bytes().to_vec()
            }
            7 => {
                let f = *self.rng.pick(&[
                    "VALUES", "MAP", "values", "Map", "VALUES", "map", "VALUE", "",
                ]);
                f.as_bytes().to_vec()
            }
            _ => self.below(30).to_string().into_bytes(),
        }
    }

    pub(super) fn name(&mut self, cmd: &str) -> Vec<u8> {
        self.case(cmd)
    }
}
