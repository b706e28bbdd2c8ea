//! How a connection to the PostgreSQL server is secured. Plain TCP unless
//! the URL asks for TLS with `sslmode=require` (or `verify-ca`,
//! `verify-full`); then TLS (rustls, 1.2 or later) with the server's
//! certificate always verified, name included, against the roots of the
//! PEM file `sslrootcert=PATH` names, else the platform's. (libpq's
//! `require` encrypts without verifying; here it verifies, as `verify-full`
//! does: a replica sends its state to no server it could not authenticate.)
//! `disable`, `allow`, `prefer` or no `sslmode`: plain TCP, for loopback or
//! a network the operator trusts.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::DbError;
use crate::limits::DB_CONNECT_TIMEOUT;

/// Where to connect and how: the driver's configuration and the TLS
/// connector (unused unless the configuration asks for TLS).
#[derive(Clone)]
pub(crate) struct Target {
    /// The driver's configuration, `sslmode` and `sslrootcert` applied.
    pub config: tokio_postgres::Config,
    /// The TLS connector.
    pub tls: MakeRustlsConnect,
}

fn invalid(message: impl Into<String>) -> DbError {
    DbError::Postgres {
        code: None,
        message: message.into(),
    }
}

/// Whether TLS was asked for, and with which roots.
#[derive(Debug, PartialEq, Eq)]
struct Security {
    tls: bool,
    root_file: Option<String>,
}

/// Takes the TLS parameters (`sslmode`, `sslrootcert`) out of the URL's
/// query, which the driver would refuse or read otherwise.
fn split(url: &str) -> Result<(String, Security), DbError> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut kept = Vec::new();
    let mut security = Security {
        tls: false,
        root_file: None,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .map_err(|_| invalid(format!("the database URL's `{key}` is not UTF-8")))?;
        match key {
            "sslmode" => {
                security.tls = match &*value {
                    "disable" | "allow" | "prefer" => false,
                    "require" | "verify-ca" | "verify-full" => true,
                    other => {
                        return Err(invalid(format!(
                            "the database URL's sslmode `{other}` is not one of disable, allow, \
                             prefer, require, verify-ca, verify-full"
                        )));
                    }
                }
            }
            "sslrootcert" => security.root_file = Some(value.into_owned()),
            _ => kept.push(pair),
        }
    }
    if security.root_file.is_some() && !security.tls {
        return Err(invalid(
            "the database URL names `sslrootcert` but does not ask for TLS: add sslmode=require",
        ));
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, security))
}

/// The roots a server's certificate is verified against.
fn client_config(security: &Security) -> Result<rustls::ClientConfig, DbError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("cannot set up TLS: {e}")))?;
    let config = match &security.root_file {
        Some(path) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| invalid(format!("cannot read sslrootcert `{path}`: {e}")))?
                .collect::<Result<_, _>>()
                .map_err(|e| invalid(format!("sslrootcert `{path}` is not PEM: {e}")))?;
            let mut roots = rustls::RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(invalid(format!(
                    "sslrootcert `{path}` holds no usable certificate"
                )));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None if security.tls => {
            use rustls_platform_verifier::BuilderVerifierExt as _;
            builder
                .with_platform_verifier()
                .map_err(|e| invalid(format!("cannot read the platform's roots: {e}")))?
                .with_no_client_auth()
        }
        // Never used: the driver is told not to ask for TLS.
        None => builder
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    };
    Ok(config)
}

/// Where `url` points and how to secure the connection; `application`
/// names the connection on the server (`pg_stat_activity`).
pub(crate) fn target(url: &str, application: &str) -> Result<Target, DbError> {
    let (url, security) = split(url)?;
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| invalid(format!("the database URL is not valid: {e}")))?;
    config.connect_timeout(DB_CONNECT_TIMEOUT);
    config.application_name(application);
    config.ssl_mode(if security.tls {
        SslMode::Require
    } else {
        SslMode::Disable
    });
    Ok(Target {
        config,
        tls: MakeRustlsConnect::new(client_config(&security)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_out_of_the_url() {
        let (url, s) = split("postgres://u:p@h:5432/db").expect("plain");
        assert_eq!(url, "postgres://u:p@h:5432/db");
        assert_eq!(
            s,
            Security {
                tls: false,
                root_file: None
            }
        );
        let (url, s) = split(
            "postgres://u@h/db?connect_timeout=3&sslmode=require&sslrootcert=%2Fetc%2Fca%20x.pem",
        )
        .expect("tls");
        assert_eq!(url, "postgres://u@h/db?connect_timeout=3");
        assert!(s.tls);
        assert_eq!(s.root_file.as_deref(), Some("/etc/ca x.pem"));
        for mode in ["verify-ca", "verify-full"] {
            assert!(
                split(&format!("postgres://h/db?sslmode={mode}"))
                    .expect(mode)
                    .1
                    .tls
            );
        }
        for mode in ["disable", "allow", "prefer"] {
            assert!(
                !split(&format!("postgres://h/db?sslmode={mode}"))
                    .expect(mode)
                    .1
                    .tls
            );
        }
    }

    #[test]
    fn bad_tls_parameters_are_refused_saying_why() {
        let e = split("postgres://h/db?sslmode=sometimes").expect_err("mode");
        assert!(e.to_string().contains("sslmode `sometimes`"), "{e}");
        let e = split("postgres://h/db?sslrootcert=/ca.pem").expect_err("no tls");
        assert!(e.to_string().contains("add sslmode=require"), "{e}");
        let missing = target(
            "postgres://h/db?sslmode=require&sslrootcert=/nonexistent/ca.pem",
            "t",
        )
        .err()
        .expect("missing file");
        assert!(
            missing.to_string().contains("cannot read sslrootcert"),
            "{missing}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").expect("write");
        let e = target(
            &format!(
                "postgres://h/db?sslmode=require&sslrootcert={}",
                junk.display()
            ),
            "t",
        )
        .err()
        .expect("junk");
        assert!(e.to_string().contains("no usable certificate"), "{e}");
    }
}
