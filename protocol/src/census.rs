//! What the core holds on the application's behalf, counted: a driver (or a test) checks
//! that dropped transactions and abandoned requests really leave nothing behind.

/// Counts of the core's live state (see [`crate::Client::census`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Transactions not yet destroyed.
    pub transactions: usize,
    /// Transaction requests (reads, commits, `on_error`, watches) not yet finished.
    pub requests: usize,
    /// Watches among them, set or waiting for their commit.
    pub watches: usize,
    /// Cluster requests outside transactions in flight: `\xff\xff/status/json` reads, the
    /// cluster-filled special-key reads, coordinator and exclusion safety checks, global
    /// configuration refreshes.
    pub status_reads: usize,
}

impl Census {
    /// Nothing held: every transaction destroyed, every request finished or cancelled.
    pub fn is_empty(&self) -> bool {
        *self == Census::default()
    }
}
