//! `Cluster`: how API versions 510 to 600 open a database, as foundationdb-rs 0.11 gives it
//! with those versions' features: `Cluster::new(path)`, then `create_database()`. As in
//! libfdb_c (`fdb_create_cluster`, `fdb_cluster_create_database`), the cluster only keeps
//! the cluster file's path, and opening the database is where a missing or bad file fails.
//! Here it is there whatever the feature, as `Database::new` is: a program written for an
//! older API version compiles, and one for a newer never names it.

use std::future::{ready, Future, Ready};

use crate::database::Database;
use crate::error::FdbResult;

/// A cluster file's path, from which the database is opened (`FDBCluster`).
#[derive(Clone, Debug)]
pub struct Cluster {
    path: Option<String>,
}

impl Cluster {
    /// The cluster of the cluster file at `path` (`None`: libfdb_c's lookup). Never fails:
    /// the file is read by [`Cluster::create_database`].
    pub fn new(
        path: Option<&str>,
    ) -> impl Future<Output = FdbResult<Cluster>> + Send + Sync + Unpin {
        let path = path.filter(|p| !p.is_empty()).map(str::to_string);
        ready(Ok(Cluster { path }))
    }

    /// [`Cluster::new`] with a path.
    pub fn from_path(path: &str) -> impl Future<Output = FdbResult<Cluster>> + Send + Sync + Unpin {
        Self::new(Some(path))
    }

    /// [`Cluster::new`] with libfdb_c's lookup.
    #[allow(clippy::should_implement_trait)]
    pub fn default() -> impl Future<Output = FdbResult<Cluster>> {
        Self::new(None)
    }

    /// Opens the cluster's database ([`Database::new`]; the network must be set up).
    pub fn create_database(&self) -> Ready<FdbResult<Database>> {
        ready(Database::new(self.path.as_deref()))
    }
}
