//! DUMP payloads and serialized queues taken apart and put back together:
//! Redis's CRC-64 and RDB lengths, a module value's items, and the fields
//! of each serialized unit (`src/core/codec.rs`), so tests can forge
//! payloads that reach the module's loader.

#![allow(dead_code)]

/// CRC-64/Jones as Redis signs DUMP payloads: polynomial 0xad93d23594c935a9,
/// reflected, init 0, no final xor.
pub fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0xad93_d235_94c9_35a9_u64.reverse_bits();
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
            *e = crc;
        }
        t
    });
    let mut crc = 0u64;
    for &b in data {
        crc = table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// RDB length encoding.
pub fn rdb_len(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.push(0x40 | (v >> 8) as u8);
        out.push(v as u8);
    } else if v <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub struct RdbReader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl RdbReader<'_> {
    pub fn byte(&mut self) -> u8 {
        let b = self.buf[self.pos];
        self.pos += 1;
        b
    }
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        v
    }
    /// (value, is a special string encoding)
    pub fn len(&mut self) -> (u64, bool) {
        let b = self.byte();
        match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte() as u64, false),
            2 if b == 0x80 => (
                u32::from_be_bytes(self.take(4).try_into().unwrap()) as u64,
                false,
            ),
            2 if b == 0x81 => (u64::from_be_bytes(self.take(8).try_into().unwrap()), false),
            3 => ((b & 0x3f) as u64, true),
            _ => panic!("bad RDB length byte {b:#x}"),
        }
    }
    pub fn string(&mut self) -> Vec<u8> {
        let (v, enc) = self.len();
        if !enc {
            return self.take(v as usize);
        }
        match v {
            0 => (self.byte() as i8).to_string().into_bytes(),
            1 => i16::from_le_bytes(self.take(2).try_into().unwrap())
                .to_string()
                .into_bytes(),
            2 => i32::from_le_bytes(self.take(4).try_into().unwrap())
                .to_string()
                .into_bytes(),
            3 => {
                let clen = self.len().0 as usize;
                let ulen = self.len().0 as usize;
                let data = self.take(clen);
                let out = lzf_decompress(&data);
                assert_eq!(out.len(), ulen, "LZF length");
                out
            }
            _ => panic!("unknown string encoding {v}"),
        }
    }
}

pub fn lzf_decompress(input: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            out.extend_from_slice(&input[i..i + ctrl + 1]);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += input[i] as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + input[i] as usize + 1;
            i += 1;
            let start = out.len() - back;
            for k in 0..len + 2 {
                out.push(out[start + k]);
            }
        }
    }
    out
}

/// One item of a module value in RDB (opcode + value).
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Uint(u64),
    Str(Vec<u8>),
}

pub const RDB_TYPE_MODULE_2: u8 = 7;

/// A DUMP payload of a module value, taken apart.
#[derive(Clone, Debug)]
pub struct ModuleDump {
    pub module_id: u64,
    pub items: Vec<Item>,
    pub rdb_version: u16,
}

impl ModuleDump {
    pub fn parse(payload: &[u8]) -> ModuleDump {
        let n = payload.len();
        assert!(n > 10);
        let crc = u64::from_le_bytes(payload[n - 8..].try_into().unwrap());
        assert_eq!(
            crc64(&payload[..n - 8]),
            crc,
            "our CRC-64 must match Redis's"
        );
        let rdb_version = u16::from_le_bytes(payload[n - 10..n - 8].try_into().unwrap());
        let body = &payload[..n - 10];
        let mut r = RdbReader { buf: body, pos: 0 };
        assert_eq!(r.byte(), RDB_TYPE_MODULE_2);
        let (module_id, _) = r.len();
        let mut items = Vec::new();
        loop {
            match r.len().0 {
                0 => break,
                2 => items.push(Item::Uint(r.len().0)),
                5 => items.push(Item::Str(r.string())),
                op => panic!("unexpected module opcode {op}"),
            }
        }
        assert_eq!(r.pos, body.len(), "bytes after the module EOF");
        ModuleDump {
            module_id,
            items,
            rdb_version,
        }
    }

    /// The body (type, module id, items, EOF), plain strings.
    pub fn body_with(module_id: u64, items: &[Item]) -> Vec<u8> {
        let mut out = vec![RDB_TYPE_MODULE_2];
        rdb_len(&mut out, module_id);
        for it in items {
            match it {
                Item::Uint(v) => {
                    out.push(2);
                    rdb_len(&mut out, *v);
                }
                Item::Str(s) => {
                    out.push(5);
                    rdb_len(&mut out, s.len() as u64);
                    out.extend_from_slice(s);
                }
            }
        }
        out.push(0);
        out
    }

    pub fn body(&self) -> Vec<u8> {
        Self::body_with(self.module_id, &self.items)
    }

    /// Body + RDB version + CRC-64: a payload RESTORE accepts as genuine.
    pub fn sign(&self, body: &[u8]) -> Vec<u8> {
        let mut out = body.to_vec();
        out.extend_from_slice(&self.rdb_version.to_le_bytes());
        let crc = crc64(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn payload_with(&self, items: &[Item]) -> Vec<u8> {
        self.sign(&Self::body_with(self.module_id, items))
    }

    pub fn header(&self) -> Vec<u8> {
        match &self.items[0] {
            Item::Str(h) => h.clone(),
            other => panic!("header is {other:?}"),
        }
    }

    pub fn units(&self) -> Vec<Vec<u8>> {
        assert_eq!(self.items[1], Item::Uint(self.items.len() as u64 - 2));
        self.items[2..]
            .iter()
            .map(|i| match i {
                Item::Str(u) => u.clone(),
                other => panic!("unit is {other:?}"),
            })
            .collect()
    }

    /// Items for a header and units, with a correct unit count.
    pub fn items_for(header: &[u8], units: &[Vec<u8>]) -> Vec<Item> {
        let mut items = vec![Item::Str(header.to_vec()), Item::Uint(units.len() as u64)];
        items.extend(units.iter().map(|u| Item::Str(u.clone())));
        items
    }
}

/// What a field of a serialized unit is (see `src/core/codec.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum K {
    Type,
    Key,
    Time,
    Attempts,
    Len,
    Count,
    Score,
    Tie,
    Nonce,
    Flag,
    Token,
    Seq,
    Cause,
    Name,
    Data,
    /// A stack key (encoding version 2).
    Skey,
    /// The delivery a kept result came from (encoding version 3): a lease
    /// token, 0 when unknown (a result loaded from an older version).
    Delivery,
}

#[derive(Clone, Copy, Debug)]
pub struct Fld {
    pub off: usize,
    pub size: usize,
    pub k: K,
    pub value: u64,
}

pub struct UnitParser<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub out: Vec<Fld>,
}

impl UnitParser<'_> {
    pub fn f(&mut self, size: usize, k: K) -> u64 {
        let bytes = &self.buf[self.pos..self.pos + size];
        let mut v = [0u8; 8];
        if size <= 8 {
            v[..size].copy_from_slice(bytes);
        }
        let value = u64::from_le_bytes(v);
        self.out.push(Fld {
            off: self.pos,
            size,
            k,
            value,
        });
        self.pos += size;
        value
    }
    pub fn bytes(&mut self, k: K) {
        let n = self.f(8, K::Len) as usize;
        self.f(n, k);
    }
    pub fn job(&mut self) {
        self.f(32, K::Key);
        self.f(8, K::Time);
        self.f(4, K::Attempts);
        self.bytes(K::Data);
    }
    pub fn res(&mut self) {
        self.f(8, K::Score);
        self.f(8, K::Tie);
        self.f(8, K::Nonce);
    }
    pub fn parked(&mut self) {
        self.f(8, K::Time);
        self.f(4, K::Attempts);
        self.f(1, K::Flag);
        if self.f(1, K::Flag) == 1 {
            self.bytes(K::Name);
        }
        self.bytes(K::Data);
    }
    /// Optional bytes (encoding version 3): a flag, then the bytes if set.
    pub fn optional(&mut self, k: K) {
        if self.f(1, K::Flag) == 1 {
            self.bytes(k);
        }
    }
}

/// The fields of one unit, in order.
pub fn unit_fields(u: &[u8]) -> Vec<Fld> {
    let mut p = UnitParser {
        buf: u,
        pos: 0,
        out: Vec::new(),
    };
    match p.f(1, K::Type) {
        1 => {
            p.job();
            if p.f(1, K::Flag) == 1 {
                p.bytes(K::Name);
            }
            p.res();
            p.f(1, K::Flag);
        }
        2 => {
            p.bytes(K::Name);
            let m = p.f(8, K::Count);
            for _ in 0..m {
                p.job();
                p.f(8, K::Skey);
            }
            for _ in 0..m {
                p.res();
            }
        }
        3 => {
            p.f(8, K::Token);
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.f(1, K::Flag); // superseded
            p.parked();
            p.f(8, K::Time); // started_at
            p.optional(K::Data); // worker
        }
        4 => {
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.parked();
            p.optional(K::Data); // error
        }
        5 => {
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.f(8, K::Seq);
            p.f(1, K::Cause);
            p.parked();
            p.optional(K::Data); // error
        }
        6 => {
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.bytes(K::Data);
            p.f(8, K::Time); // finished_at
            p.f(8, K::Delivery);
            p.f(8, K::Time); // created_at
            p.f(4, K::Attempts);
            p.optional(K::Name); // collation
        }
        7 => {
            p.f(8, K::Token);
            p.f(8, K::Time);
        }
        t => panic!("unknown unit type {t} in a genuine dump"),
    }
    assert_eq!(p.pos, u.len(), "unit parser out of step with the codec");
    p.out
}

pub fn set_field(u: &[u8], f: &Fld, v: u64) -> Vec<u8> {
    let mut out = u.to_vec();
    out[f.off..f.off + f.size].copy_from_slice(&v.to_le_bytes()[..f.size]);
    out
}
