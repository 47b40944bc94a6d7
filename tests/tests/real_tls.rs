//! TLS against a real fdbserver 7.3.77 started here with TLS, with certificates made at test
//! time (`rcgen`): both drivers read and write over TLS; a wrong CA, a plaintext client and a
//! client without a certificate fail with a typed error, bounded by the transaction timeout.
//! An encrypted client key (PKCS#8, `TLS_password`) works with its password and is refused
//! at open without it or with a wrong one. The database server checks authorization tokens
//! (`--authorization-public-key-file`, a key made here): a client without a certificate reads
//! and writes its tenant with a token for it (`authorization_token`), and is refused without
//! one or with a token for another tenant.
//!
//! Runs when `FDB_SHARED_DIR` names the team's FoundationDB build (`cluster.sh` and its
//! tarball; CI sets it); skipped with a notice otherwise. The server is one process under
//! `/tmp/tls-*`, shared by the tests of this file, and killed (its directory removed) by a
//! watchdog when the test process ends, however it ends.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use fdb_driver_tokio::{Error, ErrorCode, TlsConfig, TlsError, TransactionOption};
use fdb_protocol::cluster_file::ClusterFile;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};

/// The name the servers know the token key by (`kid`).
const TOKEN_KEY_ID: &str = "fdb-rust-test-key";

/// The public half of `pkcs8` as the JSON Web Key Set fdbserver reads (`JsonWebKeySet.cpp`:
/// `kty` EC, `alg` ES256, `crv` P-256, `x` and `y` in base64url).
fn public_jwks(pkcs8: &[u8]) -> String {
    let pair = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        pkcs8,
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let point = pair.public_key().as_ref(); // 0x04 | x | y
    let (x, y) = (&point[1..33], &point[33..65]);
    format!(
        r#"{{"keys":[{{"kty":"EC","alg":"ES256","kid":"{TOKEN_KEY_ID}","crv":"P-256","x":"{}","y":"{}"}}]}}"#,
        URL_SAFE_NO_PAD.encode(x),
        URL_SAFE_NO_PAD.encode(y)
    )
}

/// A token for `tenant_ids`, valid for an hour, signed with `pkcs8` (ES256: the JWS form of
/// the signature, r then s). The `tenants` claim lists each id as base64 of its 8
/// big-endian bytes, the tenant's key prefix (`TokenSign.cpp`).
fn token(pkcs8: &[u8], tenant_ids: &[i64]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = format!(r#"{{"alg":"ES256","kid":"{TOKEN_KEY_ID}","typ":"JWT"}}"#);
    let tenants: Vec<String> = tenant_ids
        .iter()
        .map(|id| format!("\"{}\"", STANDARD.encode(id.to_be_bytes())))
        .collect();
    let payload = format!(
        r#"{{"iss":"fdb-rust-test","sub":"tests","iat":{now},"nbf":{},"exp":{},"jti":"t{now}","tenants":[{}]}}"#,
        now - 60,
        now + 3600,
        tenants.join(",")
    );
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let rng = ring::rand::SystemRandom::new();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng).unwrap();
    let sig = pair.sign(&rng, input.as_bytes()).unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

/// A CA and the certificates it signed (for the servers and for the client).
struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
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
    let (ca, ca_key) = ca("fdb-rust test CA");
    Pki {
        ca: ca.pem(),
        server: leaf("fdbserver", &ca, &ca_key),
        client: leaf("fdb-rust client", &ca, &ca_key),
    }
}

/// The TLS servers of this test process. Two, because fdbserver throttles TLS by client IP:
/// after two failed handshakes from one IP within `TLS_SERVER_CONNECTION_THROTTLE_TIMEOUT`
/// (9 s) it holds every new TLS connection from that IP for 2 s and then closes it
/// (`acceptHandshakeWrapper` in `flow/Net2.actor.cpp`) — good clients too, and all of ours
/// come from 127.0.0.1. So the tests whose handshakes must fail get their own server
/// (`hostile_port`, with a database of its own, so that only TLS can make them fail).
struct TlsCluster {
    dir: PathBuf,
    /// The server with a database.
    port: u16,
    /// The server for failing handshakes.
    hostile_port: u16,
    pki: Pki,
    /// Another CA, which signed nothing the servers have.
    wrong_ca: String,
    /// The key the database server checks authorization tokens with (PKCS#8, P-256).
    token_key: Vec<u8>,
    /// The servers' watchdogs: they end by themselves with this process (never waited for).
    _watchdogs: [Child; 2],
}

impl TlsCluster {
    /// The connection string of the database.
    fn cluster_file(&self) -> ClusterFile {
        ClusterFile::parse(&format!("tls:test@127.0.0.1:{}:tls", self.port)).unwrap()
    }

    /// The connection string of the hostile server, with `:tls` or (for the plaintext test)
    /// without.
    fn hostile(&self, tls: bool) -> ClusterFile {
        let suffix = if tls { ":tls" } else { "" };
        ClusterFile::parse(&format!("tls:test@127.0.0.1:{}{suffix}", self.hostile_port)).unwrap()
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
    // The drivers' warnings (refused handshakes) in each test's captured output.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::WARN)
        .try_init();
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
    std::fs::create_dir_all(&dir).unwrap();
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
    let (port, hostile_port) = (free_port(), free_port());
    let rng = ring::rand::SystemRandom::new();
    let token_key = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .unwrap()
        .as_ref()
        .to_vec();
    let jwks = write("jwks.json", &public_jwks(&token_key));
    let server = |name: &str, port: u16| {
        let home = dir.join(name);
        std::fs::create_dir_all(home.join("data")).unwrap();
        std::fs::create_dir_all(home.join("logs")).unwrap();
        let cf = home.join("fdb.cluster");
        std::fs::write(&cf, format!("tls:test@127.0.0.1:{port}:tls\n")).unwrap();
        let authz = (name == "db").then_some(jwks.as_path());
        let watchdog = spawn_fdbserver(
            &bin,
            &dir,
            &home,
            port,
            [&server_cert, &server_key, &ca],
            authz,
        );
        (cf, watchdog)
    };
    let (cf, db_watchdog) = server("db", port);
    let (hostile_cf, hostile_watchdog) = server("hostile", hostile_port);

    let fdbcli = |cf: &Path, cmd: &str| {
        Command::new(bin.join("fdbcli"))
            .arg("-C")
            .arg(cf)
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
    // Both get a database: a failing test must fail for TLS, not for want of a database.
    let deadline = Instant::now() + Duration::from_secs(45);
    for cf in [&cf, &hostile_cf] {
        let mut configured = false;
        loop {
            if !configured {
                configured = fdbcli(cf, "configure new single memory").status.success();
            }
            if configured {
                let out = fdbcli(cf, "status minimal");
                if String::from_utf8_lossy(&out.stdout).contains("The database is available")
                    && fdbcli(cf, "configure tenant_mode=optional_experimental")
                        .status
                        .success()
                {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the TLS fdbserver of {} did not come up; logs in {}",
                cf.display(),
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    TlsCluster {
        dir,
        port,
        hostile_port,
        pki,
        wrong_ca: self::ca("a stranger's CA").0.pem(),
        token_key,
        _watchdogs: [db_watchdog, hostile_watchdog],
    }
}

/// Starts fdbserver for `home/fdb.cluster` on `port` with TLS (`[certificate, key, CA]`),
/// under a watchdog: it lives only as long as this test process, even a killed one, and `top`
/// is removed after it.
fn spawn_fdbserver(
    bin: &Path,
    top: &Path,
    home: &Path,
    port: u16,
    tls: [&Path; 3],
    authz: Option<&Path>,
) -> Child {
    let [cert, key, ca] = tls.map(|p| p.display().to_string());
    let authz = authz.map_or(String::new(), |p| {
        format!(" --authorization-public-key-file {}", p.display())
    });
    let server = format!(
        "{bin}/fdbserver -p 127.0.0.1:{port}:tls -C {home}/fdb.cluster -d {home}/data \
         -L {home}/logs --listen-address public --locality-zoneid z{port} \
         --locality-machineid m{port} --tls-certificate-file {cert} --tls-key-file {key} \
         --tls-ca-file {ca}{authz} > {home}/logs/stdout 2>&1 &",
        bin = bin.display(),
        home = home.display(),
    );
    let watchdog = format!(
        "{server} fdb=$!; while kill -0 {me} 2>/dev/null && kill -0 $fdb 2>/dev/null; do \
         sleep 0.5; done; kill -9 $fdb 2>/dev/null; sleep 0.5; rm -rf {top}",
        me = std::process::id(),
        top = top.display(),
    );
    Command::new("sh")
        .arg("-c")
        .arg(watchdog)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh starts")
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
            c.cluster_file(),
            1,
            c.client_tls(&c.pki.ca),
        )
        .expect("TLS is set up");
        let k2 = k.clone();
        let write = db.run(move |tx| {
            let k = k2.clone();
            async move {
                tx.set(&k, b"over tls");
                Ok(())
            }
        });
        tokio::time::timeout(Duration::from_secs(30), write)
            .await
            .expect("the write completes")
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
    // File paths this time, as FDB_TLS_*_FILE or TLS_*_path give them; and plaintext
    // connections off (7.4's TLS_disable_plaintext_connection), which a TLS cluster never
    // needs.
    let tls = TlsConfig::new()
        .certificate_file(c.dir.join("client.pem"))
        .key_file(c.dir.join("client.key"))
        .ca_file(c.dir.join("ca.pem"))
        .disable_plaintext_connection(true);
    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(c.cluster_file(), 2, tls)
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
            c.hostile(true),
            3,
            c.client_tls(&c.wrong_ca),
        )
        .expect("the configuration itself is valid");
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::Timeout(FAIL_WITHIN))
            .unwrap();
        tx.get(b"any").await
    });
    let err = err.expect_err("no server certificate verifies against a stranger CA");
    assert!(timed_out(&err), "tokio: {err:?}");

    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(
        c.hostile(true),
        4,
        c.client_tls(&c.wrong_ca),
    )
    .unwrap();
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::Timeout(FAIL_WITHIN))
        .unwrap();
    let err = tx
        .get(b"any")
        .expect_err("the stranger CA fails on mio too");
    assert!(timed_out(&err), "mio: {err:?}");
}

#[test]
fn a_plaintext_client_to_a_tls_server_fails_cleanly() {
    let Some(c) = cluster() else { return };
    // The address without `:tls`: the client speaks plain FlowTransport to a TLS listener.
    let err = runtime().block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(c.hostile(false), 5).unwrap();
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::Timeout(FAIL_WITHIN))
            .unwrap();
        tx.get(b"any").await
    });
    let err = err.expect_err("a TLS listener does not answer plaintext");
    assert!(timed_out(&err), "tokio: {err:?}");
    let db = fdb_driver_mio::Database::from_cluster_file(c.hostile(false), 6).unwrap();
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::Timeout(FAIL_WITHIN))
        .unwrap();
    let err = tx.get(b"any").expect_err("mio plaintext fails too");
    assert!(timed_out(&err), "mio: {err:?}");
}

/// fdbserver accepts a TLS client without a certificate (servers do not require one,
/// `ConfigureSSLContext`), but as an untrusted peer: its requests to public endpoints must
/// carry an authorization token (`message.verify()` in `fdbrpc/fdbrpc.h`), so without tenant
/// tokens every read and commit is refused with `permission_denied`.
#[test]
fn a_client_without_a_certificate_is_untrusted() {
    let Some(c) = cluster() else { return };
    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(
        c.cluster_file(),
        8,
        TlsConfig::new().ca_pem(c.pki.ca.clone()),
    )
    .unwrap();
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::Timeout(FAIL_WITHIN))
        .unwrap();
    let err = tx
        .get(key("nocert"))
        .expect_err("an untrusted client reads nothing");
    assert_eq!(err.code(), Some(ErrorCode::PERMISSION_DENIED), "{err:?}");
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::Timeout(FAIL_WITHIN))
        .unwrap();
    tx.set(key("nocert"), b"x");
    let err = tx.commit().expect_err("an untrusted client writes nothing");
    assert_eq!(err.code(), Some(ErrorCode::PERMISSION_DENIED), "{err:?}");
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

/// `pem` (an unencrypted PKCS#8 key, as rcgen writes it) encrypted under `password` as
/// `openssl pkcs8 -topk8` does by default (PBES2: PBKDF2-HMAC-SHA256, AES-256-CBC).
fn encrypt_key(pem: &str, password: &str) -> String {
    let (_, doc) = pkcs8::SecretDocument::from_pem(pem).unwrap();
    let info = pkcs8::PrivateKeyInfo::try_from(doc.as_bytes()).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7; 16], &[9; 16]).unwrap();
    let encrypted = info.encrypt_with_params(params, password).unwrap();
    let pem = encrypted
        .to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
        .unwrap();
    assert!(pem.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----"));
    pem.to_string()
}

#[test]
fn an_encrypted_client_key_works_with_its_password() {
    let Some(c) = cluster() else { return };
    let k = key("encrypted");
    let tls = TlsConfig::new()
        .certificate_pem(c.pki.client.0.clone())
        .key_pem(encrypt_key(&c.pki.client.1, "s3cret"))
        .ca_pem(c.pki.ca.clone())
        .password("s3cret");
    let db = fdb_driver_mio::Database::from_cluster_file_with_tls(c.cluster_file(), 9, tls)
        .expect("the key decrypts");
    db.run(|tx| {
        tx.set(&k, b"encrypted key");
        Ok(())
    })
    .expect("a write with the decrypted key commits");
    let v = db.run(|tx| tx.get(&k)).expect("the read completes");
    assert_eq!(v.as_deref(), Some(&b"encrypted key"[..]));
}

/// No fdbserver needed: an encrypted key without its password, or with another, is refused
/// when the database opens, with the reason.
#[test]
fn an_encrypted_key_without_its_password_is_refused_at_open() {
    let cf = ClusterFile::parse("a:b@127.0.0.1:1:tls").unwrap();
    let p = pki();
    let encrypted = encrypt_key(&p.client.1, "right");
    let base = TlsConfig::new()
        .certificate_pem(p.client.0.clone())
        .key_pem(encrypted)
        .ca_pem(p.ca.clone());
    for (tls, why) in [
        (base.clone(), "no password"),
        (base.clone().password("wrong"), "decrypt"),
    ] {
        match fdb_driver_mio::Database::from_cluster_file_with_tls(cf.clone(), 1, tls) {
            Err(Error::Tls(TlsError::EncryptedKey(e))) => assert!(e.contains(why), "{e}"),
            other => panic!(
                "expected an encrypted-key error ({why}), got {:?}",
                other.err()
            ),
        }
    }
    // The right password opens it (nothing is connected yet).
    fdb_driver_mio::Database::from_cluster_file_with_tls(cf, 1, base.password("right"))
        .expect("the right password decrypts the key");
}

/// No fdbserver needed: keys encrypted by OpenSSL itself (what libfdb_c reads) — its default
/// `pkcs8 -topk8` form, AES-128 and scrypt — open with their password. Skipped with a notice
/// where the `openssl` command is missing.
#[test]
fn keys_encrypted_by_openssl_open_with_their_password() {
    let cf = ClusterFile::parse("a:b@127.0.0.1:1:tls").unwrap();
    let p = pki();
    let dir = std::env::temp_dir().join(format!("tls-openssl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("key.pem");
    std::fs::write(&plain, &p.client.1).unwrap();
    for (name, extra) in [
        ("default", &[][..]),
        ("aes128", &["-v2", "aes-128-cbc"][..]),
        ("scrypt", &["-scrypt"][..]),
    ] {
        let out = dir.join(format!("{name}.pem"));
        let run = Command::new("openssl")
            .args(["pkcs8", "-topk8", "-passout", "pass:pw"])
            .args(extra)
            .arg("-in")
            .arg(&plain)
            .arg("-out")
            .arg(&out)
            .status();
        match run {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("openssl pkcs8 {name}: {s}"),
            Err(e) => {
                println!("real_tls: no openssl command ({e}); skipping the OpenSSL key check");
                break;
            }
        }
        let tls = TlsConfig::new()
            .certificate_pem(p.client.0.clone())
            .key_file(&out)
            .ca_pem(p.ca.clone());
        fdb_driver_mio::Database::from_cluster_file_with_tls(
            cf.clone(),
            1,
            tls.clone().password("pw"),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(matches!(
            fdb_driver_mio::Database::from_cluster_file_with_tls(cf.clone(), 1, tls.password("no")),
            Err(Error::Tls(TlsError::EncryptedKey(_)))
        ));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The id a tenant got, read from the tenant name index (`\xff/tenant/nameIndex/`).
fn tenant_id(db: &fdb_driver_mio::Database, name: &[u8]) -> i64 {
    let key = [
        &b"\xff/tenant/nameIndex/"[..],
        &fdb_protocol::tuple::pack(&(name.to_vec(),)),
    ]
    .concat();
    let v = db
        .run(|tx| {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            tx.get(&key)
        })
        .expect("the name index reads")
        .expect("the tenant exists");
    fdb_protocol::tuple::unpack::<(i64,)>(&v).unwrap().0
}

#[test]
fn an_untrusted_client_reaches_its_tenant_with_a_token() {
    let Some(c) = cluster() else { return };
    // A trusted client (its certificate is the CA's) makes two tenants.
    let trusted = fdb_driver_mio::Database::from_cluster_file_with_tls(
        c.cluster_file(),
        10,
        c.client_tls(&c.pki.ca),
    )
    .unwrap();
    let nonce = std::process::id();
    let (mine, other) = (
        format!("authz-mine-{nonce}").into_bytes(),
        format!("authz-other-{nonce}").into_bytes(),
    );
    for name in [&mine, &other] {
        fdb_driver_mio::tenant_management::create_tenant(&trusted, name).expect("created");
    }
    let (mine_id, other_id) = (tenant_id(&trusted, &mine), tenant_id(&trusted, &other));

    // The untrusted client: TLS with the CA only, no certificate of its own.
    let untrusted = fdb_driver_mio::Database::from_cluster_file_with_tls(
        c.cluster_file(),
        11,
        TlsConfig::new().ca_pem(c.pki.ca.clone()),
    )
    .unwrap();
    let tenant = untrusted.open_tenant(&mine);
    let attempt = |tok: Option<String>, write: bool| {
        let tx = tenant.create_transaction();
        tx.set_option(TransactionOption::Timeout(Duration::from_secs(10)))
            .unwrap();
        if let Some(t) = tok {
            tx.set_option(TransactionOption::AuthorizationToken(t))
                .unwrap();
        }
        if write {
            tx.set(b"k", b"with a token");
            tx.commit().map(|_| None)
        } else {
            tx.get(b"k")
        }
    };
    let good = token(&c.token_key, &[mine_id]);
    attempt(Some(good.clone()), true).expect("a write with a token for the tenant commits");
    let v = attempt(Some(good), false).expect("a read with the token");
    assert_eq!(v.as_deref(), Some(&b"with a token"[..]));
    for (tok, why) in [
        (None, "no token"),
        (
            Some(token(&c.token_key, &[other_id])),
            "another tenant's token",
        ),
    ] {
        let err = attempt(tok.clone(), false).expect_err(why);
        assert_eq!(
            err.code(),
            Some(ErrorCode::PERMISSION_DENIED),
            "{why}: {err:?}"
        );
        let err = attempt(tok, true).expect_err(why);
        assert_eq!(
            err.code(),
            Some(ErrorCode::PERMISSION_DENIED),
            "{why}: {err:?}"
        );
    }
}
