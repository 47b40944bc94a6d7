//! A database handle and the retry loop.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::knobs::Knobs;
use fdb_protocol::messages::types::Version;
use fdb_protocol::{Census, DatabaseOption, Priority, TransactionOption};

use crate::cluster_file::read_cluster_file;
use crate::driver::{apply, query, submit, Driver};
use crate::engine::{entropy_seed, Engine};
use crate::error::Error;
use crate::network_env::knobs;
use crate::retry::{Next, RetryLoop};
use crate::tls::{Tls, TlsConfig};
use crate::transaction::Transaction;

/// A handle to a FoundationDB database. Cheap to clone (clones share the driver's loop);
/// the loop ends when the last handle — database or transaction — is dropped.
#[derive(Clone)]
pub struct Database<D: Driver> {
    driver: D,
    /// The knobs it was opened with (they bound some option values); shared, so that the
    /// handle stays small.
    knobs: Arc<Knobs>,
}

impl<D: Driver> Database<D> {
    /// Opens the database named by a cluster file found as libfdb_c finds it (the explicit
    /// path, `FDB_CLUSTER_FILE`, `./fdb.cluster`, the platform default). The file is
    /// rewritten if the coordinators forward the client elsewhere.
    /// TLS comes from the `FDB_TLS_*` environment, as libfdb_c's does without options, and
    /// so do knobs (`FDB_NETWORK_OPTION_KNOB`, see [`crate::network_env::knobs`]).
    pub fn open(cluster_file: Option<&Path>) -> Result<Self, Error> {
        Self::open_with_tls(cluster_file, TlsConfig::new())
    }

    /// [`Database::open`] with TLS settings and the knobs to use (these alone: the
    /// environment's `FDB_NETWORK_OPTION_KNOB` is not read). libfdb_c's knobs are the
    /// network's, set before it starts; here each database takes its own.
    pub fn open_with(
        cluster_file: Option<&Path>,
        tls: TlsConfig,
        knobs: Knobs,
    ) -> Result<Self, Error> {
        let (path, cf) = read_cluster_file(cluster_file)?;
        Self::start(cf, entropy_seed(), Some(path), &tls, knobs)
    }

    /// [`Database::open`] with TLS settings (what is unset in `tls` still comes from the
    /// `FDB_TLS_*` environment). Fails with [`Error::Tls`] if the cluster file names a `:tls`
    /// coordinator and TLS cannot be set up.
    pub fn open_with_tls(cluster_file: Option<&Path>, tls: TlsConfig) -> Result<Self, Error> {
        let (path, cf) = read_cluster_file(cluster_file)?;
        Self::start(cf, entropy_seed(), Some(path), &tls, knobs())
    }

    /// [`Database::open`] with an explicit seed for the core's randomness.
    pub fn open_file_with_seed(path: &Path, seed: u64) -> Result<Self, Error> {
        let (path, cf) = read_cluster_file(Some(path))?;
        Self::start(cf, seed, Some(path), &TlsConfig::new(), knobs())
    }

    /// A database from a parsed connection string (no file to rewrite), with an explicit seed.
    pub fn from_cluster_file(cluster: ClusterFile, seed: u64) -> Result<Self, Error> {
        Self::start(cluster, seed, None, &TlsConfig::new(), knobs())
    }

    /// [`Database::from_cluster_file`] with TLS settings.
    pub fn from_cluster_file_with_tls(
        cluster: ClusterFile,
        seed: u64,
        tls: TlsConfig,
    ) -> Result<Self, Error> {
        Self::start(cluster, seed, None, &tls, knobs())
    }

    fn start(
        cluster: ClusterFile,
        seed: u64,
        path: Option<std::path::PathBuf>,
        tls: &TlsConfig,
        knobs: Knobs,
    ) -> Result<Self, Error> {
        let required = cluster.coordinators.iter().any(|c| c.is_tls());
        let tls = Tls::prepare(tls, D::supports_tls(), required)?;
        let engine = Engine::new(cluster, seed, path, D::new_clock(), knobs).with_tls(tls);
        Ok(Database {
            driver: D::start(engine)?,
            knobs: Arc::new(knobs),
        })
    }

    /// The driver handle (for driver-specific calls).
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The connection string in use (it changes when the coordinators forward the client).
    pub async fn cluster(&self) -> Result<ClusterFile, Error> {
        query(&self.driver, |c, _| c.cluster().clone()).await
    }

    /// libfdb_c's client status document (`fdb_database_get_client_status`): JSON naming the
    /// coordinators, proxies and storage servers this database knows and how its connection
    /// to each stands (see [`fdb_protocol::ClientStatus`]).
    pub async fn get_client_status(&self) -> Result<fdb_protocol::ClientStatus, Error> {
        query(&self.driver, |c, now| c.client_status(now)).await
    }

    /// A read version (GRV), at default priority.
    pub async fn read_version(&self) -> Result<Version, Error> {
        self.read_version_with(Priority::Default).await
    }

    /// A read version at the given priority.
    pub async fn read_version_with(&self, priority: Priority) -> Result<Version, Error> {
        submit(&self.driver, move |c, now| {
            c.get_read_version(now, priority)
        })
        .await
    }

    /// Options every transaction created from now on starts with (and returns to on reset),
    /// like libfdb_c's `transaction_*` database options. An option this client does not
    /// implement is refused with `unsupported_operation` and nothing changes.
    pub fn set_transaction_defaults(&self, defaults: Vec<TransactionOption>) -> Result<(), Error> {
        for opt in &defaults {
            opt.check_supported()?;
        }
        apply(&self.driver, move |c, _| {
            c.set_transaction_defaults(defaults)
        });
        Ok(())
    }

    /// Sets a database option (`fdb_database_set_option`). One this client does not
    /// implement fails with `unsupported_operation`, a value out of range with
    /// `invalid_option_value`; nothing is silently ignored.
    pub fn set_option(&self, opt: DatabaseOption) -> Result<(), Error> {
        opt.check_with(&self.knobs)?;
        apply(&self.driver, move |c, _| {
            // Checked above: the same checks cannot fail on the loop.
            let _ = c.set_database_option(opt);
        });
        Ok(())
    }

    /// What the client holds right now: live transactions and requests in the core, and
    /// the calls the application still waits for. All zero once every transaction and
    /// future was dropped (nothing leaks).
    pub async fn census(&self) -> Result<(Census, usize), Error> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.driver.send(Box::new(move |e: &mut Engine| {
            e.reap();
            let _ = tx.send((e.client().census(), e.waiting()));
        }));
        rx.await.map_err(|_| Error::Shutdown)
    }

    /// A new transaction.
    pub fn create_transaction(&self) -> Transaction<D> {
        Transaction::new(self.driver.clone())
    }

    /// Runs `f` in a transaction and commits it, retrying as `on_error` allows (the standard
    /// FDB retry loop). `f` may run several times: keep side effects inside the transaction.
    pub async fn run<T, F, Fut>(&self, f: F) -> Result<T, Error>
    where
        F: FnMut(Transaction<D>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        run_in(self.create_transaction(), f).await
    }
}

/// The standard retry loop on `tx`, shared by [`Database::run`] and a tenant's `run`.
pub(crate) async fn run_in<D, T, F, Fut>(tx: Transaction<D>, mut f: F) -> Result<T, Error>
where
    D: Driver,
    F: FnMut(Transaction<D>) -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    loop {
        let result = match f(tx.clone()).await {
            Ok(v) => tx.commit().await.map(|_| v),
            Err(e) => Err(e),
        };
        match RetryLoop::after(result) {
            Next::Done(r) => return r,
            // `on_error` fails with the error itself when it must not retry.
            Next::OnError(code) => tx.on_error(code).await?,
        }
    }
}
