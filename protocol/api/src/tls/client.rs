//! The rustls client for `:tls` connections, configured as libfdb_c configures OpenSSL
//! (`ConfigureSSLContext`): our certificate chain and key for the server to check, the CA
//! bundle to check the server's chain against, and no host-name check — FDB addresses are IPs
//! and FDB verifies only the chain (plus the verify-peers rules), never a name.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use super::{LoadedTls, TlsError};

/// Builds the client configuration every TLS connection of a database shares.
pub(super) fn client_config(loaded: &LoadedTls) -> Result<Arc<ClientConfig>, TlsError> {
    // ring builds with a C compiler alone (aws-lc-rs also needs cmake); rustls 0.23.48
    // deprecates its provider for lacking post-quantum key exchange, which FDB's own TLS
    // (OpenSSL, classical groups) does not offer either.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    if let Some(ca) = &loaded.ca {
        for cert in CertificateDer::pem_slice_iter(ca) {
            let cert = cert.map_err(|e| TlsError::CertificateAuthority(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| TlsError::CertificateAuthority(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(TlsError::CertificateAuthority(
                "no certificate in the CA bundle".into(),
            ));
        }
    }
    let verifier = Arc::new(ChainVerifier {
        roots: Arc::new(roots),
        check_chain: loaded.verify_peers.checks_chain(),
        provider: provider.clone(),
    });
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&loaded.certificate, &loaded.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => return Err(TlsError::Key("a certificate but no private key".into())),
        (None, Some(_)) => return Err(TlsError::Key("a private key but no certificate".into())),
        (Some(chain), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(chain)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsError::Certificate(e.to_string()))?;
            if chain.is_empty() {
                return Err(TlsError::Certificate("no certificate in the file".into()));
            }
            builder
                .with_client_auth_cert(chain, private_key(key, &loaded.password)?)
                .map_err(|e| TlsError::Key(e.to_string()))?
        }
    };
    Ok(Arc::new(config))
}

/// The key from its PEM file. An encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`, what
/// `openssl pkcs8 -topk8` and `genpkey -aes256` write) is decrypted with `password`, as
/// libfdb_c hands `TLS_password` to OpenSSL's PEM reader.
fn private_key(pem: &[u8], password: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    if let Some(section) = pem_section(pem, "ENCRYPTED PRIVATE KEY") {
        return decrypt_pkcs8(section, password);
    }
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(key) => Ok(key),
        // OpenSSL's legacy form: a traditional key with Proc-Type/DEK-Info headers.
        Err(_) if contains(pem, b"Proc-Type: 4,ENCRYPTED") => Err(TlsError::EncryptedKey(
            "legacy OpenSSL PEM encryption (Proc-Type: 4,ENCRYPTED) is not supported; \
             convert the key to encrypted PKCS#8 (openssl pkcs8 -topk8)"
                .into(),
        )),
        Err(e) => Err(TlsError::Key(e.to_string())),
    }
}

fn decrypt_pkcs8(section: &[u8], password: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    if password.is_empty() {
        return Err(TlsError::EncryptedKey(
            "the key is encrypted and no password is set (TLS_password, FDB_TLS_PASSWORD)".into(),
        ));
    }
    let text = std::str::from_utf8(section).map_err(|e| TlsError::Key(e.to_string()))?;
    let (_, doc) = pkcs8::Document::from_pem(text).map_err(|e| TlsError::Key(e.to_string()))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes())
        .map_err(|e| TlsError::Key(e.to_string()))?;
    let plain = info
        .decrypt(password)
        .map_err(|e| TlsError::EncryptedKey(format!("cannot decrypt it with the password: {e}")))?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
}

/// The first `-----BEGIN label-----` … `-----END label-----` block of `pem`, whole.
fn pem_section<'a>(pem: &'a [u8], label: &str) -> Option<&'a [u8]> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = find(pem, begin.as_bytes())?;
    let stop = start + find(&pem[start..], end.as_bytes())? + end.len();
    Some(&pem[start..stop])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

/// The server name a TLS connection to `ip` presents: the IP itself (rustls sends no SNI for
/// an IP, as libfdb_c sends none).
pub fn server_name(ip: std::net::IpAddr) -> ServerName<'static> {
    ServerName::IpAddress(ip.into())
}

/// FDB's peer check on the client side: the chain must lead to a CA in the bundle (unless a
/// rule says `Check.Valid=0`); the server's name is not checked.
#[derive(Debug)]
struct ChainVerifier {
    roots: Arc<RootCertStore>,
    check_chain: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.check_chain {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                &self.roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    // rustls's TLS 1.2 and 1.3 checks: two trait methods, each its own rustls function.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
