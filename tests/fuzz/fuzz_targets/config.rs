//! cargo-fuzz target `config`: see `orca_fuzz::config` (src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    orca_fuzz::config(data);
});
