//! TLS as libfdb_c configures it: a certificate chain, its private key, a CA bundle and the
//! verify-peers rules, each from an explicit setting (libfdb_c's `TLS_*` network options),
//! else from those options set by the environment (`FDB_NETWORK_OPTION_TLS_*`, which libfdb_c
//! applies before the program's own), else from the `FDB_TLS_*` environment variables, else
//! (certificate and key) from the default files in `/etc/foundationdb`
//! (`flow/TLSConfig.actor.cpp`).
//!
//! The core knows only *which* addresses are TLS (`:tls`); the drivers wrap those sockets in
//! TLS with the [`Tls`] the engine hands them, and the engine asks them to connect to no
//! other address once plaintext connections are off (FDB 7.4's
//! `TLS_disable_plaintext_connection`). What is read here is
//! plain data; turning it into a rustls client configuration needs the `tls` feature.

mod verify_peers;

#[cfg(feature = "tls")]
mod client;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::network_env;

pub use verify_peers::VerifyPeers;

#[cfg(feature = "tls")]
pub use client::server_name;

/// `platform::getDefaultConfigPath()` on Linux and macOS.
const DEFAULT_CONFIG_DIR: &str = "/etc/foundationdb";

/// Where one PEM item comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PemSource {
    /// Read from this file when the database opens (`TLS_*_path`).
    File(PathBuf),
    /// These bytes (`TLS_*_bytes`).
    Bytes(Vec<u8>),
}

/// Each PEM item has two setters, as libfdb_c has a `_path` and a `_bytes` option for it:
/// written once here for the three items.
macro_rules! pem_setters {
    ($($field:ident: $(#[$file_doc:meta])* $file:ident, $(#[$pem_doc:meta])* $pem:ident;)*) => {
        $(
            $(#[$file_doc])*
            pub fn $file(mut self, path: impl Into<PathBuf>) -> Self {
                self.$field = Some(PemSource::File(path.into()));
                self
            }

            $(#[$pem_doc])*
            pub fn $pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
                self.$field = Some(PemSource::Bytes(pem.into()));
                self
            }
        )*
    };
}

/// The TLS settings of a database, as libfdb_c's `TLS_*` network options. Anything left unset
/// is taken from the `FDB_TLS_*` environment when the database opens, as libfdb_c does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    certificate: Option<PemSource>,
    key: Option<PemSource>,
    ca: Option<PemSource>,
    verify_peers: Option<String>,
    password: Option<String>,
    disable_plaintext: bool,
}

impl TlsConfig {
    /// No explicit settings: everything from the environment (what [`Default`] gives too).
    pub fn new() -> TlsConfig {
        TlsConfig::default()
    }

    pem_setters! {
        certificate:
            /// The certificate chain's file (`TLS_cert_path`; else `FDB_TLS_CERTIFICATE_FILE`).
            certificate_file,
            /// The certificate chain as PEM (`TLS_cert_bytes`).
            certificate_pem;
        key:
            /// The private key's file (`TLS_key_path`; else `FDB_TLS_KEY_FILE`).
            key_file,
            /// The private key as PEM (`TLS_key_bytes`).
            key_pem;
        ca:
            /// The CA bundle's file (`TLS_ca_path`; else `FDB_TLS_CA_FILE`).
            ca_file,
            /// The CA bundle as PEM (`TLS_ca_bytes`).
            ca_pem;
    }

    /// The verify-peers rules (`TLS_verify_peers`; else `FDB_TLS_VERIFY_PEERS`; else
    /// `Check.Valid=1`). See [`VerifyPeers`] for what is supported.
    pub fn verify_peers(mut self, rules: impl Into<String>) -> Self {
        self.verify_peers = Some(rules.into());
        self
    }

    /// The private key's passphrase (`TLS_password`; else `FDB_TLS_PASSWORD`).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Connects to TLS addresses only: a connection to any other fails as a refused one
    /// would (`TLS_disable_plaintext_connection`, FDB 7.4).
    /// `FDB_TLS_DISABLE_PLAINTEXT_CONNECTION` (`1` or `0`) overrides it, as in libfdb_c.
    pub fn disable_plaintext_connection(mut self, disable: bool) -> Self {
        self.disable_plaintext = disable;
        self
    }

    /// Whether plaintext connections are off: `FDB_TLS_DISABLE_PLAINTEXT_CONNECTION` when it
    /// reads as libfdb_c reads a bool (`1` or `0`; anything else is ignored with a warning),
    /// else the setting, else the network option from the environment.
    pub fn plaintext_disabled_with(&self, env: &dyn Fn(&str) -> Option<String>) -> bool {
        const VAR: &str = "FDB_TLS_DISABLE_PLAINTEXT_CONNECTION";
        match env(VAR).as_deref() {
            Some("1") => return true,
            Some("0") => return false,
            Some(other) => tracing::warn!(value = other, "ignoring an invalid {VAR}"),
            None => {}
        }
        let option = format!("{}TLS_DISABLE_PLAINTEXT_CONNECTION", network_env::PREFIX);
        self.disable_plaintext || env(&option).is_some()
    }

    /// Fills what is unset from the environment and the default files, and reads the files.
    pub fn load(&self) -> Result<LoadedTls, TlsError> {
        self.load_with(&|name| std::env::var(name).ok())
    }

    /// [`TlsConfig::load`] with the environment given as a lookup (for tests).
    pub fn load_with(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<LoadedTls, TlsError> {
        let default_file = |name: &str| {
            let p = Path::new(DEFAULT_CONFIG_DIR).join(name);
            p.exists().then_some(PemSource::File(p))
        };
        let from_env = |var: &str| env(var).filter(|v| !v.is_empty()).map(PathBuf::from);
        // A network option from the environment: its value's last parameter (each replaces
        // the one before).
        let option = |name: &str| -> Result<Option<String>, TlsError> {
            let var = format!("{}{name}", network_env::PREFIX);
            match env(&var) {
                None => Ok(None),
                Some(v) => network_env::values(&v)
                    .and_then(|vs| vs.into_iter().last())
                    .map(Some)
                    .ok_or(TlsError::Environment(var)),
            }
        };
        // An item's `_path` option has the higher code, so libfdb_c sets it after the
        // `_bytes` one: it wins.
        let pem_option = |path: &str, bytes: &str| -> Result<Option<PemSource>, TlsError> {
            let bytes = option(bytes)?.map(|b| PemSource::Bytes(b.into_bytes()));
            Ok(option(path)?.map(|p| PemSource::File(p.into())).or(bytes))
        };
        let certificate = self
            .certificate
            .clone()
            .or(pem_option("TLS_CERT_PATH", "TLS_CERT_BYTES")?)
            .or_else(|| from_env("FDB_TLS_CERTIFICATE_FILE").map(PemSource::File))
            .or_else(|| default_file("cert.pem"));
        let key = self
            .key
            .clone()
            .or(pem_option("TLS_KEY_PATH", "TLS_KEY_BYTES")?)
            .or_else(|| from_env("FDB_TLS_KEY_FILE").map(PemSource::File))
            .or_else(|| default_file("key.pem"));
        let ca = self
            .ca
            .clone()
            .or(pem_option("TLS_CA_PATH", "TLS_CA_BYTES")?)
            .or_else(|| from_env("FDB_TLS_CA_FILE").map(PemSource::File));
        let rules = self
            .verify_peers
            .clone()
            .or(option("TLS_VERIFY_PEERS")?)
            .or_else(|| env("FDB_TLS_VERIFY_PEERS"))
            .unwrap_or_else(|| "Check.Valid=1".to_string());
        let password = self
            .password
            .clone()
            .or(option("TLS_PASSWORD")?)
            .or_else(|| env("FDB_TLS_PASSWORD"))
            .unwrap_or_default();
        Ok(LoadedTls {
            certificate: certificate.map(|s| read(&s)).transpose()?,
            key: key.map(|s| read(&s)).transpose()?,
            ca: ca.map(|s| read(&s)).transpose()?,
            verify_peers: VerifyPeers::parse(&rules)?,
            password,
        })
    }
}

/// `CERT_FILE_MAX_SIZE` (`flow/Knobs.cpp`): a bigger PEM file is refused, not read.
const CERT_FILE_MAX_SIZE: u64 = 5 * 1024 * 1024;

fn read(source: &PemSource) -> Result<Vec<u8>, TlsError> {
    match source {
        PemSource::Bytes(b) => Ok(b.clone()),
        PemSource::File(path) => {
            let failed = |error| TlsError::Read {
                path: path.clone(),
                error,
            };
            let len = std::fs::metadata(path).map_err(failed)?.len();
            if len > CERT_FILE_MAX_SIZE {
                return Err(failed(std::io::Error::other(
                    "larger than CERT_FILE_MAX_SIZE",
                )));
            }
            std::fs::read(path).map_err(failed)
        }
    }
}

/// TLS settings with every file read: what a TLS client is built from.
#[derive(Clone, Debug)]
pub struct LoadedTls {
    /// The certificate chain (PEM), if any.
    pub certificate: Option<Vec<u8>>,
    /// Its private key (PEM), if any.
    pub key: Option<Vec<u8>>,
    /// The CA bundle (PEM), if any.
    pub ca: Option<Vec<u8>>,
    /// How the servers' certificates are checked.
    pub verify_peers: VerifyPeers,
    /// The key's passphrase (empty: none).
    pub password: String,
}

/// What the driver wraps a `:tls` connection with: a ready TLS client, or why there is none
/// (the connection is then refused, never made in plaintext).
#[derive(Clone)]
pub struct Tls {
    inner: Result<TlsClient, Arc<TlsError>>,
    plaintext: bool,
}

/// A ready TLS client configuration (with the `tls` feature, a rustls `ClientConfig`).
#[derive(Clone)]
struct TlsClient {
    #[cfg(feature = "tls")]
    config: Arc<rustls::ClientConfig>,
}

impl Tls {
    /// TLS for a database: `config` completed from the environment and built into a client,
    /// when `driver_supports_tls`. Fails only if `required` (the cluster file names a `:tls`
    /// coordinator); otherwise a failure is kept and given to any TLS connection attempt.
    pub fn prepare(
        config: &TlsConfig,
        driver_supports_tls: bool,
        required: bool,
    ) -> Result<Tls, TlsError> {
        let inner = if driver_supports_tls {
            Self::build(config, required)
        } else {
            Err(TlsError::NotBuilt)
        };
        let tls = match inner {
            Err(e) if required => return Err(e),
            Err(e) if matches!(e, TlsError::NotBuilt) => Tls::unavailable(e),
            Err(e) => {
                tracing::warn!(error = %e, "TLS is not usable; TLS addresses will be refused");
                Tls::unavailable(e)
            }
            Ok(c) => Tls {
                inner: Ok(c),
                plaintext: true,
            },
        };
        let plaintext = !config.plaintext_disabled_with(&|name| std::env::var(name).ok());
        Ok(Tls { plaintext, ..tls })
    }

    /// No TLS: every TLS connection is refused with `why`.
    pub fn unavailable(why: TlsError) -> Tls {
        Tls {
            inner: Err(Arc::new(why)),
            plaintext: true,
        }
    }

    /// Whether a connection to an address that is not TLS may be made (the engine fails
    /// it at once otherwise, without asking the driver to connect).
    pub(crate) fn allows_plaintext(&self) -> bool {
        self.plaintext
    }

    /// Why TLS connections are refused, if they are.
    pub fn error(&self) -> Option<&TlsError> {
        self.inner.as_ref().err().map(|e| &**e)
    }

    #[cfg(feature = "tls")]
    fn build(config: &TlsConfig, required: bool) -> Result<TlsClient, TlsError> {
        let loaded = config.load()?;
        // Without a CA every handshake would fail; say so now when TLS is certainly needed.
        if required && loaded.ca.is_none() && loaded.verify_peers.checks_chain() {
            return Err(TlsError::NoCertificateAuthority);
        }
        Ok(TlsClient {
            config: client::client_config(&loaded)?,
        })
    }

    #[cfg(not(feature = "tls"))]
    fn build(_config: &TlsConfig, _required: bool) -> Result<TlsClient, TlsError> {
        Err(TlsError::NotBuilt)
    }

    /// The rustls client configuration for TLS connections, or why there is none.
    #[cfg(feature = "tls")]
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, Arc<TlsError>> {
        self.inner
            .as_ref()
            .map(|c| c.config.clone())
            .map_err(Arc::clone)
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Ok(_) => f.write_str("Tls(ready)"),
            Err(e) => write!(f, "Tls(unavailable: {e})"),
        }
    }
}

/// Why TLS could not be set up or a TLS connection failed.
#[derive(Debug)]
pub enum TlsError {
    /// The driver was built without its `tls` feature, so `:tls` addresses are refused.
    NotBuilt,
    /// A certificate, key or CA file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// The certificate chain is not PEM certificates.
    Certificate(String),
    /// The private key is missing, malformed, or does not match the certificate.
    Key(String),
    /// The private key is encrypted and cannot be decrypted: no password (`TLS_password`,
    /// `FDB_TLS_PASSWORD`), a wrong one, or a form this client does not read.
    EncryptedKey(String),
    /// The CA bundle is not PEM certificates rustls accepts.
    CertificateAuthority(String),
    /// Servers' certificates must be checked (`Check.Valid=1`) but no CA bundle is set.
    NoCertificateAuthority,
    /// The verify-peers rules are malformed or use what this client does not support.
    VerifyPeers {
        /// The rules as given.
        rules: String,
        /// What is wrong with them.
        why: String,
    },
    /// rustls refused the configuration.
    Config(String),
    /// This `FDB_NETWORK_OPTION_TLS_*` variable's value does not parse: a `\` that is not
    /// before a `\` or a `:` (libfdb_c fails with
    /// `environment_variable_network_option_failed`).
    Environment(String),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::NotBuilt => f.write_str(
                "a TLS address, but the driver was built without its `tls` feature \
                 (refusing to connect in plaintext)",
            ),
            TlsError::Read { path, error } => {
                write!(f, "cannot read TLS file {}: {error}", path.display())
            }
            TlsError::Certificate(e) => write!(f, "bad TLS certificate chain: {e}"),
            TlsError::Key(e) => write!(f, "bad TLS private key: {e}"),
            TlsError::EncryptedKey(e) => write!(f, "encrypted TLS private key: {e}"),
            TlsError::CertificateAuthority(e) => write!(f, "bad TLS CA bundle: {e}"),
            TlsError::NoCertificateAuthority => f.write_str(
                "TLS peers must be verified (Check.Valid=1) but no CA bundle is configured \
                 (FDB_TLS_CA_FILE)",
            ),
            TlsError::VerifyPeers { rules, why } => {
                write!(f, "unsupported TLS verify-peers rules {rules:?}: {why}")
            }
            TlsError::Config(e) => write!(f, "TLS configuration refused: {e}"),
            TlsError::Environment(var) => write!(
                f,
                "cannot read {var}: a `\\` must stand before a `\\` or a `:`"
            ),
        }
    }
}

impl std::error::Error for TlsError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn explicit_settings_win_over_the_environment() {
        let dir = std::env::temp_dir().join(format!("tls-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let from_env = dir.join("env-ca.pem");
        std::fs::write(&from_env, b"env ca").unwrap();
        let vars = [
            ("FDB_TLS_CA_FILE", from_env.to_str().unwrap()),
            ("FDB_TLS_VERIFY_PEERS", "Check.Valid=0"),
            ("FDB_TLS_PASSWORD", "env secret"),
        ];
        let loaded = TlsConfig::new().load_with(&env(&vars)).unwrap();
        assert_eq!(loaded.ca.as_deref(), Some(&b"env ca"[..]));
        assert!(!loaded.verify_peers.checks_chain());
        assert_eq!(loaded.password, "env secret");

        let loaded = TlsConfig::new()
            .ca_pem(b"explicit ca".to_vec())
            .verify_peers("Check.Valid=1")
            .password("mine")
            .load_with(&env(&vars))
            .unwrap();
        assert_eq!(loaded.ca.as_deref(), Some(&b"explicit ca"[..]));
        assert!(loaded.verify_peers.checks_chain());
        assert_eq!(loaded.password, "mine");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plaintext_is_turned_off_as_libfdb_c_7_4_turns_it_off() {
        let off = TlsConfig::new().disable_plaintext_connection(true);
        let on = TlsConfig::new();
        assert!(off.plaintext_disabled_with(&env(&[])));
        assert!(!on.plaintext_disabled_with(&env(&[])));
        // The network option from the environment, whatever its value.
        let option = [("FDB_NETWORK_OPTION_TLS_DISABLE_PLAINTEXT_CONNECTION", "")];
        assert!(on.plaintext_disabled_with(&env(&option)));
        // FDB_TLS_DISABLE_PLAINTEXT_CONNECTION decides when it reads as a bool, either way.
        let var = "FDB_TLS_DISABLE_PLAINTEXT_CONNECTION";
        assert!(on.plaintext_disabled_with(&env(&[(var, "1")])));
        assert!(!off.plaintext_disabled_with(&env(&[(var, "0")])));
        assert!(!on.plaintext_disabled_with(&env(&[option[0], (var, "0")])));
        // Anything else is ignored.
        assert!(off.plaintext_disabled_with(&env(&[(var, "true")])));
        assert!(!on.plaintext_disabled_with(&env(&[(var, "yes")])));
    }

    #[test]
    fn network_options_from_the_environment_come_between() {
        let vars = [
            ("FDB_NETWORK_OPTION_TLS_CA_BYTES", "option ca"),
            ("FDB_TLS_CA_FILE", "/nonexistent/env-ca.pem"),
            (
                "FDB_NETWORK_OPTION_TLS_VERIFY_PEERS",
                "Check.Valid=1:Check.Valid=0",
            ),
            ("FDB_TLS_VERIFY_PEERS", "Check.Valid=1"),
            ("FDB_NETWORK_OPTION_TLS_PASSWORD", r"a\:b"),
        ];
        // Over FDB_TLS_*; the last of several parameters; escapes as libfdb_c reads them.
        let loaded = TlsConfig::new().load_with(&env(&vars)).unwrap();
        assert_eq!(loaded.ca.as_deref(), Some(&b"option ca"[..]));
        assert!(!loaded.verify_peers.checks_chain());
        assert_eq!(loaded.password, "a:b");
        // Under the program's own settings.
        let loaded = TlsConfig::new()
            .ca_pem(b"explicit ca".to_vec())
            .password("mine")
            .load_with(&env(&vars))
            .unwrap();
        assert_eq!(loaded.ca.as_deref(), Some(&b"explicit ca"[..]));
        assert_eq!(loaded.password, "mine");
        // A path option wins over the bytes one, as libfdb_c sets it after.
        let both = [
            ("FDB_NETWORK_OPTION_TLS_CA_BYTES", "option ca"),
            (
                "FDB_NETWORK_OPTION_TLS_CA_PATH",
                "/nonexistent/option-ca.pem",
            ),
        ];
        let err = TlsConfig::new().load_with(&env(&both)).unwrap_err();
        assert!(
            matches!(err, TlsError::Read { ref path, .. } if path == Path::new("/nonexistent/option-ca.pem"))
        );
        // A value libfdb_c cannot split is refused, naming the variable.
        let bad = [("FDB_NETWORK_OPTION_TLS_CERT_PATH", r"a\b")];
        let err = TlsConfig::new().load_with(&env(&bad)).unwrap_err();
        assert!(
            matches!(err, TlsError::Environment(ref v) if v == "FDB_NETWORK_OPTION_TLS_CERT_PATH")
        );
    }

    #[test]
    fn nothing_set_means_fdbs_defaults() {
        let loaded = TlsConfig::new().load_with(&env(&[])).unwrap();
        assert!(loaded.ca.is_none());
        assert!(loaded.verify_peers.checks_chain());
        assert_eq!(loaded.password, "");
    }

    #[test]
    fn a_missing_file_is_a_typed_error() {
        let err = TlsConfig::new()
            .certificate_file("/nonexistent/cert.pem")
            .load_with(&env(&[]))
            .unwrap_err();
        assert!(
            matches!(err, TlsError::Read { ref path, .. } if path == Path::new("/nonexistent/cert.pem"))
        );
        let err = TlsConfig::new()
            .load_with(&env(&[("FDB_TLS_KEY_FILE", "/nonexistent/key.pem")]))
            .unwrap_err();
        assert!(matches!(err, TlsError::Read { .. }));
    }

    #[test]
    fn a_driver_without_tls_refuses_a_tls_cluster_and_serves_a_plain_one() {
        let err = Tls::prepare(&TlsConfig::new(), false, true).unwrap_err();
        assert!(matches!(err, TlsError::NotBuilt));
        let plain = Tls::prepare(&TlsConfig::new(), false, false).unwrap();
        assert!(matches!(plain.error(), Some(TlsError::NotBuilt)));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_tls_cluster_needs_a_ca_unless_peers_go_unchecked() {
        // Only meaningful when the environment does not give a CA itself.
        if std::env::var_os("FDB_TLS_CA_FILE").is_some() {
            return;
        }
        let err = Tls::prepare(&TlsConfig::new(), true, true).unwrap_err();
        assert!(matches!(err, TlsError::NoCertificateAuthority));
        let unchecked = TlsConfig::new().verify_peers("Check.Valid=0");
        assert!(Tls::prepare(&unchecked, true, true)
            .unwrap()
            .error()
            .is_none());
    }

    #[cfg(feature = "tls")]
    #[test]
    fn garbage_pem_is_a_typed_error() {
        let err =
            Tls::prepare(&TlsConfig::new().ca_pem(b"not pem".to_vec()), true, true).unwrap_err();
        assert!(matches!(err, TlsError::CertificateAuthority(_)), "{err}");
        let encrypted =
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let cert = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let cfg = TlsConfig::new()
            .verify_peers("Check.Valid=0")
            .certificate_pem(cert.to_vec())
            .key_pem(encrypted.to_vec());
        let err = Tls::prepare(&cfg, true, true).unwrap_err();
        assert!(matches!(err, TlsError::EncryptedKey(_)), "{err}");
    }
}
