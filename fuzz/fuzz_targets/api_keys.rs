#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vitistack::fuzz::api_keys(data));
