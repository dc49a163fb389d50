//! The options of the commands that finish a delivery (`ORCA.ACK`,
//! `ORCA.NACK`): `NAME value` options, the flag `STOP`, `FORWARD <queue2>
//! <config>` and `NEXT ...` (the pop that follows). One walk of the
//! arguments serves both the command and the key positions Redis asks for
//! (`getkeys-api`): `<queue2>` is a key exactly when `FORWARD` stands where
//! an option's name stands, so a value that reads `FORWARD` (`RESULT
//! FORWARD`) is never taken for one, and ACL and Cluster check what the
//! command will write.

use redis_module::{RedisError, RedisString};

use super::args::{err, is_kw, printable, Options, MAX_OPTIONS};

/// A command's finish options.
pub struct Finish<'a> {
    /// The `NAME value` options (as `Options::parse` would give them).
    pub opts: Options<'a>,
    /// `STOP`: the parent's verdict is decided (a child's ACK).
    pub stop: bool,
    /// `FORWARD <queue2> <config>`.
    pub forward: Option<(&'a RedisString, &'a RedisString)>,
    /// The arguments after `NEXT`, if it was given.
    pub next: Option<&'a [RedisString]>,
}

/// What the command takes besides its `NAME value` options.
#[derive(Clone, Copy)]
pub struct Grammar {
    pub valued: &'static [&'static str],
    pub stop: bool,
}

pub const ACK: Grammar = Grammar {
    valued: &["RESULT", "TTL", "NOW"],
    stop: true,
};

pub const NACK: Grammar = Grammar {
    valued: &["DELAY", "NOW", "MAXATTEMPTS"],
    stop: false,
};

/// One step of the walk.
enum Item<'a> {
    Valued(usize, Option<&'a RedisString>),
    Stop,
    Forward(Option<(&'a RedisString, &'a RedisString)>),
    Next,
    Unknown,
}

fn item<'a>(g: Grammar, rest: &'a [RedisString], i: usize) -> (Item<'a>, usize) {
    let a = &rest[i];
    if is_kw(a, "NEXT") {
        return (Item::Next, rest.len());
    }
    if is_kw(a, "FORWARD") {
        let v = rest.get(i + 1).zip(rest.get(i + 2));
        return (Item::Forward(v), i + 3);
    }
    if g.stop && is_kw(a, "STOP") {
        return (Item::Stop, i + 1);
    }
    match g.valued.iter().position(|n| is_kw(a, n)) {
        Some(k) => (Item::Valued(k, rest.get(i + 1)), i + 2),
        None => (Item::Unknown, rest.len()),
    }
}

/// Parse the options after `<queue> <orca-key> <lease>`.
pub fn parse<'a>(g: Grammar, rest: &'a [RedisString]) -> Result<Finish<'a>, RedisError> {
    let mut values = [None; MAX_OPTIONS];
    let (mut stop, mut forward, mut next) = (false, None, None);
    let mut i = 0;
    while i < rest.len() {
        let (it, after) = item(g, rest, i);
        match it {
            Item::Next => next = rest.get(i + 1..),
            Item::Forward(v) => {
                if forward.is_some() {
                    return Err(err("option FORWARD given twice"));
                }
                forward = Some(v.ok_or_else(|| err("option FORWARD needs a queue and a config"))?);
            }
            Item::Stop => {
                if stop {
                    return Err(err("option STOP given twice"));
                }
                stop = true;
            }
            Item::Valued(k, v) => {
                let name = g.valued[k];
                if values[k].is_some() {
                    return Err(err(format!("option {name} given twice")));
                }
                values[k] = Some(v.ok_or_else(|| err(format!("option {name} needs a value")))?);
            }
            Item::Unknown => {
                let mut names: Vec<&str> = g.valued.to_vec();
                if g.stop {
                    names.push("STOP");
                }
                names.extend(["FORWARD", "NEXT"]);
                return Err(err(format!(
                    "unknown option '{}' (allowed: {})",
                    printable(&rest[i]),
                    names.join(", ")
                )));
            }
        }
        i = after;
    }
    Ok(Finish {
        opts: Options::with_values(g.valued, values),
        stop,
        forward,
        next,
    })
}

/// The position in `args` (the whole command) of `<queue2>`, when a
/// `FORWARD` stands as an option with both its values; the values' own
/// validity does not matter (a refused command writes nothing anyway).
pub fn forward_key(g: Grammar, args: &[RedisString]) -> Option<usize> {
    const FIRST: usize = 4; // NAME queue orca-key lease
    let rest = args.get(FIRST..)?;
    let mut i = 0;
    while i < rest.len() {
        let (it, after) = item(g, rest, i);
        match it {
            Item::Forward(Some(_)) => return Some(FIRST + i + 1),
            Item::Forward(None) | Item::Next | Item::Unknown => return None,
            Item::Stop | Item::Valued(..) => {}
        }
        i = after;
    }
    None
}
