//! The high-contention allocator: short prefixes for new directories that no two
//! transactions ever both get, without making concurrent creations conflict with each other
//! (the layout and algorithm of every FDB binding's `HighContentionAllocator`).
//!
//! Under its subspace, `(0, start)` counts the allocations made in the window of candidates
//! starting at `start` (an atomic little-endian add), and `(1, candidate)` marks a candidate
//! taken. A transaction picks a random candidate of the current window; the window moves on
//! once it is half full, and grows with the number of allocations, so prefixes stay short
//! while few exist. Only the chosen candidate's key conflicts: everything else is read at
//! snapshot isolation or written without a write conflict range.

use std::sync::Mutex;

use fdb_protocol::tuple::{pack, Subspace};
use fdb_protocol::{ConflictRangeType, MutationType, TransactionOption};

use super::{DirectoryError, Tr};
use crate::driver::Driver;

/// Issuing a candidate's read and its write must not interleave with another allocation in
/// the same transaction (two tasks sharing it could both read the candidate as free). The
/// sections under this lock only queue requests — they never wait — so one lock for the
/// process costs nothing. The Python binding holds a per-transaction lock for the same
/// reason.
static ISSUE: Mutex<()> = Mutex::new(());

/// Allocates prefixes under one subspace (a directory layer's `hca` subspace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HighContentionAllocator {
    counters: Subspace,
    recent: Subspace,
}

impl HighContentionAllocator {
    /// The allocator whose state lives under `subspace`.
    pub fn new(subspace: &Subspace) -> HighContentionAllocator {
        HighContentionAllocator {
            counters: subspace.subspace(&(0,)),
            recent: subspace.subspace(&(1,)),
        }
    }

    /// A packed integer no other call on this subspace has returned or will return, as short
    /// as the number of allocations allows. Adds the write conflict of the candidate only.
    pub async fn allocate<D: Driver>(
        &self,
        tx: &crate::Transaction<D>,
    ) -> Result<Vec<u8>, DirectoryError> {
        self.allocate_in(Tr::new(tx)).await
    }

    pub(super) async fn allocate_in<D: Driver>(
        &self,
        tr: Tr<'_, D>,
    ) -> Result<Vec<u8>, DirectoryError> {
        let tx = tr.tx;
        let (counters_begin, counters_end) = self.counters.range();
        loop {
            let mut start: i64 = self
                .latest_counter(tr, &counters_begin, &counters_end)
                .await?
                .unwrap_or_default();
            // Find a window less than half full, moving on (and forgetting the old windows)
            // while the current one is too full.
            let mut advanced = false;
            let window = loop {
                let count = {
                    let _issue = ISSUE.lock().unwrap_or_else(|e| e.into_inner());
                    if advanced {
                        tx.clear_range(self.counters.bytes(), self.counters.pack(&(start,)));
                        tx.set_option(TransactionOption::NextWriteNoWriteConflictRange)?;
                        tx.clear_range(self.recent.bytes(), self.recent.pack(&(start,)));
                    }
                    let key = self.counters.pack(&(start,));
                    tx.atomic_op(&key, 1i64.to_le_bytes(), MutationType::Add);
                    // Issued now (`get_with` starts the request when called), before later writes.
                    tx.get_with(&key, true)
                };
                let count = match count.await? {
                    Some(v) => decode_count(&v)?,
                    None => 0,
                };
                let window = window_size(start);
                if count * 2 < window {
                    break window;
                }
                start += window;
                advanced = true;
            };
            // Try random candidates of the window until one is free, unless another
            // transaction moved the window on meanwhile (then start over).
            loop {
                let candidate = start + random_below(window);
                let key = self.recent.pack(&(candidate,));
                let taken = {
                    let _issue = ISSUE.lock().unwrap_or_else(|e| e.into_inner());
                    let taken = tx.get_with(&key, false);
                    tx.set_option(TransactionOption::NextWriteNoWriteConflictRange)?;
                    tx.set(&key, b"");
                    taken
                };
                let latest = self
                    .latest_counter(tr, &counters_begin, &counters_end)
                    .await?;
                let taken = taken.await?;
                if latest.is_some_and(|l| l > start) {
                    break;
                }
                if taken.is_none() {
                    tx.add_conflict_range(&key, key_after(&key), ConflictRangeType::Write)?;
                    return Ok(pack(&(candidate,)));
                }
            }
        }
    }

    /// The start of the newest window (the last counter), read at snapshot isolation.
    async fn latest_counter<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        begin: &[u8],
        end: &[u8],
    ) -> Result<Option<i64>, DirectoryError> {
        let rows = tr
            .tx
            .get_range_with(key_selector(begin), key_selector(end), reverse_one(), true)
            .await?;
        match rows.first() {
            Some(kv) => Ok(Some(self.counter_start(&kv.key)?)),
            None => Ok(None),
        }
    }

    fn counter_start(&self, key: &[u8]) -> Result<i64, DirectoryError> {
        let (start,): (i64,) = self
            .counters
            .unpack(key)
            .map_err(|_| DirectoryError::BadMetadata("an allocator counter key"))?;
        Ok(start)
    }
}

/// The candidates of the window starting at `start`: small while few prefixes exist, larger
/// as allocations grow (the other bindings' sizes, so they share windows).
fn window_size(start: i64) -> i64 {
    if start < 255 {
        64
    } else if start < 65535 {
        1024
    } else {
        8192
    }
}

fn decode_count(v: &[u8]) -> Result<i64, DirectoryError> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| DirectoryError::BadMetadata("an allocator counter value"))?;
    Ok(i64::from_le_bytes(b))
}

fn key_selector(key: &[u8]) -> fdb_protocol::messages::types::KeySelector {
    fdb_protocol::messages::types::KeySelector::first_greater_or_equal(
        bytes::Bytes::copy_from_slice(key),
    )
}

fn reverse_one() -> fdb_protocol::RangeOptions {
    fdb_protocol::RangeOptions {
        limit: 1,
        reverse: true,
        ..fdb_protocol::RangeOptions::default()
    }
}

fn key_after(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k
}

/// A uniform-enough value in `[0, n)` (n ≤ 8192). Candidates need only be spread out, not
/// secret.
fn random_below(n: i64) -> i64 {
    (crate::engine::random_u64() % n as u64) as i64
}
