//! Cluster file and connection string parsing with the rules of libfdb_c 7.3.
//!
//! A cluster file holds one connection string, `description:id@coord,coord,...`.
//! It has to be read exactly as FDB reads it: the client sends `description:id`
//! to every coordinator as the cluster key, and a file that FDB rejects must
//! not quietly work here (and the other way round).
//!
//! The rules come from these FDB 7.3 sources:
//! - `fdbclient/MonitorLeader.actor.cpp`: comment and whitespace stripping,
//!   splitting on `@`, key validation, the coordinator loop, duplicate checks,
//!   and `toString()`, the canonical form FDB writes back.
//! - `flow/Hostname.actor.cpp`: the regular expressions that decide whether a
//!   coordinator is a hostname or an IP address.
//! - `flow/network.cpp`: `NetworkAddress::parse` (IPv4, `[IPv6]`, `:tls`).
//! - `flow/include/flow/NetworkAddress.h`, `flow/include/flow/Hostname.h`:
//!   which fields count when duplicates are checked.
//! - `fdbclient/ClusterConnectionFile.actor.cpp`, `flow/Platform.actor.cpp`:
//!   the file size limit and how the cluster file path is chosen.
//!
//! # What FDB accepts that people may not expect (kept here too)
//! - Space, tab, CR and LF are removed *everywhere*, even inside a token, so
//!   `te st:1@...` is description `test`. A `#` starts a comment anywhere on a
//!   line, and the comment runs to the next CR or LF.
//! - The description and the id may be empty (`:@127.0.0.1:4500` is valid).
//! - Port 0 and the address 0.0.0.0 are accepted.
//! - `[1.2.3.4]:4500` is accepted and is the IPv4 address 1.2.3.4.
//! - A host made of digits and dots is an IPv4 address only if it has at least
//!   four digits. So `1.2.3:4500` is the *hostname* `1.2.3`, while `1234:4500`
//!   and `1.2.3.4.5:4500` are rejected.
//! - IPv4 octets and ports may have leading zeros (`010.0.0.1` is 10.0.0.1 and
//!   is read as decimal). Inside brackets, IPv4 has to be strict dotted-quad.
//! - A TLS address and a plain one at the same ip:port are *not* duplicates.
//!   Hostnames are compared case-sensitively. A hostname is never a duplicate
//!   of an IP address.
//! - FDB keeps IP coordinators and hostnames in two lists and writes the IP
//!   addresses first. [`ClusterFile::parse`] stores them in that same order.
//!
//! # Where this parser is stricter than FDB (on purpose)
//! FDB reads IPv4 with `sscanf("%d.%d.%d.%d:%d")`, reads IPv6 ports with
//! `std::stoi`, and stores ports in a `uint16_t` without any range check.
//! This parser does not copy those mistakes:
//! - FDB accepts octets above 255 and silently moves the overflow into the
//!   next octet (`1.2.3.300` becomes 1.2.4.44). It also accepts `+`/`-` signs
//!   and vertical tab or form feed before numbers. All of these are rejected
//!   here with [`ClusterFileError::InvalidAddress`].
//! - FDB accepts ports above 65535 and keeps only the low 16 bits (`70000`
//!   becomes 4464). For hostnames it keeps the port text as it is. All of
//!   these are rejected here with [`ClusterFileError::InvalidPort`].
//! - For `[v6]:port`, FDB ignores anything after the port digits, so
//!   `[::1]:4500:tl` is accepted as port 4500 *without* TLS. Here the port has
//!   to be digits only.
//! - FDB cuts an address at the internal marker `(fromHostname)` and throws
//!   away everything after it. Here the marker is accepted only at the end of
//!   an IP coordinator, and it is dropped. FDB's equality ignores it anyway.
//! - FDB keeps a hostname's port as text, so `h:1234` and `h:01234` are two
//!   different coordinators there. Here both are port 1234, so they count as
//!   duplicates, and `h:01234` is written back as `h:1234`.
//! - An IPv6 zone (`[fe80::1%eth0]:4500`) is accepted and dropped. FDB's
//!   `IPAddress` cannot hold a scope either.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

/// FDB refuses to read a cluster file bigger than this (`MAX_CLUSTER_FILE_BYTES`
/// in `fdbclient/include/fdbclient/CoordinationInterface.h`). It is checked only
/// for files. Connection strings passed in memory have no limit.
pub const MAX_CLUSTER_FILE_BYTES: usize = 60_000;

/// Name of the environment variable that names the cluster file
/// (`CLUSTER_FILE_ENV_VAR_NAME` in `fdbclient/include/fdbclient/MonitorLeader.h`).
pub const CLUSTER_FILE_ENV_VAR: &str = "FDB_CLUSTER_FILE";

/// The cluster file name FDB looks for, relative to the working directory.
/// FDB opens exactly `fdb.cluster`. Its error message shows `./fdb.cluster`.
pub const LOCAL_CLUSTER_FILE: &str = "fdb.cluster";

/// The platform's default cluster file path (`platform::getDefaultConfigPath`
/// in `flow/Platform.actor.cpp`).
#[cfg(target_os = "linux")]
pub const DEFAULT_CLUSTER_FILE_PATH: &str = "/etc/foundationdb/fdb.cluster";
/// The platform's default cluster file path (`platform::getDefaultConfigPath`
/// in `flow/Platform.actor.cpp`).
#[cfg(any(target_os = "macos", target_os = "freebsd"))]
pub const DEFAULT_CLUSTER_FILE_PATH: &str = "/usr/local/etc/foundationdb/fdb.cluster";
/// The usual default cluster file path on Windows. FDB asks Windows at run time
/// for `CSIDL_COMMON_APPDATA` and adds `\foundationdb\fdb.cluster`. A `no_std`
/// crate cannot ask, so the usual value is used.
#[cfg(windows)]
pub const DEFAULT_CLUSTER_FILE_PATH: &str = "C:\\ProgramData\\foundationdb\\fdb.cluster";
/// FDB does not build on other targets (`#error Port me!`), so the Linux path
/// is used.
#[cfg(not(any(
    target_os = "linux",
    target_os = "macos",
    target_os = "freebsd",
    windows
)))]
pub const DEFAULT_CLUSTER_FILE_PATH: &str = "/etc/foundationdb/fdb.cluster";

/// Internal marker that FDB's `NetworkAddress::toString` adds to addresses it
/// resolved from a hostname (`flow/network.cpp`).
const FROM_HOSTNAME_MARKER: &[u8] = b"(fromHostname)";

/// An IP coordinator. It matches FDB's `NetworkAddress` without the private
/// flag, which is always clear for parsed coordinators.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetworkAddress {
    /// The IP address.
    pub ip: IpAddr,
    /// The port.
    pub port: u16,
    /// Set by the `:tls` suffix. FDB counts it in address equality.
    pub tls: bool,
}

/// One coordinator entry from the connection string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Coordinator {
    /// An IP address and port.
    Address(NetworkAddress),
    /// Resolved by DNS at connect time. FDB 7.x supports these
    /// (`flow/Hostname.actor.cpp`).
    Hostname {
        /// The host name (resolved by the driver).
        host: String,
        /// The port.
        port: u16,
        /// `:tls` was given.
        tls: bool,
    },
}

impl Coordinator {
    /// The coordinator is reached over TLS (`:tls`): a driver must wrap its socket in TLS.
    pub fn is_tls(&self) -> bool {
        match self {
            Coordinator::Address(a) => a.tls,
            Coordinator::Hostname { tls, .. } => *tls,
        }
    }
}

/// A parsed cluster file / connection string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterFile {
    /// Only `[A-Za-z0-9_]`, and it may be empty.
    pub description: String,
    /// Only `[A-Za-z0-9]`, and it may be empty.
    pub id: String,
    /// After parsing, IP addresses come first, then hostnames, each group in
    /// file order. This is the order FDB keeps and writes back.
    pub coordinators: Vec<Coordinator>,
}

/// Why a connection string was rejected. FDB reports all of these (except
/// [`ClusterFileError::TooLarge`]) as `connection_string_invalid` (2104).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterFileError {
    /// The file is bigger than [`MAX_CLUSTER_FILE_BYTES`] (FDB: `file_too_large`).
    /// The file is longer than libfdb_c reads.
    TooLarge {
        /// Its length in bytes.
        len: usize,
    },
    /// No `@` between the key and the coordinators.
    MissingAt,
    /// The key (the part before `@`) has no `:` between description and id.
    MissingColon,
    /// The description has a character outside `[A-Za-z0-9_]`.
    /// The description has characters FDB refuses.
    InvalidDescription {
        /// The description.
        description: String,
    },
    /// The id has a character outside `[A-Za-z0-9]`. This includes a second `:`.
    /// The ID has characters FDB refuses.
    InvalidId {
        /// The ID.
        id: String,
    },
    /// Nothing follows the `@`.
    NoCoordinators,
    /// An empty entry, from a leading, trailing or doubled comma.
    /// A coordinator is empty (two commas in a row, say).
    EmptyCoordinator {
        /// Its position in the list.
        index: usize,
    },
    /// The entry is neither a valid hostname nor a valid IP address.
    /// A coordinator is not an address or host name with a port.
    InvalidAddress {
        /// The coordinator as written.
        text: String,
    },
    /// The port is empty, not decimal, or above 65535.
    /// A coordinator's port is not a port number.
    InvalidPort {
        /// The coordinator as written.
        text: String,
    },
    /// The same coordinator appears twice.
    /// A coordinator is listed twice.
    DuplicateCoordinator {
        /// The coordinator as written.
        text: String,
    },
}

impl fmt::Display for ClusterFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len } => write!(
                f,
                "cluster file is {len} bytes, more than the {MAX_CLUSTER_FILE_BYTES} allowed"
            ),
            Self::MissingAt => f.write_str("connection string has no '@' before the coordinators"),
            Self::MissingColon => f.write_str("cluster key has no ':' between description and id"),
            Self::InvalidDescription { description } => write!(
                f,
                "cluster description {description:?} may only contain A-Z, a-z, 0-9 and '_'"
            ),
            Self::InvalidId { id } => {
                write!(f, "cluster id {id:?} may only contain A-Z, a-z and 0-9")
            }
            Self::NoCoordinators => f.write_str("connection string lists no coordinators"),
            Self::EmptyCoordinator { index } => {
                write!(f, "coordinator #{index} is empty (stray comma)")
            }
            Self::InvalidAddress { text } => {
                write!(f, "coordinator {text:?} is not a valid address or hostname")
            }
            Self::InvalidPort { text } => {
                write!(f, "port {text:?} is not a decimal number from 0 to 65535")
            }
            Self::DuplicateCoordinator { text } => {
                write!(f, "coordinator {text:?} is listed more than once")
            }
        }
    }
}

impl core::error::Error for ClusterFileError {}

impl ClusterFile {
    /// Parses a connection string or the text of a cluster file. FDB uses the
    /// same rules for both (`ClusterConnectionString` constructor in
    /// `fdbclient/MonitorLeader.actor.cpp`). There is no size limit; use
    /// [`ClusterFile::parse_file_bytes`] for bytes read from a file.
    pub fn parse(input: &str) -> Result<Self, ClusterFileError> {
        Self::parse_bytes(input.as_bytes())
    }

    /// Like [`ClusterFile::parse`], but for raw bytes. FDB reads the file as
    /// bytes, so comments may contain text that is not UTF-8.
    pub fn parse_bytes(input: &[u8]) -> Result<Self, ClusterFileError> {
        let text = strip_comments_and_whitespace(input);

        let at = find(&text, b'@').ok_or(ClusterFileError::MissingAt)?;
        let (key, addrs) = (&text[..at], &text[at + 1..]);

        // The first ':' splits the key. Any later ':' ends up in the id, and
        // the id check rejects it.
        let colon = find(key, b':').ok_or(ClusterFileError::MissingColon)?;
        let (desc, id) = (&key[..colon], &key[colon + 1..]);
        // FDB uses `isalnum` in the C locale, so only ASCII counts.
        if !desc.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(ClusterFileError::InvalidDescription {
                description: lossy(desc),
            });
        }
        if !id.iter().all(u8::is_ascii_alphanumeric) {
            return Err(ClusterFileError::InvalidId { id: lossy(id) });
        }

        // FDB does not have this check: an empty list fails there on the
        // first (empty) entry. A separate error is easier to understand.
        if addrs.is_empty() {
            return Err(ClusterFileError::NoCoordinators);
        }

        let mut addresses = Vec::new();
        let mut hostnames = Vec::new();
        let mut seen = BTreeSet::new();
        for (index, token) in addrs.split(|&b| b == b',').enumerate() {
            if token.is_empty() {
                return Err(ClusterFileError::EmptyCoordinator { index });
            }
            let coord = parse_coordinator(token)?;
            if !seen.insert(coord.clone()) {
                return Err(ClusterFileError::DuplicateCoordinator { text: lossy(token) });
            }
            match coord {
                Coordinator::Address(_) => addresses.push(coord),
                Coordinator::Hostname { .. } => hostnames.push(coord),
            }
        }
        addresses.append(&mut hostnames);

        Ok(ClusterFile {
            description: ascii_string(desc),
            id: ascii_string(id),
            coordinators: addresses,
        })
    }

    /// Parses the bytes of a cluster file and applies FDB's size limit
    /// (`readFileBytes(filename, MAX_CLUSTER_FILE_BYTES)` in
    /// `fdbclient/ClusterConnectionFile.actor.cpp`).
    pub fn parse_file_bytes(contents: &[u8]) -> Result<Self, ClusterFileError> {
        if contents.len() > MAX_CLUSTER_FILE_BYTES {
            return Err(ClusterFileError::TooLarge {
                len: contents.len(),
            });
        }
        Self::parse_bytes(contents)
    }

    /// The cluster key, `description:id`. It is sent to the coordinators
    /// exactly like this (`ClusterConnectionString::clusterKey`).
    pub fn cluster_key(&self) -> String {
        format!("{}:{}", self.description, self.id)
    }

    /// The text libfdb_c writes when it replaces a cluster file with a connection string it
    /// was forwarded to (`ClusterConnectionFile::persist`, written with `atomicReplace`).
    pub fn file_contents(&self) -> String {
        format!(
            "# DO NOT EDIT!\n# This file is auto-generated, it is not to be edited by hand\n{self}\n"
        )
    }
}

impl FromStr for ClusterFile {
    type Err = ClusterFileError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Writes the connection string the way FDB's `ClusterConnectionString::toString`
/// does: the key, `@`, the IP coordinators, then the hostnames, all joined
/// with commas. FDB writes this line back into cluster files and compares it
/// when it checks whether a file is up to date. A value built by hand with
/// invalid parts gives a string that will not parse.
impl fmt::Display for ClusterFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}@", self.description, self.id)?;
        let addrs = self
            .coordinators
            .iter()
            .filter(|c| matches!(c, Coordinator::Address(_)));
        let hosts = self
            .coordinators
            .iter()
            .filter(|c| matches!(c, Coordinator::Hostname { .. }));
        for (i, c) in addrs.chain(hosts).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Coordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coordinator::Address(a) => write!(f, "{a}"),
            Coordinator::Hostname { host, port, tls } => {
                write!(f, "{host}:{port}")?;
                if *tls {
                    f.write_str(":tls")?;
                }
                Ok(())
            }
        }
    }
}

/// Writes the address the way FDB does (`formatIpPort` plus `:tls`). IPv6 text
/// comes from the C library's `inet_ntop`, through boost.
impl fmt::Display for NetworkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(v4) => write!(f, "{v4}:{}", self.port)?,
            IpAddr::V6(v6) => {
                f.write_str("[")?;
                write_ipv6_like_inet_ntop(f, &v6)?;
                write!(f, "]:{}", self.port)?;
            }
        }
        if self.tls {
            f.write_str(":tls")?;
        }
        Ok(())
    }
}

/// Writes IPv6 text the way glibc's `inet_ntop` does. Rust gives the same text
/// except for the old IPv4-compatible form: when the first six groups are zero
/// and the seventh is not, glibc writes `::a.b.c.d` and Rust writes hex.
fn write_ipv6_like_inet_ntop(f: &mut fmt::Formatter<'_>, ip: &Ipv6Addr) -> fmt::Result {
    let seg = ip.segments();
    if seg[..6].iter().all(|&s| s == 0) && seg[6] != 0 {
        let o = ip.octets();
        write!(f, "::{}.{}.{}.{}", o[12], o[13], o[14], o[15])
    } else {
        write!(f, "{ip}")
    }
}

/// Lists the cluster file paths libfdb_c would try, in order
/// (`ClusterConnectionFile::lookupClusterFileName` in
/// `fdbclient/ClusterConnectionFile.actor.cpp`). The caller opens the first one
/// that can be opened for reading. If none can, the error is
/// `no_cluster_file_found` (1515). If the chosen file fails to parse, that
/// error is final and FDB does not try the next path.
///
/// How this differs from a simple "search path":
/// - An explicit path (if not empty) is the *only* candidate. An empty
///   explicit path counts as no path, the same as a null pointer.
/// - If `FDB_CLUSTER_FILE` is set, its value is the only candidate, even when
///   it is empty or the file is missing. FDB never falls back after it.
/// - Only when neither is given: `fdb.cluster` in the working directory, then
///   [`DEFAULT_CLUSTER_FILE_PATH`]. FDB tests `fdb.cluster` by opening it
///   (`fileExists` uses `fopen`), so an unreadable `fdb.cluster` is skipped.
pub fn cluster_file_search_order(
    explicit: Option<&str>,
    env_fdb_cluster_file: Option<&str>,
) -> Vec<String> {
    if let Some(path) = explicit.filter(|p| !p.is_empty()) {
        return vec![String::from(path)];
    }
    if let Some(path) = env_fdb_cluster_file {
        return vec![String::from(path)];
    }
    vec![
        String::from(LOCAL_CLUSTER_FILE),
        String::from(DEFAULT_CLUSTER_FILE_PATH),
    ]
}

/// Removes comments and whitespace like FDB's `trim()` in
/// `fdbclient/MonitorLeader.actor.cpp`. Only space, tab, CR and LF count as
/// whitespace (not vertical tab or form feed). A `#` anywhere starts a comment
/// that runs to the next CR or LF.
fn strip_comments_and_whitespace(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut in_comment = false;
    for &b in input {
        if in_comment {
            in_comment = b != b'\n' && b != b'\r';
            continue;
        }
        match b {
            b'#' => in_comment = true,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => out.push(b),
        }
    }
    out
}

/// Parses one comma-separated entry. Like FDB, it first asks whether the entry
/// is a hostname (`Hostname::isHostname`), and only if not, parses an IP
/// address (`NetworkAddress::parse`).
fn parse_coordinator(token: &[u8]) -> Result<Coordinator, ClusterFileError> {
    if let Some((host, port_text, tls)) = split_hostname(token) {
        let port = parse_port(port_text).ok_or_else(|| ClusterFileError::InvalidPort {
            text: lossy(port_text),
        })?;
        return Ok(Coordinator::Hostname {
            host: ascii_string(host),
            port,
            tls,
        });
    }
    parse_network_address(token).map(Coordinator::Address)
}

/// Does the same job as the two regular expressions in
/// `flow/Hostname.actor.cpp`, in linear time:
/// `^([\w\-]+\.?)+:([\d]+){1,}(:tls)?$` must match, and the IPv4 pattern
/// `^([\d]{1,3}\.?){4,}:([\d]+){1,}(:tls)?$` must not.
/// Returns `(host, port digits, tls)`.
fn split_hostname(token: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    let colon = find(token, b':')?;
    let (host, rest) = (&token[..colon], &token[colon + 1..]);
    let (digits, tls) = match rest.strip_suffix(b":tls") {
        Some(d) => (d, true),
        None => (rest, false),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if !hostname_like(host) || ipv4_like(host) {
        return None;
    }
    Some((host, digits, tls))
}

/// Matches `([\w\-]+\.?)+`: only `[A-Za-z0-9_.-]`, not empty, no leading dot,
/// no two dots in a row. A trailing dot is allowed.
fn hostname_like(host: &[u8]) -> bool {
    let mut prev_dot = true; // so a leading dot is rejected
    for &b in host {
        if b == b'.' {
            if prev_dot {
                return false;
            }
            prev_dot = true;
        } else if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            prev_dot = false;
        } else {
            return false;
        }
    }
    !host.is_empty()
}

/// Matches `([\d]{1,3}\.?){4,}`: only digits and dots, each dot right after a
/// digit, and at least four digits in total (each digit can be its own group).
fn ipv4_like(host: &[u8]) -> bool {
    let mut digits = 0usize;
    let mut prev_digit = false;
    for &b in host {
        if b.is_ascii_digit() {
            digits += 1;
            prev_digit = true;
        } else if b == b'.' && prev_digit {
            prev_digit = false;
        } else {
            return false;
        }
    }
    digits >= 4
}

/// Parses an IP coordinator, following `NetworkAddress::parse` in
/// `flow/network.cpp`. The module docs list where this is stricter.
fn parse_network_address(token: &[u8]) -> Result<NetworkAddress, ClusterFileError> {
    let invalid = || ClusterFileError::InvalidAddress { text: lossy(token) };

    let mut rest = token.strip_suffix(FROM_HOSTNAME_MARKER).unwrap_or(token);
    let mut tls = false;
    if rest.len() > 4 {
        if let Some(r) = rest.strip_suffix(b":tls") {
            rest = r;
            tls = true;
        }
    }

    let (ip, port_text) = if let Some(inner) = rest.strip_prefix(b"[") {
        let close = find(inner, b']').ok_or_else(invalid)?;
        if inner.get(close + 1) != Some(&b':') {
            return Err(invalid());
        }
        let ip = parse_bracketed_ip(&inner[..close]).ok_or_else(invalid)?;
        (ip, &inner[close + 2..])
    } else {
        let colon = find(rest, b':').ok_or_else(invalid)?;
        let mut fields = rest[..colon].split(|&b| b == b'.');
        let mut octets = [0u8; 4];
        for octet in &mut octets {
            *octet = fields.next().and_then(parse_octet).ok_or_else(invalid)?;
        }
        if fields.next().is_some() {
            return Err(invalid());
        }
        (IpAddr::V4(Ipv4Addr::from(octets)), &rest[colon + 1..])
    };

    let port = parse_port(port_text).ok_or_else(|| ClusterFileError::InvalidPort {
        text: lossy(port_text),
    })?;
    Ok(NetworkAddress { ip, port, tls })
}

/// Parses the text between `[` and `]`. FDB hands it to boost's
/// `address::from_string`. That tries IPv6 first (a `%zone` suffix is allowed
/// and dropped), then strict dotted-quad IPv4.
fn parse_bracketed_ip(text: &[u8]) -> Option<IpAddr> {
    if let Some(pct) = find(text, b'%') {
        let s = core::str::from_utf8(&text[..pct]).ok()?;
        return Ipv6Addr::from_str(s).ok().map(IpAddr::V6);
    }
    let s = core::str::from_utf8(text).ok()?;
    if let Ok(v6) = Ipv6Addr::from_str(s) {
        return Some(IpAddr::V6(v6));
    }
    Ipv4Addr::from_str(s).ok().map(IpAddr::V4)
}

/// Decimal digits only, with any number of leading zeros, value 0..=65535.
fn parse_port(text: &[u8]) -> Option<u16> {
    parse_decimal(text, u32::from(u16::MAX)).and_then(|v| u16::try_from(v).ok())
}

/// One IPv4 octet: decimal digits only, value 0..=255. Leading zeros are read
/// as decimal, like FDB's `%d`.
fn parse_octet(text: &[u8]) -> Option<u8> {
    parse_decimal(text, u32::from(u8::MAX)).and_then(|v| u8::try_from(v).ok())
}

/// A non-empty run of ASCII digits whose value is at most `max`. It stops
/// early if the value gets too big, so it cannot overflow.
fn parse_decimal(text: &[u8], max: u32) -> Option<u32> {
    if text.is_empty() {
        return None;
    }
    let mut value: u32 = 0;
    for &b in text {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u32::from(b - b'0');
        if value > max {
            return None;
        }
    }
    Some(value)
}

fn find(haystack: &[u8], needle: u8) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

/// Builds a `String` from bytes that are already known to be ASCII.
fn ascii_string(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests;
