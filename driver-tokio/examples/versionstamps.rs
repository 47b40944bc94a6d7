//! Versionstamps: an append-only log whose keys are ordered by commit, and the versionstamp
//! each append got, handed out of the retry loop.
//!
//! Runs on the cluster in `FDB_CLUSTER_FILE`, or on the in-process test cluster when it is
//! not set: `cargo run -p fdb-driver-tokio --example versionstamps`.

use fdb_driver_tokio::protocol::tuple::{Subspace, Versionstamp};
use fdb_driver_tokio::{Database, Error, MutationType};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_test_cluster, db) = open()?;
    let log = Subspace::from_bytes(&b"example/log/"[..]);
    clear(&db, &log).await?;

    let mut stamps = Vec::new();
    for entry in ["first", "second", "third"] {
        let log = log.clone();
        // The key holds an incomplete versionstamp, which the commit fills in. The future is
        // asked for before the commit and resolves after it, so it leaves the closure with
        // the result; a retried attempt asks anew.
        let stamp = db
            .run(|tx| {
                let log = log.clone();
                async move {
                    let key = log
                        .pack_with_versionstamp(&(Versionstamp::incomplete(0),))
                        .expect("one incomplete versionstamp");
                    tx.atomic_op(&key, entry, MutationType::SetVersionstampedKey);
                    Ok(tx.get_versionstamp())
                }
            })
            .await?
            .await?;
        println!("{entry}: versionstamp {}", hex(&stamp));
        stamps.push(stamp);
    }

    // Read back in key order = commit order, each key carrying its commit's versionstamp.
    let tx = db.create_transaction();
    let rows = tx.get_range_all(&log, false).await?;
    let mut read = Vec::new();
    for kv in rows.iter() {
        let (stamp,): (Versionstamp,) = log.unpack(kv.key()).expect("a log key");
        assert_eq!(stamp.user_version(), 0);
        let version: [u8; 10] = stamp.transaction_version().try_into().expect("10 bytes");
        read.push((version, kv.value().to_vec()));
    }
    let want: Vec<_> = stamps
        .iter()
        .zip([&b"first"[..], b"second", b"third"])
        .map(|(s, v)| (*s, v.to_vec()))
        .collect();
    assert_eq!(
        read, want,
        "the log is in commit order, under the stamps handed out"
    );
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "stamps grow");
    println!("the log reads back in commit order");
    clear(&db, &log).await?;
    Ok(())
}

async fn clear(db: &Database, s: &Subspace) -> Result<(), Error> {
    let (begin, end) = s.range();
    db.run(|tx| {
        let (begin, end) = (begin.clone(), end.clone());
        async move {
            tx.clear_range(begin, end);
            Ok(())
        }
    })
    .await
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cluster in `FDB_CLUSTER_FILE`, else the in-process test cluster (kept alive by the
/// first value).
fn open() -> Result<(Option<fdb_tests::cluster::TestCluster>, Database), Error> {
    match std::env::var_os("FDB_CLUSTER_FILE").filter(|p| !p.is_empty()) {
        Some(path) => Ok((None, Database::open(Some(path.as_ref()))?)),
        None => {
            let cluster = fdb_tests::cluster::TestCluster::start();
            let cf = fdb_driver_tokio::ClusterFile::parse(&cluster.cluster_file_string())
                .map_err(Error::ClusterFile)?;
            Ok((Some(cluster), Database::from_cluster_file(cf, 1)?))
        }
    }
}
