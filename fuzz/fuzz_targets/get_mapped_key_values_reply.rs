#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fdb_protocol::fuzzing::get_mapped_key_values_reply(data));
