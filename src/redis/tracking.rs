//! Which queues have time-driven work pending (expiring leases, due retries,
//! results to forget), by (db, key name), with their next deadline. The
//! timer (`timer.rs`) ticks the due ones; everything that writes or loads a
//! queue keeps the entry current.
//!
//! A queue can also change its name or database without the module running
//! (RENAME, MOVE, COPY, SWAPDB). The command filter reports those commands
//! (`moved`); SWAPDB comes as a server event (`swap_dbs`). Redis keyspace
//! events are not used for this: Valkey 8.1 runs module keyspace callbacks
//! on the calling client and leaves it selected on the event's database
//! (after `MOVE k 2` the client would be on db 2).

use std::cell::RefCell;
use std::collections::HashMap;

/// (db, key name) of a tracked queue.
pub type Tracked = (i32, Vec<u8>);

/// Per db (a short list: few dbs hold queues with pending work), tracked
/// queue -> next deadline (None: look at it on the next round). A write
/// looks its queue up by the borrowed name, so tracking allocates only
/// for a queue new to the list; a db with nothing tracked has no entry.
type ByDb = Vec<(i32, HashMap<Vec<u8>, Option<i64>>)>;

/// A RENAME, COPY or MOVE seen by the command filter: where the queue it
/// names may be now.
struct Move {
    to: Tracked,
    /// Forgotten after this time (ms).
    until: i64,
}

/// How long a move is remembered, so that a move queued inside MULTI is
/// looked at again when EXEC runs it.
pub const MOVE_MEMORY_MS: i64 = 60_000;

#[derive(Default)]
struct State {
    by_db: ByDb,
    moves: Vec<Move>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Remember that `key` in `db` has work due at `deadline` (or none).
/// Queues with nothing pending (the common case) cost one emptiness check.
pub fn track(db: i32, key: &[u8], deadline: Option<i64>) {
    STATE.with(|s| {
        let t = &mut s.borrow_mut().by_db;
        match deadline {
            Some(d) => set(t, db, key, Some(d)),
            None if t.is_empty() => {}
            None => {
                let Some(i) = t.iter().position(|(d, _)| *d == db) else {
                    return;
                };
                if let Some((_, keys)) = t.get_mut(i) {
                    keys.remove(key);
                    if keys.is_empty() {
                        t.swap_remove(i);
                    }
                }
            }
        }
    });
}

/// `key` in `db` may hold a queue now: look at it on the next round.
pub fn look_at(db: i32, key: &[u8]) {
    STATE.with(|s| set(&mut s.borrow_mut().by_db, db, key, None));
}

fn set(t: &mut ByDb, db: i32, key: &[u8], v: Option<i64>) {
    let i = match t.iter().position(|(d, _)| *d == db) {
        Some(i) => i,
        None => {
            t.push((db, HashMap::new()));
            t.len() - 1
        }
    };
    if let Some((_, keys)) = t.get_mut(i) {
        match keys.get_mut(key) {
            Some(d) => *d = v,
            None => {
                keys.insert(key.to_vec(), v);
            }
        }
    }
}

/// The tracked queues due at `now` (or to be looked at).
pub fn due(now: i64) -> Vec<Tracked> {
    STATE.with(|s| {
        s.borrow()
            .by_db
            .iter()
            .flat_map(|(db, keys)| {
                keys.iter()
                    .filter(|(_, d)| d.is_none_or(|d| d <= now))
                    .map(|(k, _)| (*db, k.clone()))
            })
            .collect()
    })
}

/// A command about to run moves or copies `from` to `to`, into database
/// `to_db` (None: the same database as `from`). Only queues with pending
/// work matter, and those are tracked: each tracked `from` gives a place to
/// look at. Remembered for `MOVE_MEMORY_MS` (see `replay_moves`).
pub fn moved(from: &[u8], to: &[u8], to_db: Option<i32>, now: i64) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let targets: Vec<i32> = s
            .by_db
            .iter()
            .filter(|(_, keys)| keys.contains_key(from))
            .map(|(db, _)| to_db.unwrap_or(*db))
            .collect();
        s.moves.retain(|m| m.until > now);
        for db in targets {
            set(&mut s.by_db, db, to, None);
            s.moves.push(Move {
                to: (db, to.to_vec()),
                until: now.saturating_add(MOVE_MEMORY_MS),
            });
        }
    });
}

/// EXEC is about to run a transaction whose RENAME/COPY/MOVE the filter saw
/// when they were queued: look at their destinations again.
pub fn replay_moves(now: i64) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.moves.retain(|m| m.until > now);
        let targets: Vec<Tracked> = s.moves.iter().map(|m| m.to.clone()).collect();
        for (db, key) in targets {
            set(&mut s.by_db, db, &key, None);
        }
    });
}

/// SWAPDB exchanged two databases: so do their tracked queues.
pub fn swap_dbs(a: i32, b: i32) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (db, _) in s.by_db.iter_mut() {
            if *db == a {
                *db = b;
            } else if *db == b {
                *db = a;
            }
        }
        for m in s.moves.iter_mut() {
            if m.to.0 == a {
                m.to.0 = b;
            } else if m.to.0 == b {
                m.to.0 = a;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset() {
        STATE.with(|s| *s.borrow_mut() = State::default());
    }

    #[test]
    fn tracks_moves_of_tracked_queues_only() {
        reset();
        track(0, b"q", Some(100));
        track(3, b"q", Some(50));
        assert!(due(10).is_empty());
        let mut d = due(100);
        d.sort();
        assert_eq!(d, vec![(0, b"q".to_vec()), (3, b"q".to_vec())]);
        // RENAME q r in whatever db: both dbs that track q look at r.
        moved(b"q", b"r", None, 0);
        let mut d = due(0);
        d.sort();
        assert_eq!(d, vec![(0, b"r".to_vec()), (3, b"r".to_vec())]);
        // Untracked keys are nobody's business.
        moved(b"nothing", b"x", Some(5), 0);
        assert!(!due(0).iter().any(|(_, k)| k == b"x"));
        // The timer dropped r (not a queue yet: MULTI); EXEC looks again.
        track(0, b"r", None);
        track(3, b"r", None);
        replay_moves(1);
        assert_eq!(due(1).len(), 2);
        // Forgotten after the memory.
        track(0, b"r", None);
        track(3, b"r", None);
        replay_moves(MOVE_MEMORY_MS + 1);
        assert!(due(MOVE_MEMORY_MS + 1).iter().all(|(_, k)| k != b"r"));
        // MOVE q 7 from db 0 and db 3: both land in 7.
        moved(b"q", b"q", Some(7), 0);
        assert!(due(0).contains(&(7, b"q".to_vec())));
        swap_dbs(7, 8);
        assert!(due(0).contains(&(8, b"q".to_vec())));
        reset();
    }
}
