//! cargo-fuzz target `ops`: see `orca_fuzz::ops` (src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    orca_fuzz::ops(data);
});
