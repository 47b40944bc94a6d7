//! `recipes::leader_election` stores foundationdb-rs 0.11's records, value for value, so an
//! election can be shared by processes on either crate during a migration. The records are
//! read back here raw, as foundationdb-rs reads them. One test: the network is set up once
//! per process.

mod common;

use std::time::Duration;

use fdb_compat::recipes::leader_election::{ElectionConfig, LeaderElection, LeaderElectionError};
use fdb_compat::tuple::{unpack, Subspace, Versionstamp};
use std::future::Future;
use std::sync::Arc;

use fdb_compat::{Database, Transaction};
use futures::executor::block_on;

/// Runs `f` in a transaction of its own, committed when `f` succeeds.
fn run<T, Fut>(
    db: &Database,
    f: impl FnOnce(Arc<Transaction>) -> Fut,
) -> Result<T, LeaderElectionError>
where
    Fut: Future<Output = Result<T, LeaderElectionError>>,
{
    let tx = Arc::new(db.create_trx().expect("transaction"));
    let out = block_on(f(tx.clone()));
    if out.is_ok() {
        let Ok(tx) = Arc::try_unwrap(tx) else {
            panic!("the transaction has one owner after the closure")
        };
        block_on(tx.commit()).expect("commit");
    }
    out
}

#[test]
fn records_are_foundationdb_rs_records() {
    let cluster = fdb_tests::cluster::TestCluster::start();
    common::with_network(&cluster, "election", check);
}

fn check(db: &Database) {
    let space = Subspace::all().subspace(&("election-layout",));
    let election = &LeaderElection::new(space.clone());
    let t0 = Duration::from_secs(1_000);
    let config = ElectionConfig::with_lease_duration(Duration::from_secs(10));
    run(db, |tx| async move {
        election.initialize_with_config(&tx, config).await
    })
    .unwrap();

    // A claim before registering is refused, as is a cycle (its heartbeat needs the record).
    let refused = run(db, |tx| async move {
        election.try_claim_leadership(&tx, "a", 1, t0).await
    });
    assert!(matches!(
        refused,
        Err(LeaderElectionError::UnregisteredCandidate)
    ));
    let refused = run(db, |tx| async move {
        election.run_election_cycle(&tx, "a", 1, t0).await
    });
    assert!(matches!(refused, Err(LeaderElectionError::ProcessNotFound(id)) if id == "a"));

    for id in ["a", "b"] {
        run(db, |tx| async move {
            election.register_candidate(&tx, id, 1, t0).await
        })
        .unwrap();
    }
    let raw = |key: Vec<u8>| {
        let tx = db.create_trx().unwrap();
        block_on(tx.get(&key, false))
            .unwrap()
            .expect("record")
            .to_vec()
    };
    // Candidate: (priority i32, heartbeat ns, complete versionstamp).
    let (priority, beat, stamp_a): (i32, u64, Versionstamp) =
        unpack(&raw(space.pack(&("candidates", "a")))).unwrap();
    assert_eq!((priority, beat), (1, 1_000_000_000_000));
    assert!(stamp_a.is_complete());

    // First claim: ballot 1, and the leader record keeps the candidate's registration
    // stamp as plain bytes.
    let first = run(db, |tx| async move {
        election.run_election_cycle(&tx, "a", 1, t0).await
    })
    .unwrap();
    assert!(first.is_leader());
    let leader_key = space.pack(&("leader",));
    let record = raw(leader_key.clone());
    let (ballot, id, prio, expiry, stamp): (u64, String, i32, u64, Vec<u8>) =
        unpack(&record).unwrap();
    assert_eq!((ballot, id.as_str(), prio), (1, "a", 1));
    assert_eq!(expiry, 1_010_000_000_000);
    assert_eq!(stamp, stamp_a.as_bytes().to_vec());
    assert_eq!(
        record.last().copied(),
        Some(0x00),
        "bytes element ends the tuple"
    );

    // Each claim or refresh moves the ballot on; a heartbeat keeps the registration stamp.
    let t1 = t0 + Duration::from_secs(2);
    let again = run(db, |tx| async move {
        election.run_election_cycle(&tx, "a", 1, t1).await
    })
    .unwrap();
    assert_eq!(again.leader_state().map(|l| l.ballot), Some(2));
    let refreshed = run(db, |tx| async move {
        election.refresh_lease(&tx, "a", t1).await
    })
    .unwrap();
    assert_eq!(refreshed.map(|l| l.ballot), Some(3));
    let (_, _, stamp_again): (i32, u64, Versionstamp) =
        unpack(&raw(space.pack(&("candidates", "a")))).unwrap();
    assert_eq!(stamp_again, stamp_a);

    // b, of the same priority, follows while the lease holds and takes over after it.
    let follower = run(db, |tx| async move {
        election.run_election_cycle(&tx, "b", 1, t1).await
    })
    .unwrap();
    assert!(!follower.is_leader());
    let late = t1 + Duration::from_secs(11);
    let taken = run(db, |tx| async move {
        election.run_election_cycle(&tx, "b", 1, late).await
    })
    .unwrap();
    let state = taken.leader_state().cloned().expect("b leads");
    assert_eq!((state.ballot, state.leader_id.as_str()), (4, "b"));

    // Candidates listed in registration order; a, silent for longer than the candidate
    // timeout (15 s here), is the one evicted.
    let listed = run(
        db,
        |tx| async move { election.list_candidates(&tx, late).await },
    )
    .unwrap();
    let ids: Vec<&str> = listed.iter().map(|c| c.process_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    let later = late + Duration::from_secs(5);
    let evicted = run(db, |tx| async move {
        election.evict_dead_candidates(&tx, later).await
    })
    .unwrap();
    assert_eq!(evicted, 1);
    let left = run(
        db,
        |tx| async move { election.get_candidate(&tx, "a").await },
    )
    .unwrap();
    assert!(left.is_none());
}
