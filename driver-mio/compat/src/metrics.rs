//! foundationdb-rs's transaction metrics (`Database::instrumented_run`): counts of the calls
//! a transaction made and the bytes they moved, timings of the retry loop, and the
//! application's own counters. Kept by this layer, as foundationdb-rs keeps them above
//! libfdb_c.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// A metric's labels, sorted by name.
pub type Labels = Vec<(String, String)>;

/// A custom metric's name and labels (the labels' order given does not matter).
#[derive(Clone, Hash, Eq, PartialEq, Debug)]
pub struct MetricKey {
    /// The name.
    pub name: String,
    /// The labels, sorted by name.
    pub labels: Labels,
}

impl MetricKey {
    /// The key for `name` and `labels`.
    pub fn new(name: &str, labels: &[(&str, &str)]) -> Self {
        let mut labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        MetricKey {
            name: name.to_string(),
            labels,
        }
    }
}

/// The metrics of one `instrumented_run`, shared by its attempts.
#[derive(Debug, Clone, Default)]
pub struct TransactionMetrics {
    /// The report being filled.
    pub metrics: Arc<Mutex<MetricsReport>>,
}

/// The transaction's retries, conflicts and versions.
#[derive(Debug, Default, Clone)]
pub struct TransactionInfo {
    /// Attempts after the first.
    pub retries: u64,
    /// Attempts that failed with `not_committed`.
    pub conflict_count: u64,
    /// The read version, if recorded.
    pub read_version: Option<i64>,
    /// The commit version of the attempt that committed.
    pub commit_version: Option<i64>,
}

/// Everything measured.
#[derive(Debug, Clone, Default)]
pub struct MetricsReport {
    /// Counters of the current attempt.
    pub current: CounterMetrics,
    /// Counters of all attempts.
    pub total: CounterMetrics,
    /// Timings.
    pub time: TimingMetrics,
    /// The application's metrics (of the current attempt).
    pub custom_metrics: HashMap<MetricKey, u64>,
    /// Retries, conflicts, versions.
    pub transaction: TransactionInfo,
    /// The conflicting keys of the last conflict (with `report_conflicting_keys`).
    pub conflicting_keys: Vec<ConflictingKeyRange>,
}

impl MetricsReport {
    /// Records the read version.
    pub fn set_read_version(&mut self, version: i64) {
        self.transaction.read_version = Some(version);
    }

    /// Records the commit version.
    pub fn set_commit_version(&mut self, version: i64) {
        self.transaction.commit_version = Some(version);
    }

    /// Counts a retry.
    pub fn increment_retries(&mut self) {
        self.transaction.retries += 1;
    }
}

/// Timings, in milliseconds.
#[derive(Debug, Default, Clone)]
pub struct TimingMetrics {
    /// The successful commit's.
    pub commit_execution_ms: u64,
    /// Each `on_error` wait.
    pub on_error_execution_ms: Vec<u64>,
    /// The whole run.
    pub total_execution_ms: u64,
}

impl TimingMetrics {
    /// Records the commit's time.
    pub fn record_commit_time(&mut self, duration_ms: u64) {
        self.commit_execution_ms = duration_ms;
    }

    /// Records one `on_error` wait.
    pub fn add_error_time(&mut self, duration_ms: u64) {
        self.on_error_execution_ms.push(duration_ms);
    }

    /// Records the whole run's time.
    pub fn set_execution_time(&mut self, duration_ms: u64) {
        self.total_execution_ms = duration_ms;
    }

    /// All `on_error` waits together.
    pub fn get_total_error_time(&self) -> u64 {
        self.on_error_execution_ms.iter().sum()
    }
}

/// A call counted, with the bytes (and rows) it moved.
pub enum FdbCommand {
    /// An atomic operation.
    Atomic,
    /// A clear.
    Clear,
    /// A range clear.
    ClearRange,
    /// A point read: bytes (key and value), rows found.
    Get(u64, u64),
    /// A range batch: bytes, rows.
    GetRange(u64, u64),
    /// A set: bytes.
    Set(u64),
}

/// Call counters.
#[derive(Debug, Default, Clone)]
pub struct CounterMetrics {
    /// Atomic operations.
    pub call_atomic_op: u64,
    /// Clears.
    pub call_clear: u64,
    /// Range clears.
    pub call_clear_range: u64,
    /// Point reads.
    pub call_get: u64,
    /// Rows read (point and range).
    pub keys_values_fetched: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Sets.
    pub call_set: u64,
    /// Bytes set.
    pub bytes_written: u64,
}

impl CounterMetrics {
    /// Counts one call.
    pub fn increment(&mut self, c: &FdbCommand) {
        match *c {
            FdbCommand::Atomic => self.call_atomic_op += 1,
            FdbCommand::Clear => self.call_clear += 1,
            FdbCommand::ClearRange => self.call_clear_range += 1,
            FdbCommand::Get(bytes, rows) => {
                self.call_get += 1;
                self.bytes_read += bytes;
                self.keys_values_fetched += rows;
            }
            // Range batches count their rows and bytes, not calls.
            FdbCommand::GetRange(bytes, rows) => {
                self.bytes_read += bytes;
                self.keys_values_fetched += rows;
            }
            FdbCommand::Set(bytes) => {
                self.call_set += 1;
                self.bytes_written += bytes;
            }
        }
    }
}

impl TransactionMetrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Self::default()
    }

    fn data(&self) -> MutexGuard<'_, MetricsReport> {
        self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the read version.
    pub fn set_read_version(&self, version: i64) {
        self.data().set_read_version(version);
    }

    /// Records the commit version.
    pub fn set_commit_version(&self, version: i64) {
        self.data().set_commit_version(version);
    }

    /// A new attempt: counts the retry, and the current counters and custom metrics start
    /// over.
    pub fn reset_current(&self) {
        let mut d = self.data();
        d.increment_retries();
        d.current = CounterMetrics::default();
        d.custom_metrics.clear();
    }

    /// Counts a retry.
    pub fn increment_retries(&self) {
        self.data().increment_retries();
    }

    /// Counts a conflict.
    pub fn increment_conflict_count(&self) {
        self.data().transaction.conflict_count += 1;
    }

    /// Counts a call in the current and total counters.
    pub fn report_metrics(&self, c: FdbCommand) {
        let mut d = self.data();
        d.current.increment(&c);
        d.total.increment(&c);
    }

    /// Retries so far.
    pub fn get_retries(&self) -> u64 {
        self.data().transaction.retries
    }

    /// A copy of the report.
    pub fn get_metrics_data(&self) -> MetricsReport {
        self.data().clone()
    }

    /// A copy of the transaction info.
    pub fn get_transaction_info(&self) -> TransactionInfo {
        self.data().transaction.clone()
    }

    /// Sets a custom metric.
    pub fn set_custom(&self, name: &str, value: u64, labels: &[(&str, &str)]) {
        self.data()
            .custom_metrics
            .insert(MetricKey::new(name, labels), value);
    }

    /// Adds to a custom metric.
    pub fn increment_custom(&self, name: &str, amount: u64, labels: &[(&str, &str)]) {
        *self
            .data()
            .custom_metrics
            .entry(MetricKey::new(name, labels))
            .or_insert(0) += amount;
    }

    /// Records the conflicting keys.
    pub fn set_conflicting_keys(&self, keys: Vec<ConflictingKeyRange>) {
        self.data().conflicting_keys = keys;
    }

    /// Records the commit's time.
    pub fn record_commit_time(&self, duration_ms: u64) {
        self.data().time.record_commit_time(duration_ms);
    }

    /// Records an `on_error` wait.
    pub fn add_error_time(&self, duration_ms: u64) {
        self.data().time.add_error_time(duration_ms);
    }

    /// Records the run's time.
    pub fn set_execution_time(&self, duration_ms: u64) {
        self.data().time.set_execution_time(duration_ms);
    }

    /// All `on_error` waits together.
    pub fn get_total_error_time(&self) -> u64 {
        self.data().time.get_total_error_time()
    }
}

/// One range of keys whose read conflicted (`report_conflicting_keys`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConflictingKeyRange {
    pub(crate) begin: Vec<u8>,
    pub(crate) end: Vec<u8>,
}

impl ConflictingKeyRange {
    /// First key of the range.
    pub fn begin(&self) -> &[u8] {
        &self.begin
    }

    /// End of the range (excluded).
    pub fn end(&self) -> &[u8] {
        &self.end
    }
}

impl fmt::Display for ConflictingKeyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}..{}",
            String::from_utf8_lossy(&self.begin),
            String::from_utf8_lossy(&self.end)
        )
    }
}
