#![no_main]

use libfuzzer_sys::fuzz_target;

// A whole session on the simulated world (`fdb_tests::sim`): the input picks the seed, the
// faults and the transactions; the simulated test cluster answers.
fuzz_target!(|data: &[u8]| fdb_tests::sim::fuzzing::session(data));
