//! Network options from the environment, as libfdb_c reads them: `FDB_NETWORK_OPTION_<NAME>`
//! sets option NAME before the first option the program sets, or at set-up. Each case needs
//! a process of its own (the API version is selected once per process, and the environment
//! is read once), so the test runs this binary again with the case's variables and reads what
//! the child printed.

use std::process::Command;

use fdb_compat::api::FdbApiBuilder;
use fdb_compat::options::{NetworkOption, TransactionOption};
use fdb_compat::Database;

/// Set in a child: which case it runs.
const CASE: &str = "FDB_COMPAT_ENV_CASE";
/// Set in a child: a CA file that exists.
const GOOD_CA: &str = "FDB_COMPAT_ENV_GOOD_CA";

/// A self-signed CA certificate, made for this test (its key was thrown away): enough for a
/// TLS database to open, which connects only later.
const CA_PEM: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBmTCCAT+gAwIBAgIUSiWIUTNROB3GOl1Yr82pKwSLpVIwCgYIKoZIzj0EAwIw\n\
ITEfMB0GA1UEAwwWZmRiLWNvbXBhdCBlbnYgdGVzdCBDQTAgFw0yNjEyMDcxNDI3\n\
MDJaGA8yMTI2MTExMzE0MjcwMlowITEfMB0GA1UEAwwWZmRiLWNvbXBhdCBlbnYg\n\
dGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABLOlhmXvcnxztOD4/XZK\n\
+TmgdtnIPx5uapCn5FYoR54xihLXOXmuGApIwQWtzluOBDOmiBP4sRACJDJBotlx\n\
hB2jUzBRMB0GA1UdDgQWBBQQDLqGUpqGoLUPDu5HZxWQCxpzwzAfBgNVHSMEGDAW\n\
gBQQDLqGUpqGoLUPDu5HZxWQCxpzwzAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49\n\
BAMCA0gAMEUCIQDcgqiiWU73YFdZcS6lRukOjjO9CHo4RD0BK5QfvN1mzgIgAYD9\n\
zJJyDGczrx0HN0gUZ06v9dnvReOMm20MCz1tWN0=\n\
-----END CERTIFICATE-----\n";

/// What `case` prints when this binary runs it with `vars` in its environment.
fn run_case(case: &str, vars: &[(&str, &str)]) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CASE, case);
    for (k, v) in vars {
        child.env(k, v);
    }
    // The parent's own options must not leak into the cases.
    for (k, _) in std::env::vars() {
        if k.starts_with(fdb_api::network_env::PREFIX) && !vars.iter().any(|(v, _)| *v == k) {
            child.env_remove(k);
        }
    }
    let out = child.output().expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("outcome: ").map(|(_, o)| o))
        .unwrap_or_else(|| panic!("case {case} printed no outcome: {stdout}"))
        .to_string()
}

fn code(r: Result<impl Sized, fdb_compat::FdbError>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code().to_string(),
    }
}

/// One case, in a child process only.
#[test]
fn child() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    let builder = FdbApiBuilder::default().build().unwrap();
    let outcome = match case.as_str() {
        // The environment is read at set-up.
        "setup" => code(builder.build()),
        // And before the first option the program sets, which then applies after it.
        "option" => code(builder.set_option(NetworkOption::DisableClientStatisticsLogging)),
        // A TLS option from the environment configures the databases opened afterwards: a
        // TLS cluster needs a CA to open, and a CA file that does not exist fails it; the
        // program's own option, set after the environment's, wins.
        "tls" | "tls-own-ca" => {
            let builder = if case == "tls-own-ca" {
                let ca = std::env::var(GOOD_CA).unwrap();
                builder.set_option(NetworkOption::TLSCaPath(ca)).unwrap()
            } else {
                builder
            };
            let _network = match unsafe { builder.boot() } {
                Ok(n) => n,
                Err(e) => {
                    println!("outcome: boot {}", e.code());
                    return;
                }
            };
            let dir = std::env::temp_dir().join(format!("fdb-compat-env-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join("fdb.cluster");
            std::fs::write(&file, "env:case@127.0.0.1:4500:tls\n").unwrap();
            let r = Database::from_path(file.to_str().unwrap());
            let _ = std::fs::remove_dir_all(&dir);
            code(r)
        }
        // A knob from the environment bounds the transactions of a database opened later:
        // `size_limit` above `transaction_size_limit` is refused (by the commit, as it
        // comes; the cluster is never reached). Without the knob the commit times out.
        "knob" => {
            let _network = unsafe { builder.boot() }.unwrap();
            let dir = std::env::temp_dir().join(format!("fdb-compat-knob-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join("fdb.cluster");
            std::fs::write(&file, "env:case@127.0.0.1:1\n").unwrap();
            let db = Database::from_path(file.to_str().unwrap()).unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            let trx = db.create_trx().unwrap();
            trx.set_option(TransactionOption::Timeout(3000)).unwrap();
            match trx.set_option(TransactionOption::SizeLimit(2000)) {
                Ok(()) => code(futures::executor::block_on(trx.commit()).map_err(Into::into)),
                refused => code(refused),
            }
        }
        other => panic!("no case {other}"),
    };
    println!("outcome: {outcome}");
}

#[test]
fn environment_network_options_apply_as_in_libfdb_c() {
    if std::env::var_os(CASE).is_some() {
        return;
    }
    // No variable, or one naming no network option: nothing to read.
    assert_eq!(run_case("setup", &[]), "ok");
    assert_eq!(
        run_case("setup", &[("FDB_NETWORK_OPTION_NO_SUCH_OPTION", "1")]),
        "ok"
    );
    // Options that hold here are taken, several values too.
    let accepted = [
        ("FDB_NETWORK_OPTION_DISABLE_CLIENT_STATISTICS_LOGGING", ""),
        ("FDB_NETWORK_OPTION_DISABLE_CLIENT_BYPASS", ""),
        ("FDB_NETWORK_OPTION_EXTERNAL_CLIENT_DIRECTORY", "/a:/b\\:c"),
        ("FDB_NETWORK_OPTION_TRACE_LOG_GROUP", "env_group"),
        ("FDB_NETWORK_OPTION_TRACE_FORMAT", "json"),
    ];
    assert_eq!(run_case("setup", &accepted), "ok");
    assert_eq!(run_case("option", &accepted), "ok");
    // One this client refuses as an option (2108 when the program sets it) fails the
    // reading with environment_variable_network_option_failed, at set-up or at the first
    // option; so does a value libfdb_c cannot split.
    let refused = [("FDB_NETWORK_OPTION_BUGGIFY_ENABLE", "")];
    assert_eq!(run_case("setup", &refused), "2022");
    assert_eq!(run_case("option", &refused), "2022");
    let bad_escape = [("FDB_NETWORK_OPTION_EXTERNAL_CLIENT_DIRECTORY", "a\\b")];
    assert_eq!(run_case("setup", &bad_escape), "2022");
    // And so does a value libfdb_c refuses (invalid_option_value when the program sets it).
    let bad_format = [("FDB_NETWORK_OPTION_TRACE_FORMAT", "yaml")];
    assert_eq!(run_case("setup", &bad_format), "2022");
    if !<fdb_driver_mio::MioDriver as fdb_api::driver::Driver>::supports_tls() {
        println!("network_env: the mio driver is built without TLS here; the TLS cases skipped");
        return;
    }
    // TLS: with no CA a TLS cluster does not open (tls_error); the variable naming a CA
    // file lets it open, one naming a file that does not exist fails it, unless the program
    // names a good one itself.
    let dir = std::env::temp_dir().join(format!("fdb-compat-env-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, CA_PEM).unwrap();
    let ca = ca.to_str().unwrap();
    assert_eq!(run_case("tls", &[]), "2107");
    assert_eq!(
        run_case("tls", &[("FDB_NETWORK_OPTION_TLS_CA_PATH", ca)]),
        "ok"
    );
    let missing_ca = [
        ("FDB_NETWORK_OPTION_TLS_CA_PATH", "/nonexistent/ca.pem"),
        (GOOD_CA, ca),
    ];
    assert_eq!(run_case("tls", &missing_ca), "2107");
    assert_eq!(run_case("tls-own-ca", &missing_ca), "ok");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `FDB_NETWORK_OPTION_KNOB`: knobs are taken as libfdb_c takes them, several split at `:`;
/// a name or value it does not recognise is said on standard error and set-up goes on, and
/// only a knob without `=` fails it.
#[test]
fn knobs_from_the_environment() {
    if std::env::var_os(CASE).is_some() {
        return;
    }
    let knobs = [(
        "FDB_NETWORK_OPTION_KNOB",
        "no_such_knob=1:transaction_size_limit=1000:key_size_limit=abc",
    )];
    assert_eq!(run_case("setup", &knobs), "ok");
    assert_eq!(run_case("knob", &knobs), "2006");
    assert_eq!(run_case("knob", &[]), "1031");
    assert_eq!(
        run_case("setup", &[("FDB_NETWORK_OPTION_KNOB", "no_equals_sign")]),
        "2022"
    );
}
