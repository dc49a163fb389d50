//! The random config writer: nested values, every field in every type,
//! escapes, surrogates, raw and invalid UTF-8, numbers of every shape,
//! duplicates, deep nesting, whitespace variants.

use crate::common::Rng;

/// Writes random configs. A `clean` generator makes only what serde_json
/// accepts at each position (raw invalid UTF-8 and lone surrogates still go
/// into skipped strings, where they are accepted), so that about half the
/// documents are accepted; the other half carries noise everywhere.
pub struct Gen<'r> {
    pub r: &'r mut Rng,
    pub out: Vec<u8>,
    pub clean: bool,
}

/// Where a string goes: parsed ones (the four fields, the keys of the top
/// level and of `collation`) are UTF-8 and surrogate checked, skipped ones
/// are not.
#[derive(Clone, Copy, PartialEq)]
pub enum Pos {
    Parsed,
    Skipped,
}

/// The first `GOOD_NUMBERS` have valid grammar.
pub const GOOD_NUMBERS: usize = 32;

pub const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "7",
    "60000",
    "123456789012",
    "9007199254740991",
    "9007199254740992",
    "-1",
    "-60000",
    "1.5",
    "1.0",
    "0.0",
    "-0.0",
    "1e2",
    "1E+2",
    "1e-2",
    "0e0",
    "1.5e3",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "-18446744073709551615",
    "-18446744073709551616",
    "99999999999999999999",
    "1e400",
    "-1e400",
    "1e-400",
    "1e99999999999",
    "01",
    "-01",
    "00",
    "-",
    "1.",
    "1.e3",
    ".5",
    "+1",
    "1e",
    "1e+",
    "--1",
    "0x10",
    "NaN",
    "Infinity",
    "1_000",
];

pub const NAMES: &[&str] = &[
    "key",
    "response_url",
    "collation",
    "priority",
    "gate",
    "g\\u0061te",
    "script",
    "files",
    "metadata_table",
    "x",
    "",
    "k\\u0065y",
    "priorit\\u0079",
    "Key",
    "key ",
    "type",
    "id",
    "\\ud800",
    "\\ud83d\\ude00",
    "caf\u{e9}",
];

impl Gen<'_> {
    pub fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    pub fn ws(&mut self) {
        match self.r.below(100) {
            0..=69 => {}
            70..=79 => self.put(" "),
            80..=84 => self.put("\n"),
            85..=89 => self.put("\t"),
            90..=93 => self.put("\r\n  "),
            94..=98 => self.put(" \t\r\n"),
            _ if self.clean => self.put(" "),
            _ => {
                let junk: &[&[u8]] = &[b"\x0c", b"\x0b", b"\xc2\xa0", b"\x00"];
                let j = *self.r.pick(junk);
                self.out.extend_from_slice(j);
            }
        }
    }

    pub fn string_body(&mut self, pieces: u64, pos: Pos) {
        let n = self.r.below(pieces + 1);
        for _ in 0..n {
            let mut k = self.r.below(100);
            if self.clean {
                let refused = match k {
                    68..=71 | 82..=87 => pos == Pos::Parsed,
                    88..=93 => true,
                    _ => false,
                };
                if refused {
                    k = 0;
                }
            }
            match k {
                0..=44 => {
                    let c = b"abcxyzXYZ0129 -_.:/?&=%{}[],~'"[self.r.below(30) as usize];
                    self.out.push(c);
                }
                45..=54 => {
                    let e = *self
                        .r
                        .pick(&["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]);
                    self.put(e);
                }
                55..=62 => {
                    let e = *self.r.pick(&[
                        "\\u0041", "\\u00e9", "\\u00E9", "\\u4e2d", "\\uffff", "\\u0000",
                        "\\u001f", "\\u007F", "\\uFEFF", "\\u0022", "\\u005c",
                    ]);
                    self.put(e);
                }
                63..=67 => {
                    let hi = 0xD800 + self.r.below(0x400);
                    let lo = 0xDC00 + self.r.below(0x400);
                    self.put(&format!("\\u{hi:04x}\\u{lo:04X}"));
                }
                68..=71 => {
                    let e = *self.r.pick(&[
                        "\\ud800",
                        "\\udbff",
                        "\\udc00",
                        "\\udfff",
                        "\\ud800\\u0041",
                        "\\ud800\\n",
                        "\\ud800\\ud800",
                        "\\udc00\\ud800",
                        "\\ud800x",
                        "\\ud800\\u",
                    ]);
                    self.put(e);
                }
                72..=81 => {
                    let e = *self.r.pick(&[
                        "\u{e9}",
                        "\u{4e2d}",
                        "\u{1f600}",
                        "\u{ffff}",
                        "\u{10ffff}",
                        "\u{7f}",
                        "\u{80}",
                    ]);
                    self.put(e);
                }
                82..=87 => {
                    let bad: &[&[u8]] = &[
                        b"\xff",
                        b"\x80",
                        b"\xc0\x80",
                        b"\xed\xa0\x80",
                        b"\xf4\x90\x80\x80",
                        b"\xe4\xb8",
                        b"\xf0\x9f\x98",
                        b"\xc3",
                    ];
                    let b = *self.r.pick(bad);
                    self.out.extend_from_slice(b);
                }
                88..=90 => {
                    let c = *self.r.pick(&[0x00u8, 0x01, 0x09, 0x0a, 0x1f]);
                    self.out.push(c);
                }
                91..=93 => {
                    let e = *self
                        .r
                        .pick(&["\\x41", "\\u12", "\\u12g4", "\\U0041", "\\'", "\\", "\\u"]);
                    self.put(e);
                }
                _ => {
                    let s = format!("{}", self.r.next_u64());
                    self.put(&s);
                }
            }
        }
    }

    /// A string; `plain` ones are mostly plain text.
    pub fn string(&mut self, plain: bool, pos: Pos) {
        self.out.push(b'"');
        if plain && self.r.chance(60) {
            let s = format!("job-{}", self.r.below(1_000_000));
            self.put(&s);
            if self.r.chance(30) {
                self.string_body(3, pos);
            }
        } else {
            self.string_body(8, pos);
        }
        self.out.push(b'"');
    }

    pub fn number(&mut self) {
        if self.r.chance(70) {
            let n = if self.clean {
                *self.r.pick(&NUMBERS[..GOOD_NUMBERS])
            } else {
                *self.r.pick(NUMBERS)
            };
            self.put(n);
        } else {
            if self.r.chance(30) {
                self.put("-");
            }
            let digits = 1 + self.r.below(24);
            for i in 0..digits {
                let d = if i == 0 && digits > 1 {
                    1 + self.r.below(9)
                } else {
                    self.r.below(10)
                };
                self.put(&d.to_string());
            }
            if self.r.chance(20) {
                self.put(".");
                let v = self.r.below(1000);
                self.put(&v.to_string());
            }
            if self.r.chance(15) {
                let e = *self.r.pick(&["e", "E", "e+", "e-", "E-"]);
                self.put(e);
                let v = self.r.below(400);
                self.put(&v.to_string());
            }
        }
    }

    /// An object key.
    pub fn name(&mut self, pos: Pos) {
        if self.r.chance(85) {
            self.out.push(b'"');
            let mut n = *self.r.pick(NAMES);
            if self.clean && pos == Pos::Parsed && n == "\\ud800" {
                n = "x";
            }
            self.put(n);
            self.out.push(b'"');
        } else {
            self.string(false, pos);
        }
    }

    pub fn deep(&mut self) {
        let n = match self.r.below(4) {
            0 => 126 + self.r.below(5) as usize,
            1 => self.r.below(300) as usize,
            2 => 1000 + self.r.below(3000) as usize,
            _ => 60 + self.r.below(10) as usize,
        };
        let obj = self.r.chance(40);
        for _ in 0..n {
            if obj {
                self.put("{\"a\":");
            } else {
                self.put("[");
            }
        }
        self.value(3);
        // Sometimes one closer short, or the wrong one.
        let spoil = !self.clean && self.r.chance(5);
        for i in 0..n {
            if spoil && i == n / 2 {
                self.put(if obj { "]" } else { "}" });
            } else {
                self.put(if obj { "}" } else { "]" });
            }
        }
    }

    /// Any value; `budget` bounds the nesting of the random part.
    pub fn value(&mut self, budget: u32) {
        self.ws();
        let pick = if budget == 0 {
            self.r.below(60)
        } else {
            self.r.below(100)
        };
        match pick {
            0..=7 => self.put("null"),
            8..=11 => self.put("true"),
            12..=15 => self.put("false"),
            16..=33 => self.number(),
            34..=59 => self.string(false, Pos::Skipped),
            60..=77 => {
                self.put("[");
                let n = self.r.below(5);
                for i in 0..n {
                    if i > 0 {
                        self.ws();
                        self.put(",");
                    }
                    self.value(budget - 1);
                }
                if n == 0 {
                    self.ws();
                }
                if !self.clean && self.r.chance(2) {
                    self.put(",");
                }
                self.put("]");
            }
            78..=95 => {
                self.put("{");
                let n = self.r.below(5);
                for i in 0..n {
                    if i > 0 {
                        self.ws();
                        self.put(",");
                    }
                    self.ws();
                    self.name(Pos::Skipped);
                    self.ws();
                    self.put(":");
                    self.value(budget - 1);
                }
                self.ws();
                if !self.clean && self.r.chance(2) {
                    self.put(",");
                }
                self.put("}");
            }
            96..=97 => self.deep(),
            _ if self.clean => self.put("[]"),
            _ => {
                let junk = *self.r.pick(&[
                    "nul",
                    "tru",
                    "NaN",
                    "'a'",
                    "",
                    "undefined",
                    "[1,]",
                    "{\"a\"}",
                ]);
                self.put(junk);
            }
        }
        self.ws();
    }

    /// `below(n)`, or `below(clean)` for a clean generator (the ranges
    /// past `clean` are what serde_json refuses at that position).
    pub fn choose(&mut self, n: u64, clean: u64) -> u64 {
        self.r.below(if self.clean { clean } else { n })
    }

    pub fn key_value(&mut self) {
        self.ws();
        match self.choose(100, 88) {
            0..=79 => self.string(true, Pos::Parsed),
            80..=87 => self.put("null"),
            _ => self.value(2),
        }
        self.ws();
    }

    pub fn priority_value(&mut self) {
        self.ws();
        match self.choose(100, 85) {
            0..=29 => {
                let v = self.r.below(1 << 20);
                self.put(&v.to_string());
            }
            30..=69 => self.number(),
            70..=84 => self.put("null"),
            _ => self.value(2),
        }
        self.ws();
    }

    pub fn collation_value(&mut self) {
        self.ws();
        match self.choose(100, 85) {
            0..=69 => {
                self.put("{");
                let mut members: Vec<u8> = Vec::new();
                if self.r.chance(90) {
                    members.push(0);
                }
                if self.r.chance(90) {
                    members.push(1);
                }
                let others = self.r.below(3) as usize;
                members.extend(std::iter::repeat_n(2, others));
                if self.r.chance(10) {
                    members.push(0);
                }
                if self.r.chance(10) {
                    members.push(1);
                }
                shuffle(self.r, &mut members);
                for (i, m) in members.iter().enumerate() {
                    if i > 0 {
                        self.ws();
                        self.put(",");
                    }
                    self.ws();
                    match m {
                        0 => {
                            let name = *self.r.pick(&[
                                "\"type\"",
                                "\"type\"",
                                "\"typ\\u0065\"",
                                "\"Type\"",
                            ]);
                            self.put(name);
                            self.ws();
                            self.put(":");
                            self.ws();
                            match self.choose(100, 92) {
                                0..=44 => self.put("\"user\""),
                                45..=79 => self.put("\"team\""),
                                80..=84 => self.put("\"us\\u0065r\""),
                                85..=91 => self.put("null"),
                                _ => self.value(1),
                            }
                        }
                        1 => {
                            let name =
                                *self.r.pick(&["\"id\"", "\"id\"", "\"\\u0069d\"", "\"ID\""]);
                            self.put(name);
                            self.ws();
                            self.put(":");
                            self.ws();
                            match self.choose(100, 82) {
                                0..=34 => self.string(true, Pos::Parsed),
                                35..=44 => self.string(false, Pos::Parsed),
                                45..=49 => self.put("\"\""),
                                50..=74 => self.number(),
                                75..=81 => self.put("null"),
                                _ => self.value(2),
                            }
                        }
                        _ => {
                            self.name(Pos::Parsed);
                            self.ws();
                            self.put(":");
                            self.value(2);
                        }
                    }
                    self.ws();
                }
                self.ws();
                self.put("}");
            }
            70..=84 => self.put("null"),
            _ => self.value(2),
        }
        self.ws();
    }

    /// A whole config.
    pub fn document(&mut self) {
        self.ws();
        self.put("{");
        let mut members: Vec<u8> = Vec::new();
        if self.r.chance(90) {
            members.push(0);
        }
        for f in 1..5 {
            if self.r.chance(55) {
                members.push(f);
            }
        }
        let others = self.r.below(5) as usize;
        members.extend(std::iter::repeat_n(5, others));
        if self.r.chance(6) {
            let f = self.r.below(5) as u8;
            members.push(f);
        }
        shuffle(self.r, &mut members);
        for (i, m) in members.iter().enumerate() {
            if i > 0 {
                self.ws();
                self.put(",");
            }
            self.ws();
            let name = match m {
                0 if self.r.chance(5) => "\"k\\u0065y\"",
                0 => "\"key\"",
                1 => "\"response_url\"",
                2 => "\"collation\"",
                3 => "\"priority\"",
                4 if self.r.chance(5) => "\"g\\u0061te\"",
                4 => "\"gate\"",
                _ => "",
            };
            if name.is_empty() && self.clean && self.r.chance(90) {
                self.put("\"other\"");
            } else if name.is_empty() {
                self.name(Pos::Parsed);
            } else {
                self.put(name);
            }
            self.ws();
            self.put(":");
            match m {
                0 | 1 | 4 => self.key_value(),
                2 => self.collation_value(),
                3 => self.priority_value(),
                _ => self.value(3),
            }
        }
        self.ws();
        if !self.clean && self.r.chance(2) {
            self.put(",");
        }
        self.put("}");
        self.ws();
        if !self.clean && self.r.chance(2) {
            let junk = *self.r.pick(&["x", "{}", "\x00", "/", "]"]);
            self.put(junk);
        }
    }
}

pub fn shuffle<T>(r: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}
