//! A raw RESP client for the fuzzer: pipelined, RESP2 or RESP3, every
//! reply kept as it came off the wire.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;

/// A reply as it came off the wire. Error and status lines are kept as
/// bytes: a module must not send invalid UTF-8 there, and the fuzzer wants
/// to see it if it does (a client library would fail to parse the reply).
#[derive(Clone, Debug, PartialEq)]
pub enum R {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Status(Vec<u8>),
    Err(Vec<u8>),
    Array(Vec<R>),
    Map(Vec<(R, R)>),
    Other(Vec<u8>),
}

impl R {
    pub fn is_ok(&self) -> bool {
        matches!(self, R::Status(s) if s == b"OK")
    }
}

/// One connection speaking RESP2 (or RESP3 after `HELLO 3`), pipelined.
pub struct Wire {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Wire {
    pub fn connect(port: u16, timeout: Duration) -> Wire {
        let w = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis-server");
        w.set_read_timeout(Some(timeout)).expect("read timeout");
        w.set_nodelay(true).ok();
        let r = BufReader::with_capacity(1 << 16, w.try_clone().expect("clone socket"));
        Wire { r, w }
    }

    pub fn line(&mut self) -> std::io::Result<Vec<u8>> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l)?;
        if l.len() < 2 || !l.ends_with(b"\r\n") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("bad reply line {:?}", String::from_utf8_lossy(&l)),
            ));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    pub fn num(l: &[u8]) -> std::io::Result<i64> {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad number {l:?}")))
    }

    pub fn blob(&mut self, n: i64) -> std::io::Result<Option<Vec<u8>>> {
        if n < 0 {
            return Ok(None);
        }
        let mut b = vec![0u8; n as usize + 2];
        self.r.read_exact(&mut b)?;
        b.truncate(n as usize);
        Ok(Some(b))
    }

    pub fn read(&mut self) -> std::io::Result<R> {
        loop {
            let l = self.line()?;
            let (t, rest) = (l[0], &l[1..]);
            return Ok(match t {
                b'+' => R::Status(rest.to_vec()),
                b'-' => R::Err(rest.to_vec()),
                b':' => R::Int(Self::num(rest)?),
                b'$' => match self.blob(Self::num(rest)?)? {
                    Some(b) => R::Bulk(b),
                    None => R::Nil,
                },
                b'!' => R::Err(self.blob(Self::num(rest)?)?.unwrap_or_default()),
                b'=' => R::Bulk(self.blob(Self::num(rest)?)?.unwrap_or_default()),
                b'*' | b'~' => {
                    let n = Self::num(rest)?;
                    if n < 0 {
                        R::Nil
                    } else {
                        let mut v = Vec::with_capacity(n as usize);
                        for _ in 0..n {
                            v.push(self.read()?);
                        }
                        R::Array(v)
                    }
                }
                b'%' => {
                    let n = Self::num(rest)?;
                    let mut v = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let k = self.read()?;
                        let x = self.read()?;
                        v.push((k, x));
                    }
                    R::Map(v)
                }
                b'>' | b'|' => {
                    // Push data (or an attribute) before the reply: skip it.
                    let n = Self::num(rest)?;
                    for _ in 0..n * if t == b'|' { 2 } else { 1 } {
                        self.read()?;
                    }
                    continue;
                }
                b'_' => R::Nil,
                b'#' | b',' | b'(' => R::Other(rest.to_vec()),
                _ => {
                    return Err(std::io::Error::other(format!(
                        "unknown reply type in {:?}",
                        String::from_utf8_lossy(&l)
                    )))
                }
            });
        }
    }

    pub fn pipeline(&mut self, cmds: &[&[Vec<u8>]]) -> std::io::Result<Vec<R>> {
        let mut out = Vec::new();
        for c in cmds {
            pack(&mut out, c);
        }
        self.w.write_all(&out)?;
        (0..cmds.len()).map(|_| self.read()).collect()
    }

    pub fn call(&mut self, args: &[Vec<u8>]) -> R {
        let mut out = Vec::new();
        pack(&mut out, args);
        self.w
            .write_all(&out)
            .and_then(|_| self.read())
            .unwrap_or_else(|e| panic!("I/O error running {}: {e}", show_args(args)))
    }

    pub fn info(&mut self, section: &str) -> HashMap<String, String> {
        match self.call(&args!["INFO", section]) {
            R::Bulk(b) => String::from_utf8_lossy(&b)
                .lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
            other => panic!("INFO {section}: {other:?}"),
        }
    }
}
