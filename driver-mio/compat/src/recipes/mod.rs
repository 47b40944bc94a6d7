//! foundationdb-rs's recipes: distributed algorithms built on transactions.

#[cfg(feature = "recipes-leader-election")]
pub mod leader_election;
#[cfg(feature = "recipes-ranked-register")]
pub mod ranked_register;
