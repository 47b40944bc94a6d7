//! libfdb_c's knobs: the tuning values a program sets with the `knob` network option
//! (`name=value`, or `FDB_NETWORK_OPTION_KNOB`). This client honours the ones it has a use for
//! ([`Knobs`], with libfdb_c 7.3's defaults) and knows every other name libfdb_c knows
//! (`names.rs`), so that a program's knob is either applied, refused as libfdb_c would not
//! recognise it either, or said to tune a part of libfdb_c this client does not have.
//!
//! Each part of the core takes the knobs it uses when the client is made
//! ([`crate::ClientConfig::knobs`]), as libfdb_c reads its knobs once they are set up.

mod names;

use core::time::Duration;

use crate::error::ErrorCode;

/// `KEY_SIZE_LIMIT`'s default.
pub const KEY_SIZE_LIMIT: usize = 10_000;
/// `SYSTEM_KEY_SIZE_LIMIT`'s default: keys in `\xff` may be longer.
pub const SYSTEM_KEY_SIZE_LIMIT: usize = 30_000;
/// `VALUE_SIZE_LIMIT`'s default.
pub const VALUE_SIZE_LIMIT: usize = 100_000;
/// `TRANSACTION_SIZE_LIMIT`'s default: the default `size_limit`.
pub const TRANSACTION_SIZE_LIMIT: usize = 10_000_000;

/// `DEFAULT_BACKOFF` = 0.01 s: initial `onError` backoff of a new transaction.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(10);
/// `DEFAULT_MAX_BACKOFF` = 1.0 s: default cap on backoff growth (the `max_retry_delay`
/// transaction option overrides it).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(1);
/// `BACKOFF_GROWTH_RATE` = 2.0: backoff multiplier per retry.
pub const BACKOFF_GROWTH_RATE: u32 = 2;
/// `RESOURCE_CONSTRAINED_MAX_BACKOFF` = 30 s: cap on backoff growth after proxy memory-limit
/// errors. It replaces, and may exceed, the transaction's `max_retry_delay`.
pub const RESOURCE_CONSTRAINED_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// `DEFAULT_MAX_OUTSTANDING_WATCHES`'s default (the `max_watches` database option changes
/// it).
pub const MAX_OUTSTANDING_WATCHES: usize = 10_000;
/// `LOCATION_CACHE_EVICTION_SIZE` is 600,000 in libfdb_c; a small client keeps fewer unless
/// the knob says otherwise.
pub const LOCATION_CACHE_CAPACITY: usize = 100_000;

/// `FUTURE_VERSION_RETRY_DELAY`'s default.
pub const FUTURE_VERSION_RETRY_DELAY: Duration = Duration::from_millis(10);
/// `LOAD_BALANCE_FETCH_REPLICA_TIMEOUT`'s default (a 7.4 flow knob).
pub const LOAD_BALANCE_FETCH_REPLICA_TIMEOUT: Duration = Duration::from_secs(5);
/// `WRONG_SHARD_SERVER_DELAY`'s default.
pub const WRONG_SHARD_SERVER_DELAY: Duration = Duration::from_millis(10);
/// `GRV_ERROR_RETRY_DELAY`'s default.
pub const GRV_ERROR_RETRY_DELAY: Duration = Duration::from_secs(5);
/// `WATCH_POLLING_TIME`'s default.
pub const WATCH_POLLING_TIME: Duration = Duration::from_secs(1);
/// `MAX_BATCH_SIZE`'s default: most transactions one GRV request may carry.
pub const MAX_GRV_BATCH: usize = 1000;
/// `GRV_BATCH_TIMEOUT`'s default: the longest a batch's window may grow (5 ms).
pub const GRV_BATCH_TIMEOUT: Duration = Duration::from_millis(5);
/// `COORDINATOR_RECONNECTION_DELAY`'s default (`fdbclient/ClientKnobs.cpp`).
pub const COORDINATOR_RECONNECTION_DELAY: Duration = Duration::from_secs(1);
/// `CONNECTION_MONITOR_LOOP_TIME`'s default (`flow/Knobs.cpp`): pause between pings.
pub const CONNECTION_MONITOR_LOOP_TIME: Duration = Duration::from_secs(1);
/// `CONNECTION_MONITOR_TIMEOUT`'s default: how long a ping may go unanswered while nothing
/// arrives.
pub const CONNECTION_MONITOR_TIMEOUT: Duration = Duration::from_secs(2);
/// `CONNECTION_MONITOR_IDLE_TIMEOUT`'s default: a client closes a connection unused this
/// long.
pub const CONNECTION_MONITOR_IDLE_TIMEOUT: Duration = Duration::from_secs(180);
/// `INITIAL_RECONNECTION_TIME`'s default: the first pause before reconnecting to an address
/// whose connection failed.
pub const INITIAL_RECONNECTION_TIME: Duration = Duration::from_millis(50);
/// `MAX_RECONNECTION_TIME`'s default: the longest pause between connection attempts to one
/// address.
pub const MAX_RECONNECTION_TIME: Duration = Duration::from_millis(500);
/// `RECONNECTION_TIME_GROWTH_RATE`'s default: the pause grows by this factor with each
/// failure.
pub const RECONNECTION_TIME_GROWTH_RATE: f64 = 1.2;
/// `RECONNECTION_RESET_TIME`'s default: a connection that lived longer than this resets the
/// pause.
pub const RECONNECTION_RESET_TIME: Duration = Duration::from_secs(5);

/// The longest time a knob may give (10⁹ s, about 31 years: "never" in practice). libfdb_c
/// takes any; here a deadline made from a longer one could overflow.
pub const MAX_TIME: Duration = Duration::from_secs(1_000_000_000);

/// What a knob's value is, as libfdb_c parses it (`Knobs::parseKnobValue`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Double,
    Int,
    Int64,
    Bool,
    String,
}

/// Why [`Knobs::set`] did not change anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// No knob of libfdb_c 7.3 or 7.4 has this name (names are lower case, as libfdb_c looks
    /// them up).
    Unrecognized,
    /// The value does not parse as the knob's type, or is out of the range this client can
    /// use (a negative size or time, a time past [`MAX_TIME`], a growth rate below 1).
    BadValue,
    /// A knob of libfdb_c's that tunes a part this client does not have (its run loop, its
    /// trace machinery, server-side work), or one it has not taken up.
    NotHonoured,
}

/// The knobs this client honours, each named as libfdb_c names it (`ClientKnobs.cpp`, and
/// `flow/Knobs.cpp` for the flow knobs), with libfdb_c 7.3's defaults. Set them before the client is made; a part reads its own when it starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knobs {
    /// `TRANSACTION_SIZE_LIMIT`: the default `size_limit` of a transaction, and its largest.
    pub transaction_size_limit: usize,
    /// `KEY_SIZE_LIMIT`: the longest key written or read outside `\xff`.
    pub key_size_limit: usize,
    /// `SYSTEM_KEY_SIZE_LIMIT`: the longest key written or read in `\xff`.
    pub system_key_size_limit: usize,
    /// `VALUE_SIZE_LIMIT`: the longest value written.
    pub value_size_limit: usize,
    /// `DEFAULT_BACKOFF`: the first pause of a transaction's retries.
    pub default_backoff: Duration,
    /// `DEFAULT_MAX_BACKOFF`: the longest pause, unless `max_retry_delay` says otherwise.
    pub default_max_backoff: Duration,
    /// `BACKOFF_GROWTH_RATE`: what each retry multiplies the pause by.
    pub backoff_growth_rate: f64,
    /// `RESOURCE_CONSTRAINED_MAX_BACKOFF`: the longest pause after a proxy's memory limit.
    pub resource_constrained_max_backoff: Duration,
    /// `DEFAULT_MAX_OUTSTANDING_WATCHES`: the default of the `max_watches` database option.
    pub default_max_outstanding_watches: usize,
    /// `LOCATION_CACHE_EVICTION_SIZE`: the default of the `location_cache_size` database
    /// option. libfdb_c keeps 600,000 shards; this client keeps 100,000 unless told.
    pub location_cache_eviction_size: usize,
    /// `FUTURE_VERSION_RETRY_DELAY`: the pause after `future_version` or
    /// `transaction_too_old` (in `on_error`, a watch, a size estimate).
    pub future_version_retry_delay: Duration,
    /// `WRONG_SHARD_SERVER_DELAY`: the pause before a read locates its shard again.
    pub wrong_shard_server_delay: Duration,
    /// `LOAD_BALANCE_FETCH_REPLICA_TIMEOUT` (a 7.4 flow knob): how long the replica
    /// consistency check waits for the other replicas' answers.
    pub load_balance_fetch_replica_timeout: Duration,
    /// `ENABLE_REPLICA_CONSISTENCY_CHECK_ON_READS` (a 7.4 flow knob): every storage read of
    /// a transaction without the check's own options is checked, asking
    /// `read_consistency_check_required_replicas` other replicas.
    pub enable_replica_consistency_check_on_reads: bool,
    /// `READ_CONSISTENCY_CHECK_REQUIRED_REPLICAS` (a 7.4 flow knob): how many, as the
    /// transaction option counts them (`-2`, every replica not known to be down).
    pub read_consistency_check_required_replicas: i64,
    /// `GRV_ERROR_RETRY_DELAY`: a fired watch's pause when its read version is throttled.
    pub grv_error_retry_delay: Duration,
    /// `WATCH_POLLING_TIME`: when a storage server gave up on a watch, it is set again after
    /// this.
    pub watch_polling_time: Duration,
    /// `MAX_BATCH_SIZE`: the most read-version requests one batch carries.
    pub max_batch_size: usize,
    /// `GRV_BATCH_TIMEOUT`: the longest a read-version batch waits for more requests.
    pub grv_batch_timeout: Duration,
    /// `COORDINATOR_RECONNECTION_DELAY`: the pause after every coordinator failed to answer.
    pub coordinator_reconnection_delay: Duration,
    /// `CONNECTION_MONITOR_LOOP_TIME` (a flow knob): how often a connection pings.
    pub connection_monitor_loop_time: Duration,
    /// `CONNECTION_MONITOR_TIMEOUT`: a ping unanswered this long, with nothing else
    /// received, fails the connection; also how long a connect may take.
    pub connection_monitor_timeout: Duration,
    /// `CONNECTION_MONITOR_IDLE_TIMEOUT`: a connection with nothing sent or waited for this
    /// long is closed.
    pub connection_monitor_idle_timeout: Duration,
    /// `INITIAL_RECONNECTION_TIME`: the first pause before connecting again to an address.
    pub initial_reconnection_time: Duration,
    /// `MAX_RECONNECTION_TIME`: the longest such pause.
    pub max_reconnection_time: Duration,
    /// `RECONNECTION_TIME_GROWTH_RATE`: what each failure multiplies the pause by.
    pub reconnection_time_growth_rate: f64,
    /// `RECONNECTION_RESET_TIME`: a connection that lived this long starts the pause over.
    pub reconnection_reset_time: Duration,
    /// `MIN_TRACE_SEVERITY` (a flow knob): trace events below this severity are not written
    /// (fdb-compat's trace files; 10 is info, 20 a warning, 40 an error).
    pub min_trace_severity: i32,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            transaction_size_limit: TRANSACTION_SIZE_LIMIT,
            key_size_limit: KEY_SIZE_LIMIT,
            system_key_size_limit: SYSTEM_KEY_SIZE_LIMIT,
            value_size_limit: VALUE_SIZE_LIMIT,
            default_backoff: DEFAULT_BACKOFF,
            default_max_backoff: DEFAULT_MAX_BACKOFF,
            backoff_growth_rate: BACKOFF_GROWTH_RATE as f64,
            resource_constrained_max_backoff: RESOURCE_CONSTRAINED_MAX_BACKOFF,
            default_max_outstanding_watches: MAX_OUTSTANDING_WATCHES,
            location_cache_eviction_size: LOCATION_CACHE_CAPACITY,
            future_version_retry_delay: FUTURE_VERSION_RETRY_DELAY,
            wrong_shard_server_delay: WRONG_SHARD_SERVER_DELAY,
            load_balance_fetch_replica_timeout: LOAD_BALANCE_FETCH_REPLICA_TIMEOUT,
            enable_replica_consistency_check_on_reads: false,
            read_consistency_check_required_replicas: -2,
            grv_error_retry_delay: GRV_ERROR_RETRY_DELAY,
            watch_polling_time: WATCH_POLLING_TIME,
            max_batch_size: MAX_GRV_BATCH,
            grv_batch_timeout: GRV_BATCH_TIMEOUT,
            coordinator_reconnection_delay: COORDINATOR_RECONNECTION_DELAY,
            connection_monitor_loop_time: CONNECTION_MONITOR_LOOP_TIME,
            connection_monitor_timeout: CONNECTION_MONITOR_TIMEOUT,
            connection_monitor_idle_timeout: CONNECTION_MONITOR_IDLE_TIMEOUT,
            initial_reconnection_time: INITIAL_RECONNECTION_TIME,
            max_reconnection_time: MAX_RECONNECTION_TIME,
            reconnection_time_growth_rate: RECONNECTION_TIME_GROWTH_RATE,
            reconnection_reset_time: RECONNECTION_RESET_TIME,
            min_trace_severity: 10,
        }
    }
}

impl Knobs {
    /// Sets knob `name` from its text `value`, parsed as libfdb_c parses it. Nothing changes
    /// unless it returns `Ok`.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let kind = kind_of(name).ok_or(KnobError::Unrecognized)?;
        let parsed = Value::parse(kind, value).ok_or(KnobError::BadValue)?;
        let size = || parsed.size().ok_or(KnobError::BadValue);
        let time = || parsed.seconds().ok_or(KnobError::BadValue);
        // A growth rate: finite, and growing.
        let rate = || match parsed {
            Value::Number(r) if r.is_finite() && r >= 1.0 => Ok(r),
            _ => Err(KnobError::BadValue),
        };
        match name {
            "transaction_size_limit" => self.transaction_size_limit = size()?,
            "key_size_limit" => self.key_size_limit = size()?,
            "system_key_size_limit" => self.system_key_size_limit = size()?,
            "value_size_limit" => self.value_size_limit = size()?,
            "default_backoff" => self.default_backoff = time()?,
            "default_max_backoff" => self.default_max_backoff = time()?,
            "resource_constrained_max_backoff" => self.resource_constrained_max_backoff = time()?,
            "backoff_growth_rate" => self.backoff_growth_rate = rate()?,
            "default_max_outstanding_watches" => self.default_max_outstanding_watches = size()?,
            "location_cache_eviction_size" => self.location_cache_eviction_size = size()?,
            "future_version_retry_delay" => self.future_version_retry_delay = time()?,
            "wrong_shard_server_delay" => self.wrong_shard_server_delay = time()?,
            "load_balance_fetch_replica_timeout" => {
                self.load_balance_fetch_replica_timeout = time()?
            }
            "enable_replica_consistency_check_on_reads" => match parsed {
                Value::Integer(n) => self.enable_replica_consistency_check_on_reads = n != 0,
                _ => return Err(KnobError::BadValue),
            },
            // The transaction option's range (`-2` and up).
            "read_consistency_check_required_replicas" => match parsed {
                Value::Integer(n) if n >= -2 => self.read_consistency_check_required_replicas = n,
                _ => return Err(KnobError::BadValue),
            },
            "grv_error_retry_delay" => self.grv_error_retry_delay = time()?,
            "watch_polling_time" => self.watch_polling_time = time()?,
            // A batch of none would never be sent.
            "max_batch_size" => self.max_batch_size = size()?.max(1),
            "grv_batch_timeout" => self.grv_batch_timeout = time()?,
            "coordinator_reconnection_delay" => self.coordinator_reconnection_delay = time()?,
            "connection_monitor_loop_time" => self.connection_monitor_loop_time = time()?,
            "connection_monitor_timeout" => self.connection_monitor_timeout = time()?,
            "connection_monitor_idle_timeout" => self.connection_monitor_idle_timeout = time()?,
            "initial_reconnection_time" => self.initial_reconnection_time = time()?,
            "max_reconnection_time" => self.max_reconnection_time = time()?,
            "reconnection_time_growth_rate" => self.reconnection_time_growth_rate = rate()?,
            "reconnection_reset_time" => self.reconnection_reset_time = time()?,
            "min_trace_severity" => match parsed {
                Value::Integer(n) => self.min_trace_severity = n as i32,
                _ => return Err(KnobError::BadValue),
            },
            _ => return Err(KnobError::NotHonoured),
        }
        Ok(())
    }

    /// [`Knobs::set`] as a builder: `Knobs::default().with("key_size_limit", "100")?`.
    pub fn with(mut self, name: &str, value: &str) -> Result<Self, KnobError> {
        self.set(name, value)?;
        Ok(self)
    }

    /// [`Knobs::set`] from the network option's text, `name=value` (split at the first `=`).
    /// `None` when there is no `=`, which libfdb_c refuses with `invalid_option_value`; every
    /// other outcome it takes, setting the knob or saying on standard error that it ignores it.
    pub fn set_option(&mut self, option: &str) -> Option<Result<(), KnobError>> {
        let (name, value) = option.split_once('=')?;
        Some(self.set(name, value))
    }

    /// A transaction's next backoff after `code` (see [`ErrorCode::next_backoff`]):
    /// `pause` grown, capped by `max_retry_delay`, or after a proxy's memory limit by
    /// `RESOURCE_CONSTRAINED_MAX_BACKOFF`.
    pub fn next_backoff(
        &self,
        code: ErrorCode,
        pause: Duration,
        max_retry_delay: Duration,
    ) -> Duration {
        let cap = if code.uses_resource_constrained_backoff() {
            self.resource_constrained_max_backoff
        } else {
            max_retry_delay
        };
        self.grow(pause, cap)
    }

    /// `pause` grown by `BACKOFF_GROWTH_RATE`, capped at `cap` (a whole rate, as the default
    /// 2, multiplies exactly).
    pub(crate) fn grow(&self, pause: Duration, cap: Duration) -> Duration {
        grown(pause, self.backoff_growth_rate, cap)
    }

    /// `pause` shrunk by `BACKOFF_GROWTH_RATE` (the location lookups' backoff after an
    /// answer).
    pub(crate) fn shrink(&self, pause: Duration) -> Duration {
        match whole(self.backoff_growth_rate) {
            Some(r) => pause / r,
            None => pause.div_f64(self.backoff_growth_rate),
        }
    }
}

/// `pause` grown by `rate` (at least 1), capped at `cap`: a whole rate multiplies exactly,
/// any other in floating point, and no rate overflows.
pub(crate) fn grown(pause: Duration, rate: f64, cap: Duration) -> Duration {
    match whole(rate) {
        Some(r) => pause.saturating_mul(r).min(cap),
        None => Duration::try_from_secs_f64(pause.as_secs_f64() * rate).map_or(cap, |d| d.min(cap)),
    }
}

/// `rate` as a whole number, if it is one that fits.
fn whole(rate: f64) -> Option<u32> {
    (rate <= u32::MAX as f64 && rate == (rate as u32) as f64).then_some(rate as u32)
}

/// The kind of libfdb_c's knob `name`, if it has one by that name.
fn kind_of(name: &str) -> Option<Kind> {
    names::LIBFDB_C
        .binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| names::LIBFDB_C[i].1)
}

/// A knob's value once parsed.
enum Value {
    Number(f64),
    Integer(i64),
    Text,
}

impl Value {
    /// `value` as a knob of `kind`: `std::stod`, `std::stoi` / `std::stoll` in base 0 (so
    /// `0x` hexadecimal and a leading `0` octal), a boolean as `true`/`false` in any case or
    /// an integer, all of the text used.
    fn parse(kind: Kind, value: &str) -> Option<Value> {
        match kind {
            Kind::Double => {
                let text = value.trim_start_matches(is_c_space);
                text.parse::<f64>().ok().map(Value::Number)
            }
            Kind::Int => c_integer(value)
                .filter(|n| i32::try_from(*n).is_ok())
                .map(Value::Integer),
            Kind::Int64 => c_integer(value).map(Value::Integer),
            Kind::Bool if value.eq_ignore_ascii_case("true") => Some(Value::Integer(1)),
            Kind::Bool if value.eq_ignore_ascii_case("false") => Some(Value::Integer(0)),
            Kind::Bool => c_integer(value)
                .filter(|n| i32::try_from(*n).is_ok())
                .map(|n| Value::Integer((n != 0) as i64)),
            Kind::String => Some(Value::Text),
        }
    }

    /// A count or size: a whole number, not negative (a number knob may be written `1e7`,
    /// as `ClientKnobs.cpp` writes its own).
    fn size(&self) -> Option<usize> {
        match *self {
            Value::Integer(n) => usize::try_from(n).ok(),
            Value::Number(x) if x >= 0.0 && x < u64::MAX as f64 && x == (x as u64) as f64 => {
                usize::try_from(x as u64).ok()
            }
            _ => None,
        }
    }

    /// A time in seconds, not negative and at most [`MAX_TIME`] (so that no deadline or
    /// jitter made from it can overflow).
    fn seconds(&self) -> Option<Duration> {
        let time = match *self {
            Value::Number(x) => Duration::try_from_secs_f64(x).ok(),
            Value::Integer(n) => u64::try_from(n).ok().map(Duration::from_secs),
            Value::Text => None,
        };
        time.filter(|t| *t <= MAX_TIME)
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// `strtoll(text, &end, 0)` that must use all of `text`: leading white space, a sign, then
/// `0x` hexadecimal, `0` octal or decimal digits. `None` when nothing or not all of it
/// parses, or the number does not fit.
fn c_integer(text: &str) -> Option<i64> {
    let text = text.trim_start_matches(is_c_space);
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (16, hex)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_holds_both_kinds_of_knob() {
        assert!(names::LIBFDB_C.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(kind_of("transaction_size_limit"), Some(Kind::Int));
        assert_eq!(kind_of("connection_monitor_timeout"), Some(Kind::Double));
        assert_eq!(kind_of("TRANSACTION_SIZE_LIMIT"), None);
        assert_eq!(kind_of("no_such_knob"), None);
    }

    #[test]
    fn an_honoured_knob_is_set_and_the_others_say_why_not() {
        let mut k = Knobs::default();
        assert_eq!(
            k.set("transaction_size_limit", "1e3"),
            Err(KnobError::BadValue)
        );
        assert_eq!(k.set("transaction_size_limit", "1000"), Ok(()));
        assert_eq!(k.transaction_size_limit, 1000);
        assert_eq!(k.set("value_size_limit", "0x10"), Ok(()));
        assert_eq!(k.value_size_limit, 16);
        assert_eq!(k.set("key_size_limit", "010"), Ok(()));
        assert_eq!(k.key_size_limit, 8);
        assert_eq!(k.set("default_backoff", " .5"), Ok(()));
        assert_eq!(k.default_backoff, Duration::from_millis(500));
        assert_eq!(k.set("default_max_backoff", "-1"), Err(KnobError::BadValue));
        assert_eq!(
            k.set("backoff_growth_rate", "0.5"),
            Err(KnobError::BadValue)
        );
        assert_eq!(k.set("key_size_limit", "-5"), Err(KnobError::BadValue));
        assert_eq!(k.set("key_size_limit", "12abc"), Err(KnobError::BadValue));
        assert_eq!(k.set("max_batch_size", "0"), Ok(()));
        assert_eq!(k.max_batch_size, 1, "a batch carries one at least");
        assert_eq!(
            k.set("reconnection_time_growth_rate", "0.9"),
            Err(KnobError::BadValue)
        );
        assert_eq!(
            k.set("connection_monitor_timeout", "inf"),
            Err(KnobError::BadValue)
        );
        assert_eq!(k.set("connection_monitor_timeout", "1e9"), Ok(()));
        assert_eq!(
            k.set("connection_monitor_timeout", "1.1e9"),
            Err(KnobError::BadValue)
        );
        assert_eq!(k.set("max_trace_lines", "10"), Err(KnobError::NotHonoured));
        assert_eq!(k.set("min_trace_severity", "x"), Err(KnobError::BadValue));
        assert_eq!(k.set("min_trace_severity", "20"), Ok(()));
        assert_eq!(k.set("Key_Size_Limit", "5"), Err(KnobError::Unrecognized));
        assert_eq!(k.key_size_limit, 8, "nothing changes on an error");
        assert_eq!(k.set_option("no equals sign"), None);
        assert_eq!(
            k.set_option("key_size_limit=9=9"),
            Some(Err(KnobError::BadValue))
        );
    }

    /// Every time at its largest and every growth rate huge: the client still runs, with
    /// connections refused, retries and timers due, and no deadline or pause overflows.
    #[test]
    fn the_largest_knobs_overflow_nothing() {
        use crate::client::ClientConfig;
        use crate::cluster_file::ClusterFile;
        use crate::sim::Sim;
        let mut knobs = Knobs::default();
        for name in [
            "default_backoff",
            "default_max_backoff",
            "resource_constrained_max_backoff",
            "future_version_retry_delay",
            "wrong_shard_server_delay",
            "load_balance_fetch_replica_timeout",
            "grv_error_retry_delay",
            "watch_polling_time",
            "grv_batch_timeout",
            "coordinator_reconnection_delay",
            "connection_monitor_loop_time",
            "connection_monitor_timeout",
            "connection_monitor_idle_timeout",
            "initial_reconnection_time",
            "max_reconnection_time",
            "reconnection_reset_time",
        ] {
            knobs.set(name, "1e9").unwrap();
        }
        knobs.set("backoff_growth_rate", "1e300").unwrap();
        knobs.set("reconnection_time_growth_rate", "1e300").unwrap();
        for name in [
            "key_size_limit",
            "system_key_size_limit",
            "value_size_limit",
        ] {
            knobs.set(name, "9223372036854775807").unwrap();
        }
        let cluster = ClusterFile::parse("t:t@127.0.0.1:4500,127.0.0.1:4501").unwrap();
        let mut s = Sim::new(crate::client::ClientConfig {
            knobs,
            ..ClientConfig::new(cluster, 1)
        });
        s.set_auto_accept(false);
        let tx = s.client.create_transaction(s.now());
        let _ = s.client.tx_read_version(s.now(), tx);
        let _ = s.client.set(tx, &[b'k'; 20_000], b"v");
        for code in [
            ErrorCode::NOT_COMMITTED,
            ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED,
            ErrorCode::TRANSACTION_TOO_OLD,
            ErrorCode::NOT_COMMITTED,
        ] {
            for (conn, _) in s.connects() {
                s.refuse(conn);
            }
            let _ = s.client.on_error(s.now(), tx, code);
            let next = s.client.poll_timeout().expect("something is due");
            s.advance_to(next);
        }
    }

    #[test]
    fn integers_parse_as_c_parses_them() {
        assert_eq!(c_integer("42"), Some(42));
        assert_eq!(c_integer("  -0x1F"), Some(-31));
        assert_eq!(c_integer("0"), Some(0));
        assert_eq!(c_integer("017"), Some(15));
        assert_eq!(c_integer("018"), None);
        assert_eq!(c_integer(""), None);
        assert_eq!(c_integer("0x"), None);
        assert_eq!(c_integer("9223372036854775808"), None);
        assert_eq!(c_integer("-9223372036854775808"), Some(i64::MIN));
        assert!(Value::parse(Kind::Int, "2147483648").is_none());
        assert!(Value::parse(Kind::Bool, "TRUE").is_some());
        assert!(Value::parse(Kind::Bool, "yes").is_none());
    }

    #[test]
    fn backoff_grows_by_the_rate_up_to_the_cap() {
        let mut k = Knobs::default();
        let cap = Duration::from_secs(1);
        assert_eq!(
            k.grow(Duration::from_millis(10), cap),
            Duration::from_millis(20)
        );
        assert_eq!(k.grow(Duration::from_millis(800), cap), cap);
        k.set("backoff_growth_rate", "3").unwrap();
        assert_eq!(
            k.grow(Duration::from_millis(10), cap),
            Duration::from_millis(30)
        );
        assert_eq!(
            k.shrink(Duration::from_millis(30)),
            Duration::from_millis(10)
        );
        k.set("backoff_growth_rate", "1.5").unwrap();
        assert_eq!(
            k.grow(Duration::from_millis(10), cap),
            Duration::from_millis(15)
        );
        assert_eq!(k.grow(Duration::from_millis(900), cap), cap);
    }
}
