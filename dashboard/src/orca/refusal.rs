//! The module's refusals (docs/commands.md, "Error codes"): every error
//! reply is a code, the code's fixed fields, then a text for people. The
//! dashboard decides by the code and reads the fields; it only shows the
//! text, never parses it.

/// One refusal: `NOJOB no such job`, `TOOMANY 1000 LIMIT must be ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `ERR` for a malformed command, else the condition (`NOJOB`, ...).
    pub code: String,
    /// The code's fixed fields, as sent.
    pub fields: Vec<String>,
    /// The text after them.
    pub text: String,
}

/// How many fields follow a code (docs/commands.md's table): `DELAYED
/// <retry_at>`, `HELD <gate>`, `TOOMANY <max>`.
fn field_count(code: &str) -> usize {
    match code {
        "DELAYED" | "HELD" | "TOOMANY" => 1,
        _ => 0,
    }
}

impl Refusal {
    /// From an error reply's code and the rest of its line.
    pub fn new(code: &str, rest: &str) -> Refusal {
        let n = field_count(code);
        let mut parts = rest.splitn(n + 1, ' ');
        let fields = parts.by_ref().take(n).map(str::to_string).collect();
        Refusal {
            code: code.to_string(),
            fields,
            text: parts.next().unwrap_or_default().to_string(),
        }
    }

    /// The largest COUNT or LIMIT the server takes (`orca.max-pop-count`),
    /// when this refused one for being over it.
    pub fn max_limit(&self) -> Option<u64> {
        if self.code != "TOOMANY" {
            return None;
        }
        self.fields.first()?.parse().ok()
    }

    /// The job named is not there (moved on, deleted, never existed).
    pub fn no_such_job(&self) -> bool {
        self.code == "NOJOB"
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_fields_and_text_are_split() {
        let r = Refusal::new("TOOMANY", "30 LIMIT must be between 0 and 30");
        assert_eq!(r.fields, ["30"]);
        assert_eq!(r.text, "LIMIT must be between 0 and 30");
        assert_eq!(r.max_limit(), Some(30));
        assert_eq!(r.to_string(), "LIMIT must be between 0 and 30");
        let held = Refusal::new("HELD", "img%20hw job is held behind gate 'img hw' (...)");
        assert_eq!(held.fields, ["img%20hw"]);
        assert_eq!(held.text, "job is held behind gate 'img hw' (...)");
        let none = Refusal::new("NOJOB", "no such job");
        assert!(none.no_such_job() && none.fields.is_empty());
        assert_eq!(none.text, "no such job");
    }

    #[test]
    fn only_toomany_tells_a_limit() {
        // The same words under ERR (a LIMIT below 0) are no maximum.
        assert_eq!(
            Refusal::new("ERR", "LIMIT must be between 0 and 100").max_limit(),
            None
        );
        assert_eq!(Refusal::new("TOOMANY", "").max_limit(), None);
        assert_eq!(Refusal::new("TOOMANY", "x LIMIT ...").max_limit(), None);
        assert!(!Refusal::new("ERR", "no such job").no_such_job());
    }
}
