#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vitistack::fuzz::helm_release(data));
