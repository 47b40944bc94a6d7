//! TLS against a real fdbserver 7.3.77 started here with TLS, with certificates made at test
//! time (`rcgen`): both drivers read and write over TLS; a wrong CA, a plaintext client and a
//! client without a certificate fail with a typed error, bounded by the transaction timeout.
//!
//! Runs when `FDB_SHARED_DIR` names the team's FoundationDB build (`cluster.sh` and its
//! tarball; CI sets it); skipped with a notice otherwise. The server is one process under
//! `/tmp/tls-*`, shared by the tests of this file, and killed (its directory removed) by a
//! watchdog when the test process ends, however it ends.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fdb_driver_tokio::{Error, ErrorCode, TlsConfig, TlsError, TransactionOption};
use fdb_protocol::cluster_file::ClusterFile;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A CA and a certificate it signed (for the server and for the client).
struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn ca() -> (rcgen::Certificate, KeyPair) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::CommonName, "fdb-rust test CA");
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    (p.self_signed(&key).unwrap(), key)
}

/// A leaf for 127.0.0.1, good for both ends: FDB processes are TLS servers and clients.
fn leaf(name: &str, ca: &rcgen::Certificate, ca_key: &KeyPair) -> (String, String) {
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca, ca_key).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn pki() -> Pki {
    let (ca, ca_key) = ca();
    Pki {
        ca: ca.pem(),
        server: leaf("fdbserver", &ca, &ca_key),
        client: leaf("fdb-rust client", &ca, &ca_key),
    }
}

/// The TLS cluster of this test process.
struct TlsCluster {
    dir: PathBuf,
    port: u16,
    pki: Pki,
    /// Another CA, which signed nothing the server has.
    wrong_ca: String,
}

impl TlsCluster {
    /// The connection string, with `:tls` or (for the plaintext test) without.
    fn cluster_file(&self, tls: bool) -> ClusterFile {
        let suffix = if tls { ":tls" } else { "" };
        ClusterFile::parse(&format!("tls:test@127.0.0.1:{}{suffix}", self.port)).unwrap()
    }

    /// The client's own certificate and key, with `ca` as the CA bundle.
    fn client_tls(&self, ca: &str) -> TlsConfig {
        TlsConfig::new()
            .certificate_pem(self.pki.client.0.clone())
            .key_pem(self.pki.client.1.clone())
            .ca_pem(ca.to_string())
    }
}

static CLUSTER: OnceLock<Option<TlsCluster>> = OnceLock::new();

fn cluster() -> Option<&'static TlsCluster> {
    CLUSTER
        .get_or_init(|| {
            let Some(shared) = std::env::var_os("FDB_SHARED_DIR").filter(|s| !s.is_empty()) else {
                println!("real_tls: FDB_SHARED_DIR is not set; skipping the TLS fdbserver tests");
                return None;
            };
            Some(start(Path::new(&shared)))
        })
        .as_ref()
}

/// fdbserver and fdbcli: beside `FDB_SHARED_DIR` if unpacked there, else beside the cluster
/// `cluster.sh` started for `FDB_CLUSTER_FILE`, else unpacked by `cluster.sh env` into `dir`.
fn binaries(shared: &Path, dir: &Path) -> PathBuf {
    let mut candidates = vec![shared.join("bin")];
    if let Some(cf) = std::env::var_os("FDB_CLUSTER_FILE") {
        if let Some(parent) = Path::new(&cf).parent() {
            candidates.push(parent.join("bin"));
        }
    }
    if let Some(bin) = candidates
        .into_iter()
        .find(|b| b.join("fdbserver").is_file() && b.join("fdbcli").is_file())
    {
        return bin;
    }
    let unpack = Command::new(shared.join("cluster.sh"))
        .arg("env")
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .expect("cluster.sh runs");
    assert!(unpack.success(), "cluster.sh env {dir:?} failed");
    dir.join("bin")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(shared: &Path) -> TlsCluster {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = PathBuf::from(format!("/tmp/tls-{}-{nonce}", std::process::id()));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let bin = binaries(shared, &dir);
    let pki = pki();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ca = write("ca.pem", &pki.ca);
    let server_cert = write("server.pem", &pki.server.0);
    let server_key = write("server.key", &pki.server.1);
    let client_cert = write("client.pem", &pki.client.0);
    let client_key = write("client.key", &pki.client.1);
    let port = free_port();
    let cf = write("fdb.cluster", &format!("tls:test@127.0.0.1:{port}:tls\n"));

    // The watchdog: fdbserver lives only as long as this test process (and its directory is
    // removed after it), even if the process is killed.
    let server = format!(
        "{bin}/fdbserver -p 127.0.0.1:{port}:tls -C {cf} -d {dir}/data -L {dir}/logs \
         --listen-address public --locality-zoneid z1 --locality-machineid m1 \
         --tls-certificate-file {cert} --tls-key-file {key} --tls-ca-file {ca} \
         > {dir}/logs/stdout 2>&1 &",
        bin = bin.display(),
        cf = cf.display(),
        dir = dir.display(),
        cert = server_cert.display(),
        key = server_key.display(),
        ca = ca.display(),
    );
    let watchdog = format!(
        "{server} fdb=$!; while kill -0 {me} 2>/dev/null && kill -0 $fdb 2>/dev/null; do \
         sleep 0.5; done; kill -9 $fdb 2>/dev/null; rm -rf {dir}",
        me = std::process::id(),
        dir = dir.display(),
    );
    Command::new("sh")
        .arg("-c")
        .arg(watchdog)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh starts");

    let fdbcli = |cmd: &str| {
        Command::new(bin.join("fdbcli"))
            .arg("-C")
            .arg(&cf)
            .args(["--no-status", "--timeout", "5"])
            .arg("--tls-certificate-file")
            .arg(&client_cert)
            .arg("--tls-key-file")
            .arg(&client_key)
            .arg("--tls-ca-file")
            .arg(&ca)
            .args(["--exec", cmd])
            .output()
            .expect("fdbcli runs")
    };
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut configured = false;
    loop {
        if !configured {
            configured = fdbcli("configure new single memory").status.success();
        }
        if configured {
            let out = fdbcli("status minimal");
            if String::from_utf8_lossy(&out.stdout).contains("The database is available") {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the TLS fdbserver did not come up; logs in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    TlsCluster {
        dir,
        port,
        pki,
        wrong_ca: ca_pem_of_a_stranger(),
    }
}

fn ca_pem_of_a_stranger() -> String {
    ca().0.pem()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn key(test: &str) -> Vec<u8> {
    format!("rust-fdb-tls/{}/{test}", std::process::id()).into_bytes()
}

/// The timeout that bounds every call expected to fail.
const FAIL_WITHIN: Duration = Duration::from_secs(3);

fn timed_out(e: &Error) -> bool {
    e.code() == Some(ErrorCode::TRANSACTION_TIMED_OUT)
}

#[test]
fn tokio_reads_and_writes_over_tls() {
    let Some(c) = cluster() else { return };
    let k = key("tokio");
    let got = runtime().block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file_with_tls(
            c.cluster_file(true),
            1,
            c.client_tls(&c.pki.ca),
        )
        .expect("TLS is set up");
        let k2 = k.clone();
        db.run(move |tx| {
            let k = k2.clone();
            async move {
                tx.set(&k, b"over tls");
                Ok(())
            }
        })
        .await
        .expect("a write over TLS commits");
        let tx = db.create_transaction();
        tokio::time::timeout(Duration::from_secs(30), tx.get(&k))
            .await
            .expect("the read completes")
    });
    assert_eq!(got.unwrap().as_deref(), Some(&b"over tls"[..]));
}

#[test]
fn mio_reads_and_writes_over_tls_with_files() {
    let Some(c) = cluster() else { return };
    let k = key("mio");
    // File paths this time, as FDB_TLS_*_FILE or TLS_*_path give them.
    let tls = TlsConfig::new()
        .certificate_file(c.dir.join("client.pem"))
        .key_file(c.dir.join("client.key"))
        .ca_file(c.dir.join("ca.pem"));
    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(c.cluster_file(true), 2, tls)
        .expect("TLS is set up");
    db.run(|tx| {
        tx.set(&k, b"mio over tls");
        Ok(())
    })
    .expect("a write over TLS commits");
    let v = db.run(|tx| tx.get(&k)).expect("the read completes");
    assert_eq!(v.as_deref(), Some(&b"mio over tls"[..]));
}

#[test]
fn a_wrong_ca_fails_with_a_typed_error_on_both_drivers() {
    let Some(c) = cluster() else { return };
    let err = runtime().block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file_with_tls(
            c.cluster_file(true),
            3,
            c.client_tls(&c.wrong_ca),
        )
        .expect("the configuration itself is valid");
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::Timeout(FAIL_WITHIN));
        tx.get(b"any").await
    });
    let err = err.expect_err("no server certificate verifies against a stranger CA");
    assert!(timed_out(&err), "tokio: {err:?}");

    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(
        c.cluster_file(true),
        4,
        c.client_tls(&c.wrong_ca),
    )
    .unwrap();
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::Timeout(FAIL_WITHIN));
    let err = tx
        .get(b"any")
        .expect_err("the stranger CA fails on mio too");
    assert!(timed_out(&err), "mio: {err:?}");
}

#[test]
fn a_plaintext_client_to_the_tls_cluster_fails_cleanly() {
    let Some(c) = cluster() else { return };
    // The address without `:tls`: the client speaks plain FlowTransport to a TLS listener.
    let err = runtime().block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(c.cluster_file(false), 5).unwrap();
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::Timeout(FAIL_WITHIN));
        tx.get(b"any").await
    });
    let err = err.expect_err("a TLS listener does not answer plaintext");
    assert!(timed_out(&err), "tokio: {err:?}");
    let db = fdb_driver_mio::Database::from_cluster_file(c.cluster_file(false), 6).unwrap();
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::Timeout(FAIL_WITHIN));
    let err = tx.get(b"any").expect_err("mio plaintext fails too");
    assert!(timed_out(&err), "mio: {err:?}");
    // And the server took no harm: a TLS client still works.
    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(
        c.cluster_file(true),
        7,
        c.client_tls(&c.pki.ca),
    )
    .unwrap();
    assert!(db.read_version().unwrap() > 0);
}

/// No fdbserver needed: a `:tls` cluster file with TLS that cannot work is refused when the
/// database opens, not tried in plaintext.
#[test]
fn a_tls_cluster_file_without_usable_tls_is_refused_at_open() {
    let cf = ClusterFile::parse("a:b@127.0.0.1:1:tls").unwrap();
    let no_ca = TlsConfig::new().ca_file("/nonexistent/ca.pem");
    match fdb_driver_mio::Database::from_cluster_file_with_tls(cf.clone(), 1, no_ca) {
        Err(Error::Tls(TlsError::Read { path, .. })) => {
            assert_eq!(path, Path::new("/nonexistent/ca.pem"))
        }
        other => panic!("expected a TLS read error, got {:?}", other.err()),
    }
    let bad_rules = TlsConfig::new()
        .ca_pem(pki().ca)
        .verify_peers("S.CN=fdbserver");
    match fdb_driver_mio::Database::from_cluster_file_with_tls(cf, 1, bad_rules) {
        Err(Error::Tls(TlsError::VerifyPeers { .. })) => {}
        other => panic!("expected a verify-peers error, got {:?}", other.err()),
    }
}
