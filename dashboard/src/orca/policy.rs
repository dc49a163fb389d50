//! The grading policies' commands (docs/commands.md): listings by state
//! (`ORCA.LIST <q> STATE ... [GATE g]`, read-only), gates (`ORCA.GATE`),
//! changing a queue's settings (`ORCA.SETTINGS <q> <options>`), and the
//! running cap's `capped` flag (`ORCA.STATUS`). Each action is exactly one
//! module command, so it is atomic on the server.

use super::{Job, Orca, OrcaError, OrcaResult, Val};

/// The states `ORCA.LIST ... STATE` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Held,
    Leased,
    Delayed,
    Dead,
}

impl JobState {
    /// Listings offered on the jobs page (dead letters have their own tab).
    pub const LISTED: [JobState; 4] = [
        JobState::Queued,
        JobState::Held,
        JobState::Leased,
        JobState::Delayed,
    ];

    /// The argument of `STATE`.
    pub fn arg(self) -> &'static str {
        match self {
            JobState::Queued => "QUEUED",
            JobState::Held => "HELD",
            JobState::Leased => "LEASED",
            JobState::Delayed => "DELAYED",
            JobState::Dead => "DEAD",
        }
    }

    /// The state's name in replies, and in the dashboard's addresses.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Held => "held",
            JobState::Leased => "leased",
            JobState::Delayed => "delayed",
            JobState::Dead => "dead",
        }
    }

    /// What pages call it.
    pub fn label(self) -> &'static str {
        match self {
            JobState::Leased => "running",
            other => other.name(),
        }
    }

    /// From an address: the reply name, or `running` for leased.
    pub fn parse(s: &str) -> Option<JobState> {
        match s {
            "queued" => Some(JobState::Queued),
            "held" => Some(JobState::Held),
            "leased" | "running" => Some(JobState::Leased),
            "delayed" => Some(JobState::Delayed),
            "dead" => Some(JobState::Dead),
            _ => None,
        }
    }
}

impl Orca {
    /// `ORCA.LIST <q> STATE <s> [GATE <g>] OFFSET o LIMIT l`: O(offset +
    /// page) for every state but queued (O(log n + page)).
    pub async fn list_state(
        &self,
        queue: &str,
        state: JobState,
        gate: Option<&str>,
        offset: u64,
        limit: u64,
    ) -> OrcaResult<Vec<Job>> {
        let build = |offset: u64, limit: u64| {
            let mut cmd = redis::cmd("ORCA.LIST");
            cmd.arg(queue).arg("STATE").arg(state.arg());
            if let Some(g) = gate {
                cmd.arg("GATE").arg(g);
            }
            cmd.arg("OFFSET").arg(offset).arg("LIMIT").arg(limit);
            cmd
        };
        self.listing(queue, offset, limit, build, "ORCA.LIST STATE")
            .await
    }

    /// `ORCA.GATE <q> <g> CLOSE`: true if the gate was open.
    pub async fn gate_close(&self, queue: &str, gate: &str) -> OrcaResult<bool> {
        let v = self
            .act(redis::cmd("ORCA.GATE").arg(queue).arg(gate).arg("CLOSE"))
            .await?;
        v.as_int()
            .map(|n| n == 1)
            .ok_or_else(|| OrcaError::Protocol(format!("ORCA.GATE CLOSE: {v:?}")))
    }

    /// `ORCA.GATE <q> <g> OPEN`: how many held jobs entered the queue.
    pub async fn gate_open(&self, queue: &str, gate: &str) -> OrcaResult<i64> {
        let v = self
            .act(redis::cmd("ORCA.GATE").arg(queue).arg(gate).arg("OPEN"))
            .await?;
        v.as_int()
            .ok_or_else(|| OrcaError::Protocol(format!("ORCA.GATE OPEN: {v:?}")))
    }

    /// `ORCA.GATE <q> <g> DROP`: the configs of the removed jobs, as given,
    /// in arrival order.
    pub async fn gate_drop(&self, queue: &str, gate: &str) -> OrcaResult<Vec<String>> {
        let mut cmd = redis::cmd("ORCA.GATE");
        cmd.arg(queue).arg(gate).arg("DROP");
        let v: redis::Value = self.query(&cmd, false).await?;
        let items = match v {
            redis::Value::Array(a) | redis::Value::Set(a) => a,
            redis::Value::Nil => Vec::new(),
            other => {
                return Err(OrcaError::Protocol(format!("ORCA.GATE DROP: {other:?}")));
            }
        };
        items
            .into_iter()
            .map(|i| match i {
                // Configs are JSON the module parsed, so UTF-8; anything
                // else is kept visible rather than dropped.
                redis::Value::BulkString(b) => Ok(String::from_utf8(b)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())),
                other => Err(OrcaError::Protocol(format!(
                    "ORCA.GATE DROP: a config: {other:?}"
                ))),
            })
            .collect()
    }

    /// `ORCA.SETTINGS <q> <options...>`: the settings after the change.
    pub async fn change_settings(
        &self,
        queue: &str,
        options: &[String],
    ) -> OrcaResult<super::Fields> {
        let mut cmd = redis::cmd("ORCA.SETTINGS");
        cmd.arg(queue);
        for o in options {
            cmd.arg(o);
        }
        match self.act(&cmd).await? {
            Val::Map(f) => Ok(f),
            other => Err(OrcaError::Protocol(format!("ORCA.SETTINGS: {other:?}"))),
        }
    }

    /// For each orca key, whether it is a queued job waiting only because
    /// its collation is at the running cap (`capped` of `ORCA.STATUS`), in
    /// one pipeline: O(k log n).
    pub async fn capped(&self, queue: &str, keys: &[String]) -> OrcaResult<Vec<bool>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.cmd("ORCA.STATUS").arg(queue).arg(k);
        }
        let replies: Vec<redis::Value> = self.query_pipe(&pipe).await?;
        Ok(replies
            .into_iter()
            .map(|r| match Val::from_redis(r) {
                Val::Map(f) => f.int("capped") == Some(1),
                _ => false,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for s in JobState::LISTED.into_iter().chain([JobState::Dead]) {
            assert_eq!(JobState::parse(s.name()), Some(s));
            assert_eq!(JobState::parse(s.label()), Some(s));
            assert_eq!(s.arg(), s.name().to_uppercase());
        }
        assert_eq!(JobState::parse("QUEUED"), None);
        assert_eq!(JobState::parse(""), None);
    }
}
