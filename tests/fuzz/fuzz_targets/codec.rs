//! cargo-fuzz target `codec`: see `orca_fuzz::codec` (src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    orca_fuzz::codec(data);
});
