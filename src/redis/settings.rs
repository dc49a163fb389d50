//! Module-wide settings: `CONFIG SET/GET orca.<name>` and `loadmodule`
//! arguments. Every one is listed in redis.conf.example.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use redis_module::enum_configuration;

use crate::core::Order;

enum_configuration! {
    #[allow(non_camel_case_types)]
    pub enum OrderSetting {
        lifo = 0,
        fifo = 1,
    }
}

/// `orca.move-to-back-buffer`: ms added to the last score by `ORCA.MOVE ... DELAY`.
pub static MOVE_TO_BACK_BUFFER: AtomicI64 = AtomicI64::new(10_000);
/// `orca.default-order`: collation order of queues created from now on.
pub static DEFAULT_ORDER: Mutex<OrderSetting> = Mutex::new(OrderSetting::lifo);

pub fn move_to_back_buffer() -> i64 {
    MOVE_TO_BACK_BUFFER.load(Ordering::Relaxed)
}

pub fn default_order() -> Order {
    match DEFAULT_ORDER.lock().map(|g| g.clone()) {
        Ok(OrderSetting::fifo) => Order::Fifo,
        _ => Order::Lifo,
    }
}
