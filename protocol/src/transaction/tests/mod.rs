//! The transactions' tests on the simulated network (`crate::sim`), by concern; each unit's
//! own tests sit beside it (inline, or `tests.rs` when long).

mod backoff;
mod floor;
mod replica_check;
mod reply_order;
mod tag;
