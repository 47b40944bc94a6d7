//! Transaction options: what the application may set, and what a transaction keeps of them.

use super::fdb;
use crate::error::ErrorCode;
use alloc::vec::Vec;
use core::time::Duration;

use super::op::Timer;
use super::{Transactions, TRANSACTION_SIZE_LIMIT};
use crate::error::knobs;
use crate::event::ClientError;
use crate::grv::Priority;
use crate::ids::TransactionId;

/// Transaction options (`FDBTransactionOption`) that change what the client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionOption {
    /// Fail with `transaction_timed_out` this long after the transaction was created.
    Timeout(Duration),
    /// How many `on_error` retries; `None` = unlimited.
    RetryLimit(Option<u32>),
    MaxRetryDelay(Duration),
    SizeLimit(usize),
    ReadYourWritesDisable,
    NextWriteNoWriteConflictRange,
    CausalReadRisky,
    CausalWriteRisky,
    PriorityBatch,
    PrioritySystemImmediate,
    AccessSystemKeys,
    ReadSystemKeys,
    ReportConflictingKeys,
    /// Works on a locked database (`lock_aware`).
    LockAware,
}

/// Which conflict range [`Client::add_conflict_range`] adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictRangeType {
    Read,
    Write,
}

#[derive(Clone, Debug)]
pub(super) struct TxOptions {
    pub(super) timeout: Option<Duration>,
    pub(super) retry_limit: Option<u32>,
    pub(super) max_retry_delay: Duration,
    pub(super) size_limit: usize,
    pub(super) ryw_disabled: bool,
    pub(super) next_write_no_conflict: bool,
    pub(super) causal_read_risky: bool,
    pub(super) causal_write_risky: bool,
    pub(super) priority: Priority,
    pub(super) access_system_keys: bool,
    pub(super) read_system_keys: bool,
    pub(super) report_conflicting_keys: bool,
    pub(super) lock_aware: bool,
}

impl TxOptions {
    /// NativeAPI's `rawAccess`: system key access implies it.
    pub(super) fn raw_access(&self) -> bool {
        self.read_system_keys || self.access_system_keys
    }
}

impl Default for TxOptions {
    fn default() -> Self {
        TxOptions {
            timeout: None,
            retry_limit: None,
            max_retry_delay: knobs::DEFAULT_MAX_BACKOFF,
            size_limit: TRANSACTION_SIZE_LIMIT,
            ryw_disabled: false,
            next_write_no_conflict: false,
            causal_read_risky: false,
            causal_write_risky: false,
            priority: Priority::Default,
            access_system_keys: false,
            read_system_keys: false,
            report_conflicting_keys: false,
            lock_aware: false,
        }
    }
}

impl Transactions {
    /// Database-wide defaults for new transactions (libfdb_c's `transaction_timeout`,
    /// `transaction_retry_limit`, ... database options): applied to every transaction when
    /// it is created and when it is reset.
    pub(crate) fn set_transaction_defaults(&mut self, defaults: Vec<TransactionOption>) {
        self.defaults = defaults;
    }

    pub(super) fn apply_defaults(&mut self, tx: TransactionId) {
        for opt in self.defaults.clone() {
            let _ = self.set_option(tx, opt);
        }
    }

    /// Sets a transaction option. A refused option also fails the next read or the commit,
    /// as libfdb_c's `fdb_transaction_set_option` defers it.
    pub(crate) fn set_option(
        &mut self,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.set_option_inner(tx, opt);
        self.defer(tx, r)
    }

    pub(super) fn set_option_inner(
        &mut self,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        let t = self.tx_mut(tx)?;
        match opt {
            // RYW refuses to stop reading its writes once it has read or written anything
            // (writes made with it disabled bypass its write map and do not count).
            TransactionOption::ReadYourWritesDisable
                if t.read_started
                    || (!t.options.ryw_disabled
                        && (!t.writes.is_empty() || !t.write_conflicts.is_empty())) =>
            {
                return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
            }
            // `extractIntOption(value, 32, TRANSACTION_SIZE_LIMIT)`.
            TransactionOption::SizeLimit(n) if !(32..=TRANSACTION_SIZE_LIMIT).contains(&n) => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            _ => {}
        }
        let o = &mut t.options;
        match opt {
            TransactionOption::Timeout(d) => o.timeout = (!d.is_zero()).then_some(d),
            TransactionOption::RetryLimit(n) => o.retry_limit = n,
            TransactionOption::MaxRetryDelay(d) => o.max_retry_delay = d,
            TransactionOption::SizeLimit(n) => o.size_limit = n,
            TransactionOption::ReadYourWritesDisable => o.ryw_disabled = true,
            TransactionOption::NextWriteNoWriteConflictRange => o.next_write_no_conflict = true,
            TransactionOption::CausalReadRisky => o.causal_read_risky = true,
            TransactionOption::CausalWriteRisky => o.causal_write_risky = true,
            TransactionOption::PriorityBatch => o.priority = Priority::Batch,
            TransactionOption::PrioritySystemImmediate => o.priority = Priority::SystemImmediate,
            TransactionOption::AccessSystemKeys => o.access_system_keys = true,
            TransactionOption::ReadSystemKeys => o.read_system_keys = true,
            TransactionOption::ReportConflictingKeys => o.report_conflicting_keys = true,
            TransactionOption::LockAware => o.lock_aware = true,
        }
        if let TransactionOption::Timeout(d) = opt {
            if !d.is_zero() {
                let at = t.created + d;
                self.add_timer(at, Timer::Deadline(tx));
            }
        }
        Ok(())
    }
}
