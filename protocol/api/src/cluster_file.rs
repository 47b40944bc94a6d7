//! Cluster files on disk, as libfdb_c handles them: found in its search order, replaced
//! atomically when the coordinators move the client, read again when every coordinator
//! failed (an operator may have changed them). The rules themselves (parsing, the search
//! order) are the core's; this is only the file IO, written once for both drivers.

use std::path::{Path, PathBuf};

use fdb_protocol::cluster_file::{cluster_file_search_order, ClusterFile};

use crate::error::Error;

/// Reads the cluster file the way libfdb_c finds it: the explicit path, else
/// `FDB_CLUSTER_FILE`, else `./fdb.cluster`, else the platform default.
pub fn read_cluster_file(explicit: Option<&Path>) -> Result<(PathBuf, ClusterFile), Error> {
    let explicit = explicit.map(|p| p.to_string_lossy().into_owned());
    let env = std::env::var("FDB_CLUSTER_FILE").ok();
    let tried = cluster_file_search_order(explicit.as_deref(), env.as_deref());
    for path in &tried {
        if let Ok(text) = std::fs::read_to_string(path) {
            let cf = ClusterFile::parse(&text).map_err(Error::ClusterFile)?;
            return Ok((PathBuf::from(path), cf));
        }
    }
    Err(Error::ClusterFileNotFound { tried })
}

/// Replaces a cluster file's contents the way libfdb_c's `atomicReplace` does: write a
/// temporary file beside it, then rename it over the original.
pub fn replace_cluster_file(path: &Path, cluster: &ClusterFile) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(cluster.file_contents().as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Writes a forwarded connection string back to its file, logging what happened (the
/// client carries on with the new string either way).
pub fn persist_cluster_file(path: &Path, cluster: &ClusterFile) {
    match replace_cluster_file(path, cluster) {
        Ok(()) => tracing::info!(
            path = %path.display(),
            connection_string = %cluster,
            "cluster file updated"
        ),
        Err(e) => tracing::warn!(
            path = %path.display(),
            error = %e,
            "cannot update the cluster file"
        ),
    }
}

/// Reads the cluster file again after every coordinator failed: if it now holds another
/// connection string (an operator moved the coordinators), that is the one to use.
pub(crate) fn reread_cluster_file(path: &Path, current: &ClusterFile) -> Option<ClusterFile> {
    let bytes = std::fs::read(path).ok()?;
    let cf = ClusterFile::parse_file_bytes(&bytes).ok()?;
    if cf.to_string() == current.to_string() {
        return None;
    }
    tracing::info!(connection_string = %cf, "the cluster file changed: using it");
    Some(cf)
}
