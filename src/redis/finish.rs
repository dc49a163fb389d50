//! The options of the commands that finish a delivery (`ORCA.ACK`,
//! `ORCA.NACK`): `NAME value` options, the flag `STOP`, `FORWARD <queue2>
//! <config>` and `NEXT ...` (the pop that follows).
//!
//! One walk of the arguments (`scan`) serves both the command (`parse`)
//! and the key positions Redis asks the module for (`forward_key`, through
//! `getkeys-api`: see `keyspec.rs` and docs/security.md, "Keys named among
//! options"). `<queue2>` is a key exactly when the walk accepts the options
//! and `FORWARD` stands where an option's name stands, so a value that
//! reads `FORWARD` (`RESULT FORWARD`) is never taken for one, and the queue
//! the command writes is the one ACL and Cluster checked: the same function
//! of the same arguments.

use redis_module::{RedisError, RedisString};

use super::args::{err, kw_eq, printable_bytes, ArgBytes, Options, MAX_OPTIONS};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grammar {
    pub valued: &'static [&'static str],
    pub stop: bool,
}

pub const ACK: Grammar = Grammar {
    valued: &["RESULT", "TTL", "NOW"],
    stop: true,
};

pub const NACK: Grammar = Grammar {
    valued: &["DELAY", "NOW", "MAXATTEMPTS", "ERROR"],
    stop: false,
};

/// Where the options start: `NAME <queue> <orca-key> <lease>`.
pub const FIRST: usize = 4;

/// One step of the walk, by position.
enum Item {
    /// Option `k` of `valued`, with its value if there is one.
    Valued(usize, bool),
    Stop,
    /// `FORWARD`, with both its values if they are there.
    Forward(bool),
    Next,
    Unknown,
}

fn item<A: ArgBytes>(g: Grammar, rest: &[A], i: usize) -> (Item, usize) {
    let Some(a) = rest.get(i).map(ArgBytes::arg_bytes) else {
        return (Item::Unknown, rest.len());
    };
    if kw_eq(a, "NEXT") {
        return (Item::Next, rest.len());
    }
    if kw_eq(a, "FORWARD") {
        return (Item::Forward(i + 2 < rest.len()), i + 3);
    }
    if g.stop && kw_eq(a, "STOP") {
        return (Item::Stop, i + 1);
    }
    match g.valued.iter().position(|n| kw_eq(a, n)) {
        Some(k) => (Item::Valued(k, i + 1 < rest.len()), i + 2),
        None => (Item::Unknown, rest.len()),
    }
}

/// The options found, by position in `rest`.
struct Scan {
    /// The position of the value of `valued[k]`.
    values: [Option<usize>; MAX_OPTIONS],
    stop: bool,
    /// The position of `<queue2>` (its config follows it).
    forward: Option<usize>,
    /// Where the arguments after `NEXT` start.
    next: Option<usize>,
}

/// Why the walk refused the options.
enum Refusal {
    Twice(&'static str),
    NeedsValue(&'static str),
    ForwardNeedsValues,
    /// The position of an argument that is no option.
    Unknown(usize),
}

/// Walk the options after `<queue> <orca-key> <lease>`.
fn scan<A: ArgBytes>(g: Grammar, rest: &[A]) -> Result<Scan, Refusal> {
    let mut s = Scan {
        values: [None; MAX_OPTIONS],
        stop: false,
        forward: None,
        next: None,
    };
    let mut i = 0;
    while i < rest.len() {
        let (it, after) = item(g, rest, i);
        match it {
            Item::Next => s.next = Some(i + 1),
            Item::Forward(has_values) => {
                if s.forward.is_some() {
                    return Err(Refusal::Twice("FORWARD"));
                }
                if !has_values {
                    return Err(Refusal::ForwardNeedsValues);
                }
                s.forward = Some(i + 1);
            }
            Item::Stop => {
                if s.stop {
                    return Err(Refusal::Twice("STOP"));
                }
                s.stop = true;
            }
            Item::Valued(k, has_value) => {
                let name = g.valued[k];
                let slot = s.values.get_mut(k).ok_or(Refusal::Unknown(i))?;
                if slot.is_some() {
                    return Err(Refusal::Twice(name));
                }
                if !has_value {
                    return Err(Refusal::NeedsValue(name));
                }
                *slot = Some(i + 1);
            }
            Item::Unknown => return Err(Refusal::Unknown(i)),
        }
        i = after;
    }
    Ok(s)
}

/// Parse the options after `<queue> <orca-key> <lease>`.
pub fn parse<'a>(g: Grammar, rest: &'a [RedisString]) -> Result<Finish<'a>, RedisError> {
    let s = scan(g, rest).map_err(|r| refusal(g, rest, r))?;
    let values = s.values.map(|v| v.and_then(|i| rest.get(i)));
    let forward = match s.forward {
        Some(i) => Some(
            rest.get(i)
                .zip(rest.get(i + 1))
                .ok_or_else(|| refusal(g, rest, Refusal::ForwardNeedsValues))?,
        ),
        None => None,
    };
    Ok(Finish {
        opts: Options::with_values(g.valued, values),
        stop: s.stop,
        forward,
        next: s.next.map(|i| rest.get(i..).unwrap_or_default()),
    })
}

fn refusal(g: Grammar, rest: &[RedisString], r: Refusal) -> RedisError {
    match r {
        Refusal::Twice(name) => err(format!("option {name} given twice")),
        Refusal::NeedsValue(name) => err(format!("option {name} needs a value")),
        Refusal::ForwardNeedsValues => err("option FORWARD needs a queue and a config"),
        Refusal::Unknown(i) => {
            let mut names: Vec<&str> = g.valued.to_vec();
            if g.stop {
                names.push("STOP");
            }
            names.extend(["FORWARD", "NEXT"]);
            let arg = rest.get(i).map(|a| a.as_slice()).unwrap_or_default();
            err(format!(
                "unknown option '{}' (allowed: {})",
                printable_bytes(arg),
                names.join(", ")
            ))
        }
    }
}

/// The position in `args` (the whole command) of `<queue2>`: where `parse`
/// of the same arguments finds `FORWARD`'s queue, and nowhere when it
/// refuses them (the command then writes nothing).
pub fn forward_key<A: ArgBytes>(g: Grammar, args: &[A]) -> Option<usize> {
    let rest = args.get(FIRST..)?;
    scan(g, rest).ok()?.forward.map(|i| FIRST + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(g: Grammar, items: &[&str]) -> Option<usize> {
        let a: Vec<Vec<u8>> = items.iter().map(|s| s.as_bytes().to_vec()).collect();
        forward_key(g, &a)
    }

    #[test]
    fn queue2_only_where_forward_stands_as_an_option() {
        let ack = |rest: &[&str]| {
            let mut a = vec!["orca.ack", "q", "k", "1"];
            a.extend(rest);
            key(ACK, &a)
        };
        assert_eq!(ack(&[]), None);
        assert_eq!(ack(&["FORWARD", "q2", "{}"]), Some(5));
        assert_eq!(ack(&["forward", "q2", "{}"]), Some(5));
        assert_eq!(ack(&["RESULT", "FORWARD"]), None);
        assert_eq!(ack(&["RESULT", "FORWARD", "TTL", "5"]), None);
        assert_eq!(ack(&["RESULT", "FORWARD", "FORWARD", "q2", "{}"]), Some(7));
        assert_eq!(
            ack(&["TTL", "5", "FORWARD", "q2", "{}", "NEXT", "LEASE", "9"]),
            Some(7)
        );
        assert_eq!(ack(&["STOP", "FORWARD", "q2", "{}", "NEXT"]), Some(6));
        // Refused spellings name no second queue.
        assert_eq!(ack(&["FORWARD", "q2"]), None);
        assert_eq!(ack(&["FORWARD"]), None);
        assert_eq!(ack(&["FORWARD", "q2", "{}", "FORWARD", "q3", "{}"]), None);
        assert_eq!(ack(&["FORWARD", "q2", "{}", "BOGUS"]), None);
        assert_eq!(ack(&["FORWARD", "q2", "{}", "TTL"]), None);
        assert_eq!(ack(&["TTL", "1", "TTL", "2", "FORWARD", "q2", "{}"]), None);
        assert_eq!(ack(&["NEXT", "FORWARD", "q2", "{}"]), None);
        assert_eq!(ack(&["FOO", "FORWARD", "q2", "{}"]), None);
        assert_eq!(ack(&["FORWARD\0", "q2", "{}"]), None);
        assert_eq!(key(ACK, &["orca.ack", "q", "FORWARD", "1"]), None);
        let nack = |rest: &[&str]| {
            let mut a = vec!["orca.nack", "q", "k", "1"];
            a.extend(rest);
            key(NACK, &a)
        };
        assert_eq!(nack(&["DELAY", "FORWARD"]), None);
        assert_eq!(
            nack(&["DELAY", "5", "FORWARD", "q2", "{}", "NEXT"]),
            Some(7)
        );
        assert_eq!(nack(&["STOP", "FORWARD", "q2", "{}"]), None);
    }
}
