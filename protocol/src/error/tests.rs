use super::*;
use alloc::collections::BTreeSet;
use alloc::format;

#[test]
fn table_size_matches_error_definitions() {
    // 343 ERROR(...) lines in flow/include/flow/error_definitions.h @ 7.3.77, and the two
    // of 7.4.6 this client raises itself (the replica consistency check's 1236 and 1237).
    assert_eq!(ErrorCode::all().len(), 343 + 2);
}

#[test]
fn table_sorted_by_code() {
    for w in ErrorCode::all().windows(2) {
        assert!(w[0].code.0 < w[1].code.0, "{} !< {}", w[0].code, w[1].code);
    }
}

#[test]
fn codes_unique() {
    let set: BTreeSet<u16> = ErrorCode::all().iter().map(|e| e.code.0).collect();
    assert_eq!(set.len(), ErrorCode::all().len());
}

#[test]
fn names_unique_and_snake_case() {
    let set: BTreeSet<&str> = ErrorCode::all().iter().map(|e| e.name).collect();
    assert_eq!(set.len(), ErrorCode::all().len());
    for e in ErrorCode::all() {
        assert!(
            e.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{}",
            e.name
        );
        assert!(!e.description.is_empty());
    }
}

#[test]
fn lookups_round_trip() {
    for e in ErrorCode::all() {
        assert_eq!(e.code.info(), Some(e));
        assert_eq!(ErrorCode::from_name(e.name), Some(e.code));
        assert_eq!(ErrorCode::from_code(e.code.0), e.code);
    }
    assert_eq!(ErrorCode(1019).name(), None);
    assert_eq!(ErrorCode::INVALID.description(), None);
    assert!(!ErrorCode(65000).is_known());
    assert_eq!(ErrorCode::from_name("no_such_error"), None);
}

#[test]
fn spot_check_values() {
    assert_eq!(ErrorCode::SUCCESS, ErrorCode(0));
    assert_eq!(ErrorCode::END_OF_STREAM, ErrorCode(1));
    assert_eq!(ErrorCode::WRONG_SHARD_SERVER, ErrorCode(1001));
    assert_eq!(ErrorCode::TRANSACTION_TOO_OLD, ErrorCode(1007));
    assert_eq!(ErrorCode::FUTURE_VERSION, ErrorCode(1009));
    assert_eq!(ErrorCode::NOT_COMMITTED, ErrorCode(1020));
    assert_eq!(ErrorCode::COMMIT_UNKNOWN_RESULT, ErrorCode(1021));
    assert_eq!(ErrorCode::COMMIT_UNKNOWN_RESULT_FATAL, ErrorCode(1022));
    assert_eq!(ErrorCode::TRANSACTION_CANCELLED, ErrorCode(1025));
    assert_eq!(ErrorCode::TRANSACTION_TIMED_OUT, ErrorCode(1031));
    assert_eq!(ErrorCode::CLUSTER_VERSION_CHANGED, ErrorCode(1039));
    assert_eq!(ErrorCode::GRV_PROXY_MEMORY_LIMIT_EXCEEDED, ErrorCode(1078));
    assert_eq!(ErrorCode::BROKEN_PROMISE, ErrorCode(1100));
    assert_eq!(ErrorCode::TAG_THROTTLED, ErrorCode(1213));
    assert_eq!(ErrorCode::PROXY_TAG_THROTTLED, ErrorCode(1223));
    assert_eq!(ErrorCode::CLIENT_INVALID_OPERATION, ErrorCode(2000));
    assert_eq!(ErrorCode::TRANSACTION_TOO_LARGE, ErrorCode(2101));
    assert_eq!(ErrorCode::TENANT_NOT_FOUND, ErrorCode(2131));
    assert_eq!(ErrorCode::API_VERSION_UNSET, ErrorCode(2200));
    assert_eq!(ErrorCode::UNKNOWN_ERROR, ErrorCode(4000));
    assert_eq!(ErrorCode::INTERNAL_ERROR, ErrorCode(4100));
    assert_eq!(ErrorCode::PKEY_ENCODE_ERROR, ErrorCode(6005));
    assert_eq!(ErrorCode::NOT_COMMITTED.name(), Some("not_committed"));
    assert_eq!(
        ErrorCode(2032).name(),
        Some("mapper_bad_range_decriptor") // FDB's spelling
    );
}

#[test]
fn display() {
    assert_eq!(
        format!("{}", ErrorCode::NOT_COMMITTED),
        "not_committed (1020)"
    );
    assert_eq!(format!("{}", ErrorCode(1019)), "UNKNOWN_ERROR (1019)");
    assert_eq!(i32::from(ErrorCode::TIMED_OUT), 1004);
    assert_eq!(u16::from(ErrorCode::from(7u16)), 7);
}

#[test]
fn fdb_error_predicates() {
    // not_committed: retryable, definitely not committed.
    assert!(ErrorCode::NOT_COMMITTED.is_retryable());
    assert!(ErrorCode::NOT_COMMITTED.is_retryable_not_committed());
    assert!(!ErrorCode::NOT_COMMITTED.is_maybe_committed());
    // commit_unknown_result: retryable, maybe committed.
    assert!(ErrorCode::COMMIT_UNKNOWN_RESULT.is_retryable());
    assert!(ErrorCode::COMMIT_UNKNOWN_RESULT.is_maybe_committed());
    assert!(!ErrorCode::COMMIT_UNKNOWN_RESULT.is_retryable_not_committed());
    assert!(ErrorCode::CLUSTER_VERSION_CHANGED.is_maybe_committed());
    // transaction_too_old / future_version.
    assert!(ErrorCode::TRANSACTION_TOO_OLD.is_retryable_not_committed());
    assert!(ErrorCode::FUTURE_VERSION.is_retryable_not_committed());
    // Fatal ones.
    for c in [
        ErrorCode::SUCCESS,
        ErrorCode::CLIENT_INVALID_OPERATION,
        ErrorCode::COMMIT_UNKNOWN_RESULT_FATAL,
        ErrorCode::TRANSACTION_CANCELLED,
        ErrorCode::TRANSACTION_TIMED_OUT,
        ErrorCode::WRONG_SHARD_SERVER,
        ErrorCode::BLOB_GRANULE_REQUEST_FAILED,
        ErrorCode::TRANSACTION_TOO_LARGE,
        ErrorCode::BROKEN_PROMISE,
        ErrorCode::INTERNAL_ERROR,
    ] {
        assert!(!c.is_retryable(), "{c}");
        assert!(!c.is_maybe_committed(), "{c}");
        assert!(!c.is_retryable_not_committed(), "{c}");
    }
}

#[test]
fn predicate_sets_exact() {
    let retryable: BTreeSet<u16> = ErrorCode::all()
        .iter()
        .filter(|e| e.code.is_retryable())
        .map(|e| e.code.0)
        .collect();
    let expected: BTreeSet<u16> = [
        1007, 1009, 1020, 1021, 1037, 1038, 1039, 1042, 1051, 1078, 1213, 1223,
    ]
    .into_iter()
    .collect();
    assert_eq!(retryable, expected);
    let maybe: BTreeSet<u16> = ErrorCode::all()
        .iter()
        .filter(|e| e.code.is_maybe_committed())
        .map(|e| e.code.0)
        .collect();
    assert_eq!(maybe, [1021, 1039].into_iter().collect());
    // The two sub-predicates are disjoint.
    for e in ErrorCode::all() {
        assert!(!(e.code.is_maybe_committed() && e.code.is_retryable_not_committed()));
    }
}

#[test]
fn on_error_actions() {
    use OnErrorAction::*;
    for (code, action) in [
        (ErrorCode::NOT_COMMITTED, RetryWithBackoff),
        (ErrorCode::COMMIT_UNKNOWN_RESULT, RetryWithBackoff),
        (ErrorCode::TRANSACTION_TOO_OLD, RetryAfterFutureVersionDelay),
        (ErrorCode::FUTURE_VERSION, RetryAfterFutureVersionDelay),
        (ErrorCode::CLUSTER_VERSION_CHANGED, RetryImmediately),
        (ErrorCode::SUCCESS, FailWithClientInvalidOperation),
        (ErrorCode::CLIENT_INVALID_OPERATION, Fatal),
        (ErrorCode::COMMIT_UNKNOWN_RESULT_FATAL, Fatal),
        (ErrorCode::TRANSACTION_TIMED_OUT, Fatal),
        (ErrorCode::WRONG_SHARD_SERVER, Fatal),
        (ErrorCode(1019), Fatal),
        // onError retries blob_granule_request_failed even though the C
        // predicate does not call it retryable.
        (ErrorCode::BLOB_GRANULE_REQUEST_FAILED, RetryWithBackoff),
    ] {
        assert_eq!(code.on_error_action(), action, "{code:?}");
    }
    assert!(!ErrorCode::BLOB_GRANULE_REQUEST_FAILED.is_retryable());
}

#[test]
fn on_error_agrees_with_predicate_except_known_gap() {
    for e in ErrorCode::all() {
        let c = e.code;
        if c == ErrorCode::BLOB_GRANULE_REQUEST_FAILED {
            continue;
        }
        assert_eq!(c.on_error_retries(), c.is_retryable(), "{c}");
    }
}

#[test]
fn resource_constrained_backoff() {
    assert!(ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED.uses_resource_constrained_backoff());
    assert!(ErrorCode::GRV_PROXY_MEMORY_LIMIT_EXCEEDED.uses_resource_constrained_backoff());
    assert!(!ErrorCode::NOT_COMMITTED.uses_resource_constrained_backoff());
    let n = ErrorCode::all()
        .iter()
        .filter(|e| e.code.uses_resource_constrained_backoff())
        .count();
    assert_eq!(n, 2);

    let max = knobs::DEFAULT_MAX_BACKOFF;
    let big = Duration::from_secs(20);
    assert_eq!(
        ErrorCode::NOT_COMMITTED.next_backoff(knobs::DEFAULT_BACKOFF, max),
        Duration::from_millis(20)
    );
    assert_eq!(ErrorCode::NOT_COMMITTED.next_backoff(big, max), max);
    assert_eq!(
        ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED.next_backoff(big, max),
        knobs::RESOURCE_CONSTRAINED_MAX_BACKOFF
    );
    assert_eq!(
        ErrorCode::GRV_PROXY_MEMORY_LIMIT_EXCEEDED.next_backoff(Duration::from_secs(2), max),
        Duration::from_secs(4)
    );
}

#[test]
fn internal_read_retries() {
    for c in [
        ErrorCode::WRONG_SHARD_SERVER,
        ErrorCode::ALL_ALTERNATIVES_FAILED,
        ErrorCode::BROKEN_PROMISE,
        ErrorCode::REQUEST_MAYBE_DELIVERED,
        ErrorCode::SERVER_OVERLOADED,
    ] {
        assert!(c.is_internal_retry_in_reads(), "{c}");
        // None of them is retryable at the onError level.
        assert!(!c.is_retryable(), "{c}");
        assert_eq!(c.on_error_action(), OnErrorAction::Fatal, "{c}");
    }
    assert!(ErrorCode::WRONG_SHARD_SERVER.invalidates_location_cache());
    assert!(ErrorCode::ALL_ALTERNATIVES_FAILED.invalidates_location_cache());
    assert!(!ErrorCode::BROKEN_PROMISE.invalidates_location_cache());
    assert!(!ErrorCode::PROCESS_BEHIND.is_internal_retry_in_reads());
    assert!(!ErrorCode::NOT_COMMITTED.is_internal_retry_in_reads());
}

#[test]
fn descriptions_present_for_spot_checks() {
    assert!(ErrorCode::NOT_COMMITTED.description().is_some());
    assert!(ErrorCode::TRANSACTION_TOO_OLD.description().is_some());
}
