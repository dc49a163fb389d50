//! The command table: every `ORCA.*` command declared once, with its
//! handler, flags, arity, keys, ACL categories, summary and complexity.
//! Registration (`RedisModule_CreateCommand`) and the metadata of
//! `COMMAND INFO/DOCS/GETKEYS` are generated from it; a unit test checks
//! that docs/commands.md documents exactly these commands.

use std::ffi::CStr;

use redis_module::commands::{BeginSearch, FindKeys, KeySpec, KeySpecFlags};
use redis_module::{Context, RedisString};

use super::ffi::{self, CommandInfo};
use super::hooks::{self, Handler, Locator};
use super::{admin, finish, gates, inspect, jobs, mack, pop, worker};

/// Where a command's keys are.
#[derive(Clone, Copy, Debug)]
pub enum Keys {
    /// One queue key, the first argument.
    Queue,
    /// `numkeys` queue keys after a count that is the first argument.
    Counted,
    /// The queue, and a second queue named by a `FORWARD` option of a
    /// finish (ACK, NACK): located by the module (`getkeys-api`), which
    /// parses the options as the command does.
    Finish(Locator),
}

pub struct Command {
    /// The name, lowercase (Redis matches names case-insensitively).
    pub name: &'static CStr,
    pub handler: Handler,
    /// Redis command flags (`write`, `readonly`, `fast`, `deny-oom`, ...).
    pub flags: &'static CStr,
    /// Redis arity: the exact argument count including the name, or its
    /// negated minimum.
    pub arity: i32,
    pub keys: Keys,
    /// ACL categories beyond those the flags imply (Redis 7.2+ and Valkey
    /// apply them; 7.0 has no API for it).
    pub acl: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
}

impl Command {
    pub fn writes(&self) -> bool {
        self.flags
            .to_bytes()
            .split(|b| *b == b' ')
            .any(|f| f == b"write")
    }
}

const LOG: &CStr = c"O(log N) with N the queued jobs, plus the length of the job's collation";

/// The keys of a finish: the queue, and `<queue2>` of a `FORWARD` option.
fn finish_keys(g: finish::Grammar, args: &[RedisString]) -> Vec<usize> {
    let mut keys = Vec::with_capacity(2);
    if args.len() > 1 {
        keys.push(1);
    }
    keys.extend(finish::forward_key(g, args));
    keys
}

fn ack_keys(args: &[RedisString]) -> Vec<usize> {
    finish_keys(finish::ACK, args)
}

fn nack_keys(args: &[RedisString]) -> Vec<usize> {
    finish_keys(finish::NACK, args)
}

pub const COMMANDS: &[Command] = &[
    Command {
        name: c"orca.enqueue",
        handler: jobs::enqueue,
        flags: c"write deny-oom",
        arity: -3,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Create or update a job (PUT) in its collation",
        complexity: LOG,
    },
    Command {
        name: c"orca.immediate",
        handler: jobs::immediate,
        flags: c"write deny-oom",
        arity: -3,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Create or update an immediate job, upgrading a waiting one",
        complexity: LOG,
    },
    Command {
        name: c"orca.reenqueue",
        handler: jobs::reenqueue,
        flags: c"write deny-oom",
        arity: 4,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Hand a job back as immediate at its original arrival time",
        complexity: LOG,
    },
    Command {
        name: c"orca.move",
        handler: jobs::move_job,
        flags: c"write",
        arity: -4,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Release a job to the front or delay it to the back",
        complexity: LOG,
    },
    Command {
        name: c"orca.delete",
        handler: jobs::delete,
        flags: c"write fast",
        arity: 3,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Delete a job in any state, cancelling running leases",
        complexity: LOG,
    },
    Command {
        name: c"orca.pop",
        handler: pop::pop,
        flags: c"write fast",
        arity: -2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Lease (or take) the next job; optionally block",
        complexity: c"O(log N) per job",
    },
    Command {
        name: c"orca.mpop",
        handler: pop::mpop,
        flags: c"write",
        arity: -3,
        keys: Keys::Counted,
        acl: c"",
        summary: c"Lease (or take) the next job of the first of several queues that has one; optionally block on all",
        complexity: c"O(K + log N) per job, K the queues given",
    },
    Command {
        name: c"orca.ack",
        handler: worker::ack,
        flags: c"write fast getkeys-api",
        arity: -4,
        keys: Keys::Finish(ack_keys),
        acl: c"",
        summary: c"Complete a leased job, optionally keeping a result (and take the next: NEXT)",
        complexity: c"O(log N)",
    },
    Command {
        name: c"orca.mack",
        handler: mack::mack,
        flags: c"write",
        arity: -5,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Complete several leased jobs of a queue, each with its own outcome (and take their successors: NEXT)",
        complexity: c"O(M log N) for M leases, plus O(log N) per job NEXT takes",
    },
    Command {
        name: c"orca.nack",
        handler: worker::nack,
        flags: c"write fast getkeys-api",
        arity: -4,
        keys: Keys::Finish(nack_keys),
        acl: c"",
        summary: c"Fail a leased job: retry after backoff or dead-letter it (and take the next: NEXT)",
        complexity: c"O(log N)",
    },
    Command {
        name: c"orca.extend",
        handler: worker::extend,
        flags: c"write fast",
        arity: -5,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Extend a lease (heartbeat)",
        complexity: c"O(log N)",
    },
    Command {
        name: c"orca.result",
        handler: worker::result,
        flags: c"readonly fast",
        arity: 3,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Get the kept result of a completed job",
        complexity: c"O(1)",
    },
    Command {
        name: c"orca.dead",
        handler: worker::dead,
        flags: c"write",
        arity: -3,
        keys: Keys::Queue,
        acl: c"",
        summary: c"List, requeue or purge dead-lettered jobs",
        complexity: c"O(page) / O(log N)",
    },
    Command {
        name: c"orca.tick",
        handler: worker::tick,
        flags: c"write",
        arity: -2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Apply due time-driven changes (expiries, retries)",
        complexity: c"O(due items * log N)",
    },
    Command {
        name: c"orca.gate",
        handler: gates::gate,
        flags: c"write deny-oom",
        arity: 4,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Close a gate (hold its jobs), open it (queue them) or drop it (remove them)",
        complexity: c"O(1) to close; O(K log N) to open or drop a gate holding K jobs",
    },
    Command {
        name: c"orca.len",
        handler: inspect::len,
        flags: c"readonly fast",
        arity: 2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Number of queued jobs",
        complexity: c"O(1)",
    },
    Command {
        name: c"orca.check",
        handler: inspect::check,
        flags: c"readonly",
        arity: 2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Verify every queue invariant",
        complexity: c"O(N log N)",
    },
    Command {
        name: c"orca.status",
        handler: inspect::status,
        flags: c"readonly",
        arity: 3,
        keys: Keys::Queue,
        acl: c"",
        summary: c"A job's state and position",
        complexity: LOG,
    },
    Command {
        name: c"orca.list",
        handler: inspect::list,
        flags: c"readonly",
        arity: -2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Queued jobs in pop order with positions, paged and filtered",
        complexity: c"O(log N + page)",
    },
    Command {
        name: c"orca.stats",
        handler: inspect::stats,
        flags: c"readonly",
        arity: 2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Counts by state and wait-time statistics",
        complexity: c"O(N)",
    },
    Command {
        name: c"orca.settings",
        handler: admin::queue_settings,
        flags: c"write deny-oom",
        arity: -2,
        keys: Keys::Queue,
        acl: c"",
        summary: c"Read or set a queue's settings (order, lifetime, auto delay, running cap, bounds)",
        complexity: c"O(1)",
    },
    Command {
        name: c"orca.import",
        handler: admin::import,
        flags: c"write deny-oom",
        arity: 3,
        keys: Keys::Queue,
        acl: c"dangerous",
        summary: c"Add the jobs of a serialized queue (AOF rewrite form)",
        complexity: c"O(M log N)",
    },
];

/// The ACL category every command of the module is in, where the server
/// lets modules add categories (Redis 7.4+): `ACL SETUSER w +@orca`.
const CATEGORY: &CStr = c"orca";

fn key_specs(c: &Command) -> Vec<KeySpec> {
    let flags = if c.writes() {
        KeySpecFlags::READ_WRITE | KeySpecFlags::UPDATE | KeySpecFlags::ACCESS
    } else {
        KeySpecFlags::READ_ONLY | KeySpecFlags::ACCESS
    };
    match c.keys {
        Keys::Queue => vec![KeySpec::new(
            None,
            flags,
            BeginSearch::new_index(1),
            FindKeys::new_range(0, 1, 0),
        )],
        // The count at argument 1, the keys right after it.
        Keys::Counted => vec![KeySpec::new(
            None,
            flags,
            BeginSearch::new_index(1),
            FindKeys::new_keys_num(0, 1, 1),
        )],
        // The queue; the key after a `FORWARD`, which a keyword search
        // cannot tell from a value that reads `FORWARD`: marked incomplete,
        // so Redis asks the module (`getkeys-api`) for every spelling.
        Keys::Finish(_) => vec![
            KeySpec::new(
                None,
                KeySpecFlags::from_bits_truncate(flags.bits()),
                BeginSearch::new_index(1),
                FindKeys::new_range(0, 1, 0),
            ),
            KeySpec::new(
                None,
                flags | KeySpecFlags::INCOMPLETE,
                BeginSearch::new_keyword("FORWARD".into(), 4),
                FindKeys::new_range(0, 1, 0),
            ),
        ],
    }
}

/// The legacy (first key, last key, step) of a command. A counted key list
/// has none: Redis finds its keys through the key spec.
fn legacy_keys(c: &Command) -> (i32, i32, i32) {
    match c.keys {
        Keys::Queue | Keys::Finish(_) => (1, 1, 1),
        Keys::Counted => (0, 0, 0),
    }
}

/// Register every command of the table with its metadata. Returns what went
/// wrong, if anything: a command that could not be created fails the load;
/// metadata Redis refuses is logged and the command keeps Redis's defaults.
pub fn register(ctx: &Context) -> Result<Vec<String>, String> {
    let handlers = COMMANDS
        .iter()
        .map(|c| {
            let locate = match c.keys {
                Keys::Finish(l) => Some(l),
                Keys::Queue | Keys::Counted => None,
            };
            (c.name.to_str().unwrap_or("orca command"), c.handler, locate)
        })
        .collect();
    if !hooks::install(handlers) {
        return Err("the command table does not fit the entry points".into());
    }
    let category = ffi::add_acl_category(ctx, CATEGORY);
    let mut warnings = Vec::new();
    for (i, c) in COMMANDS.iter().enumerate() {
        if !ffi::create_command(ctx, c.name, hooks::entry(i), c.flags, legacy_keys(c)) {
            return Err(format!("could not create {:?}", c.name));
        }
        let info = CommandInfo {
            summary: c.summary,
            complexity: c.complexity,
            since: c"0.1.0",
            arity: c.arity,
            key_specs: key_specs(c),
        };
        if !ffi::set_command_info(ctx, c.name, info) {
            warnings.push(format!("could not set metadata of {:?}", c.name));
        }
        let mut acl = c.acl.to_bytes().to_vec();
        if category {
            if !acl.is_empty() {
                acl.push(b' ');
            }
            acl.extend_from_slice(CATEGORY.to_bytes());
        }
        if !acl.is_empty() {
            let acl = std::ffi::CString::new(acl).unwrap_or_default();
            // Redis 7.0 has no API for it: the flags' implied categories
            // (@write, @read, @fast, @slow) still apply.
            ffi::set_acl_categories(ctx, c.name, &acl);
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands docs/commands.md documents (its `## ORCA.X` headings).
    fn documented() -> Vec<String> {
        include_str!("../../docs/commands.md")
            .lines()
            .filter_map(|l| l.strip_prefix("## "))
            .filter(|h| h.starts_with("ORCA."))
            .map(|h| {
                h.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_lowercase()
            })
            .collect()
    }

    #[test]
    fn docs_name_every_command_of_the_table_and_no_other() {
        let mut table: Vec<String> = COMMANDS
            .iter()
            .map(|c| c.name.to_str().unwrap().to_string())
            .collect();
        let mut docs = documented();
        table.sort();
        docs.sort();
        assert_eq!(
            table, docs,
            "docs/commands.md headings vs the command table"
        );
    }

    #[test]
    fn the_table_is_well_formed() {
        assert!(COMMANDS.len() <= hooks::MAX_COMMANDS);
        let mut names = std::collections::HashSet::new();
        for c in COMMANDS {
            let name = c.name.to_str().unwrap();
            assert!(names.insert(name), "{name} declared twice");
            assert_eq!(name, name.to_lowercase(), "{name} is not lowercase");
            assert!(name.starts_with("orca."));
            // Every command takes its queue(s): at least `NAME queue`.
            assert!(c.arity >= 2 || c.arity <= -2, "{name}: arity {}", c.arity);
            let flags = c.flags.to_str().unwrap();
            assert!(
                flags.contains("write") != flags.contains("readonly"),
                "{name}: exactly one of write/readonly"
            );
            assert!(!c.summary.to_bytes().is_empty() && !c.complexity.to_bytes().is_empty());
        }
    }
}
