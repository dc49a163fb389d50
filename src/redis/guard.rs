//! The one panic guard. Every place where Redis calls into the module
//! (commands, blocked-client callbacks, the timer, the command filter,
//! server events, INFO, every data type callback) runs its Rust code inside
//! `contain`: a panic must never unwind into Redis, which would abort the
//! server with every user's data in memory. A contained panic is logged
//! with the place it happened; the caller decides what the failure means
//! there (an error reply, a failed save, a refused load).
//!
//! Tests prove each place is covered by arming a panic in it: the
//! load-time-only setting `orca.debug-panic-in <place>` (see
//! redis.conf.example) makes `inject(<place>)` panic. It cannot be changed
//! on a running server.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::ffi;

/// `orca.debug-panic-in`: the place where `inject` panics (empty: none).
pub static PANIC_IN: Mutex<String> = Mutex::new(String::new());

/// Whether `PANIC_IN` names a place: read once at load (the setting is
/// immutable), so `inject` costs one relaxed load everywhere else.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Read `orca.debug-panic-in` (called once, at load, after the settings).
pub fn arm_from_setting() {
    let armed = PANIC_IN.lock().map(|p| !p.is_empty()).unwrap_or(false);
    ARMED.store(armed, Ordering::Relaxed);
    if armed {
        ffi::log_warning("orca.debug-panic-in is set: panics will be injected (for tests only)");
    }
}

/// Run `f`; a panic is contained, logged as happening in `place`, and
/// turned into `None`.
pub fn contain<T>(place: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string());
            ffi::log_warning(&format!("contained a panic in {place}: {what}"));
            None
        }
    }
}

/// Panic here if the tests armed this place (`orca.debug-panic-in`).
pub fn inject(place: &str) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let armed = match PANIC_IN.try_lock() {
        Ok(p) => !p.is_empty() && p.as_str() == place,
        Err(_) => false,
    };
    if armed {
        panic!("injected panic in {place} (orca.debug-panic-in)");
    }
}
