//! The queue's settings as a form: what each one means, how its value is
//! read and shown (durations as `15m`, `1h30m`, `86400000`), and which
//! `ORCA.SETTINGS` options a submitted form amounts to. Only the settings
//! that differ from the values the form was rendered with are sent, so a
//! change made meanwhile by someone else to another setting is not undone.

use std::collections::HashMap;

use crate::orca::Fields;

/// Largest time the module takes (2^53 - 1 ms).
pub const MAX_MS: u64 = (1 << 53) - 1;
/// Largest count the module takes.
pub const MAX_COUNT: u64 = u32::MAX as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Order,
    Duration,
    Count,
}

/// One setting: its field in the `ORCA.SETTINGS` reply (and the form).
pub struct Spec {
    pub field: &'static str,
    pub label: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

pub const SPECS: [Spec; 9] = [
    Spec {
        field: "order",
        label: "collation order",
        kind: Kind::Order,
        help: "LIFO: a user's newest submission is graded first; FIFO: oldest first. \
               Jobs already queued keep their places.",
    },
    Spec {
        field: "lifetime",
        label: "job lifetime",
        kind: Kind::Duration,
        help: "A waiting (queued, held or retrying) job not handed out this long after its \
               release time becomes a dead letter with cause \u{201c}expired\u{201d}. 0 = never.",
    },
    Spec {
        field: "autodelay_window",
        label: "auto delay: window",
        kind: Kind::Duration,
        help: "Automatic delay by submission rate: a new job is delayed by the step for each \
               job its user/team submitted in this window before it. 0 = off (step and cap \
               must then be 0).",
    },
    Spec {
        field: "autodelay_step",
        label: "auto delay: step",
        kind: Kind::Duration,
        help: "Delay per earlier submission in the window. Immediate jobs are neither \
               delayed nor counted.",
    },
    Spec {
        field: "autodelay_cap",
        label: "auto delay: cap",
        kind: Kind::Duration,
        help: "Largest automatic delay. 0 = no cap.",
    },
    Spec {
        field: "maxrunning",
        label: "running cap per collation",
        kind: Kind::Count,
        help: "A worker never gets a job of a user/team that already has this many running. \
               0 = no cap. Immediate jobs are never capped.",
    },
    Spec {
        field: "deadmax",
        label: "dead letters kept",
        kind: Kind::Count,
        help: "Most dead letters kept; the oldest go first. 0 = no bound.",
    },
    Spec {
        field: "deadttl",
        label: "dead letters forgotten after",
        kind: Kind::Duration,
        help: "Dead letters are forgotten this long after they died. 0 = kept.",
    },
    Spec {
        field: "resultmax",
        label: "results kept",
        kind: Kind::Count,
        help: "Most kept ACK results; those expiring first go first. 0 = no bound \
               (results still expire with their TTL).",
    },
];

/// Fields of the `ORCA.SETTINGS` reply that are counts, not settings.
pub const NOT_SETTINGS: [&str; 3] = ["jobs", "held", "collations"];

const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
];

/// A duration in ms as the form shows it: exact, in the largest units
/// (`0`, `1500ms` is `1s500ms`, `5400000` is `1h30m`).
pub fn show_ms(ms: u64) -> String {
    if ms == 0 {
        return "0".into();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (unit, size) in UNITS {
        let n = rest / size;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
            rest %= size;
        }
    }
    out
}

/// Read a duration: plain milliseconds (`1500`), or whole numbers with
/// units `d`, `h`, `m`, `s`, `ms` (`15m`, `1h30m`, `1h 30m`, `90s`).
pub fn parse_ms(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    if s.is_empty() {
        return Err("is empty: give a duration (0 for none)".into());
    }
    let bad = || {
        format!(
            "\u{201c}{}\u{201d} is not a duration: use plain milliseconds (90000) or whole \
             numbers with units d, h, m, s, ms (15m, 1h30m)",
            crate::format::short(s, 40)
        )
    };
    let too_big = || format!("is too long: at most {MAX_MS} ms");
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<u64>() {
            Ok(n) if n <= MAX_MS => Ok(n),
            _ => Err(too_big()),
        };
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| too_big())?;
        rest = rest[digits..].trim_start();
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = rest[..letters].to_ascii_lowercase();
        let size = UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, size)| *size)
            .ok_or_else(bad)?;
        rest = rest[letters..].trim_start();
        total = n
            .checked_mul(size)
            .and_then(|v| total.checked_add(v))
            .filter(|v| *v <= MAX_MS)
            .ok_or_else(too_big)?;
    }
    Ok(total)
}

fn parse_count(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    if s.is_empty() {
        return Err("is empty: give a whole number (0 for none)".into());
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "\u{201c}{}\u{201d} is not a whole number >= 0",
            crate::format::short(s, 40)
        ));
    }
    match s.parse::<u64>() {
        Ok(n) if n <= MAX_COUNT => Ok(n),
        _ => Err(format!("is too large: at most {MAX_COUNT}")),
    }
}

/// A setting's value, read from a reply or a form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Order(String),
    Num(u64),
}

impl Value {
    /// As the form shows it.
    pub fn show(&self, kind: Kind) -> String {
        match (self, kind) {
            (Value::Order(o), _) => o.clone(),
            (Value::Num(n), Kind::Duration) => show_ms(*n),
            (Value::Num(n), _) => n.to_string(),
        }
    }

    /// As the reply has it (and the form's `was_` fields carry it).
    pub fn raw(&self) -> String {
        match self {
            Value::Order(o) => o.clone(),
            Value::Num(n) => n.to_string(),
        }
    }
}

pub fn parse(kind: Kind, raw: &str) -> Result<Value, String> {
    match kind {
        Kind::Order => match raw.trim().to_ascii_lowercase().as_str() {
            o @ ("lifo" | "fifo") => Ok(Value::Order(o.to_string())),
            _ => Err("must be LIFO or FIFO".into()),
        },
        Kind::Duration => parse_ms(raw).map(Value::Num),
        Kind::Count => parse_count(raw).map(Value::Num),
    }
}

/// The current value of a setting in a reply (`ORCA.SETTINGS`, or the
/// `settings` map of `ORCA.STATS`).
pub fn current(settings: &Fields, spec: &Spec) -> Option<Value> {
    match spec.kind {
        Kind::Order => settings
            .text(spec.field)
            .map(|o| Value::Order(o.to_ascii_lowercase())),
        _ => settings
            .int(spec.field)
            .and_then(|n| u64::try_from(n).ok())
            .map(Value::Num),
    }
}

/// A submitted settings form: per field, the text entered and the raw
/// value the form was rendered with (`was_<field>`).
pub struct Submitted<'a>(pub &'a HashMap<String, String>);

impl Submitted<'_> {
    pub fn entered(&self, field: &str) -> Option<&str> {
        self.0.get(field).map(String::as_str)
    }

    fn was(&self, spec: &Spec) -> Option<Value> {
        let raw = self.0.get(&format!("was_{}", spec.field))?;
        parse(spec.kind, raw).ok()
    }
}

/// What a form amounts to: the `ORCA.SETTINGS` options to send, or the
/// errors per field (nothing is sent unless every field reads).
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Change(Vec<String>),
    Unchanged,
    Invalid(Vec<(&'static str, String)>),
}

pub fn options(form: &Submitted) -> Outcome {
    let mut errors = Vec::new();
    let mut new: HashMap<&'static str, Value> = HashMap::new();
    let mut changed: HashMap<&'static str, bool> = HashMap::new();
    for spec in &SPECS {
        let Some(raw) = form.entered(spec.field) else {
            continue;
        };
        match parse(spec.kind, raw) {
            Ok(v) => {
                changed.insert(spec.field, form.was(spec).as_ref() != Some(&v));
                new.insert(spec.field, v);
            }
            Err(e) => errors.push((spec.field, format!("{}: {e}.", spec.label))),
        }
    }
    let num = |f: &str| match new.get(f) {
        Some(Value::Num(n)) => Some(*n),
        _ => None,
    };
    let is_changed = |f: &str| changed.get(f).copied().unwrap_or(false);
    let autodelay = ["autodelay_window", "autodelay_step", "autodelay_cap"];
    let autodelay_changed = autodelay.iter().any(|f| is_changed(f));
    if autodelay_changed && errors.iter().all(|(f, _)| !autodelay.contains(f)) {
        match (
            num("autodelay_window"),
            num("autodelay_step"),
            num("autodelay_cap"),
        ) {
            (Some(0), Some(step), cap) if step > 0 || cap.unwrap_or(0) > 0 => errors.push((
                "autodelay_window",
                "auto delay: a step or a cap needs a window (set the window, or set step and \
                 cap to 0 to turn the auto delay off)."
                    .into(),
            )),
            (Some(_), Some(_), _) => {}
            _ => errors.push((
                "autodelay_window",
                "auto delay: window and step are changed together; give both.".into(),
            )),
        }
    }
    if !errors.is_empty() {
        return Outcome::Invalid(errors);
    }
    let mut out = Vec::new();
    for spec in &SPECS {
        let Some(v) = new.get(spec.field) else {
            continue;
        };
        match spec.field {
            "autodelay_window" if autodelay_changed => {
                out.push("AUTODELAY".to_string());
                out.push(v.raw());
                out.push(new["autodelay_step"].raw());
                if let Some(cap) = new.get("autodelay_cap") {
                    out.push("CAP".to_string());
                    out.push(cap.raw());
                }
            }
            "autodelay_window" | "autodelay_step" | "autodelay_cap" => {}
            field if is_changed(field) => {
                out.push(field.to_ascii_uppercase());
                out.push(match v {
                    Value::Order(o) => o.to_ascii_uppercase(),
                    Value::Num(n) => n.to_string(),
                });
            }
            _ => {}
        }
    }
    if out.is_empty() {
        Outcome::Unchanged
    } else {
        Outcome::Change(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_show_exactly() {
        for (raw, ms) in [
            ("0", 0),
            ("1500", 1500),
            ("1500ms", 1500),
            ("90s", 90_000),
            ("15m", 900_000),
            ("1h30m", 5_400_000),
            ("1h 30m", 5_400_000),
            (" 2D ", 172_800_000),
            ("1d2h3m4s5ms", 93_784_005),
        ] {
            assert_eq!(parse_ms(raw), Ok(ms), "{raw}");
            assert_eq!(
                parse_ms(&show_ms(ms)),
                Ok(ms),
                "{raw} shown as {}",
                show_ms(ms)
            );
        }
        assert_eq!(show_ms(5_400_000), "1h30m");
        assert_eq!(show_ms(1500), "1s500ms");
        assert_eq!(show_ms(86_400_000), "1d");
        assert_eq!(parse_ms(&MAX_MS.to_string()), Ok(MAX_MS));
        assert_eq!(parse_ms(&show_ms(MAX_MS)), Ok(MAX_MS));
        for bad in [
            "",
            " ",
            "-1",
            "1.5h",
            "h",
            "5 parsecs",
            "15m-",
            "1e3",
            "m15",
        ] {
            assert!(parse_ms(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_ms("9007199254740992")
            .unwrap_err()
            .contains("too long"));
        assert!(parse_ms("999999999999999999999d")
            .unwrap_err()
            .contains("too long"));
        assert!(parse_ms("104249991375d").unwrap_err().contains("too long"));
    }

    #[test]
    fn counts_and_orders() {
        assert_eq!(parse(Kind::Count, " 7 "), Ok(Value::Num(7)));
        assert!(parse(Kind::Count, "4294967296")
            .unwrap_err()
            .contains("too large"));
        assert!(parse(Kind::Count, "-1")
            .unwrap_err()
            .contains("whole number"));
        assert!(parse(Kind::Count, "").unwrap_err().contains("empty"));
        assert_eq!(parse(Kind::Order, "FIFO"), Ok(Value::Order("fifo".into())));
        assert!(parse(Kind::Order, "random").is_err());
    }

    fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn current_form(extra: &[(&str, &str)]) -> HashMap<String, String> {
        let mut f = form(&[
            ("order", "lifo"),
            ("was_order", "lifo"),
            ("lifetime", "0"),
            ("was_lifetime", "0"),
            ("autodelay_window", "0"),
            ("was_autodelay_window", "0"),
            ("autodelay_step", "0"),
            ("was_autodelay_step", "0"),
            ("autodelay_cap", "0"),
            ("was_autodelay_cap", "0"),
            ("maxrunning", "0"),
            ("was_maxrunning", "0"),
        ]);
        for (k, v) in extra {
            f.insert(k.to_string(), v.to_string());
        }
        f
    }

    #[test]
    fn only_changed_settings_are_sent() {
        assert_eq!(options(&Submitted(&current_form(&[]))), Outcome::Unchanged);
        // the same value written another way is no change
        assert_eq!(
            options(&Submitted(&current_form(&[
                ("lifetime", "1d"),
                ("was_lifetime", "86400000")
            ]))),
            Outcome::Unchanged
        );
        assert_eq!(
            options(&Submitted(&current_form(&[
                ("lifetime", "1d"),
                ("maxrunning", "2"),
                ("order", "FIFO")
            ]))),
            Outcome::Change(
                ["ORDER", "FIFO", "LIFETIME", "86400000", "MAXRUNNING", "2"]
                    .map(String::from)
                    .to_vec()
            )
        );
        // the three auto delay fields go together, with their CAP
        assert_eq!(
            options(&Submitted(&current_form(&[
                ("autodelay_window", "15m"),
                ("autodelay_step", "1m")
            ]))),
            Outcome::Change(
                ["AUTODELAY", "900000", "60000", "CAP", "0"]
                    .map(String::from)
                    .to_vec()
            )
        );
        // a field without its `was_` is sent
        assert_eq!(
            options(&Submitted(&form(&[("deadmax", "10")]))),
            Outcome::Change(["DEADMAX", "10"].map(String::from).to_vec())
        );
    }

    #[test]
    fn bad_forms_say_why_and_send_nothing() {
        let Outcome::Invalid(e) = options(&Submitted(&current_form(&[
            ("lifetime", "soon"),
            ("maxrunning", "-2"),
        ]))) else {
            panic!("accepted");
        };
        assert_eq!(e.len(), 2);
        assert!(
            e[0].1.starts_with("job lifetime: “soon” is not a duration"),
            "{e:?}"
        );
        assert_eq!(e[1].0, "maxrunning");
        let Outcome::Invalid(e) = options(&Submitted(&current_form(&[("autodelay_step", "1m")])))
        else {
            panic!("accepted");
        };
        assert!(e[0].1.contains("needs a window"), "{e:?}");
        let Outcome::Invalid(e) = options(&Submitted(&form(&[("autodelay_window", "1m")]))) else {
            panic!("accepted");
        };
        assert!(e[0].1.contains("give both"), "{e:?}");
    }
}
