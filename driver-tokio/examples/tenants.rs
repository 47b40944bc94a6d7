//! Tenants: named, isolated key spaces. A tenant's transactions read and write its keys
//! only (stored under a prefix the application never sees); tenants are created, listed and
//! deleted through `tenant_management`.
//!
//! Runs on the cluster in `FDB_CLUSTER_FILE` (which needs `tenant_mode` optional or
//! required), or on the in-process test cluster when it is not set:
//! `cargo run -p fdb-driver-tokio --example tenants`.

use fdb_driver_tokio::{tenant_management, Database, Error, ErrorCode};

const TENANTS: [&str; 2] = ["example-tenant-a", "example-tenant-b"];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_test_cluster, db) = open()?;
    for name in TENANTS {
        remove(&db, name).await?;
        tenant_management::create_tenant(&db, name).await?;
    }
    let names: Vec<String> = tenant_management::list_tenants(&db, "example-", "example.", 10)
        .await?
        .iter()
        .map(|t| String::from_utf8_lossy(t.name()).into_owned())
        .collect();
    println!("tenants: {names:?}");
    assert_eq!(names, TENANTS);

    // The same key in two tenants: two values, each tenant sees only its own.
    let (a, b) = (db.open_tenant(TENANTS[0]), db.open_tenant(TENANTS[1]));
    for (tenant, value) in [(&a, &b"for a"[..]), (&b, b"for b")] {
        tenant
            .run(|tx| async move {
                tx.set(b"greeting", value);
                Ok(())
            })
            .await?;
    }
    let read_a = a.create_transaction().get(b"greeting").await?;
    let read_b = b.create_transaction().get(b"greeting").await?;
    println!(
        "tenant a: {read_a:?}, tenant b: {read_b:?} (ids {}, {})",
        a.get_id().await?,
        b.get_id().await?
    );
    assert_eq!(read_a.as_deref(), Some(&b"for a"[..]));
    assert_eq!(read_b.as_deref(), Some(&b"for b"[..]));
    // Outside the tenants the key does not exist.
    assert_eq!(db.create_transaction().get(b"greeting").await?, None);

    // A tenant that holds keys cannot be deleted; emptied, it can.
    let e = tenant_management::delete_tenant(&db, TENANTS[0])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TENANT_NOT_EMPTY));
    for name in TENANTS {
        remove(&db, name).await?;
    }
    // A handle to a deleted tenant fails its transactions with `tenant_not_found`.
    let gone = db
        .open_tenant(TENANTS[0])
        .create_transaction()
        .get(b"greeting")
        .await;
    assert_eq!(gone.unwrap_err().code(), Some(ErrorCode::TENANT_NOT_FOUND));
    println!("tenants emptied and deleted");
    Ok(())
}

/// Empties and deletes tenant `name` if it exists.
async fn remove(db: &Database, name: &str) -> Result<(), Error> {
    if tenant_management::get_tenant(db, name).await?.is_none() {
        return Ok(());
    }
    db.open_tenant(name)
        .run(|tx| async move {
            tx.clear_range(b"", b"\xff");
            Ok(())
        })
        .await?;
    tenant_management::delete_tenant(db, name).await
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
