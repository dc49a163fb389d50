//! The RESP wire format by hand, for what a client library hides: commands
//! written to a raw socket, the first reply line as bytes, and RESP command
//! streams (AOF files) read back.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Append `args` as one RESP command (an array of bulk strings) to `out`.
pub fn pack(out: &mut Vec<u8>, args: &[impl AsRef<[u8]>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Send one command on a fresh socket; the raw first reply line (without
/// CRLF), or `None` if the server closed the connection (it died).
pub fn raw_line(port: u16, args: &[&[u8]]) -> Option<Vec<u8>> {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return None; // nothing listens: the server is gone
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    pack(&mut out, args);
    s.write_all(&out).ok()?;
    let mut r = BufReader::new(s);
    let mut line = Vec::new();
    match r.read_until(b'\n', &mut line) {
        Ok(n) if n > 0 => {
            line.truncate(line.len().saturating_sub(2));
            Some(line)
        }
        _ => None,
    }
}

/// Parse a RESP command stream (an AOF file without preamble) into
/// commands; parsing stops at the first thing that is not a whole command.
/// Returns the commands and the bytes left unparsed.
pub fn parse_resp_commands(mut b: &[u8]) -> (Vec<Vec<Vec<u8>>>, &[u8]) {
    fn line<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let i = b.windows(2).position(|w| w == b"\r\n")?;
        let l = &b[..i];
        *b = &b[i + 2..];
        Some(l)
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let start = b;
        let Some(n) = line(&mut b)
            .and_then(|l| l.strip_prefix(b"*"))
            .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
        else {
            return (out, start);
        };
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(len) = line(&mut b)
                .and_then(|l| l.strip_prefix(b"$"))
                .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
            else {
                return (out, start);
            };
            if b.len() < len + 2 {
                return (out, start);
            }
            cmd.push(b[..len].to_vec());
            b = &b[len + 2..];
        }
        out.push(cmd);
    }
    (out, b)
}
