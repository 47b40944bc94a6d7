extern crate std;

use super::*;
use alloc::string::ToString;
use proptest::prelude::*;

fn v4(a: u8, b: u8, c: u8, d: u8, port: u16, tls: bool) -> Coordinator {
    Coordinator::Address(NetworkAddress {
        ip: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        port,
        tls,
    })
}

fn v6(s: &str, port: u16, tls: bool) -> Coordinator {
    Coordinator::Address(NetworkAddress {
        ip: IpAddr::V6(s.parse().unwrap()),
        port,
        tls,
    })
}

fn host(h: &str, port: u16, tls: bool) -> Coordinator {
    Coordinator::Hostname {
        host: h.to_string(),
        port,
        tls,
    }
}

fn ok(s: &str) -> ClusterFile {
    match ClusterFile::parse(s) {
        Ok(cf) => cf,
        Err(e) => panic!("{s:?} should parse, got {e}"),
    }
}

fn err(s: &str) -> ClusterFileError {
    match ClusterFile::parse(s) {
        Ok(cf) => panic!("{s:?} should fail, parsed as {cf:?}"),
        Err(e) => e,
    }
}

/// Asserts that `s` fails to parse with an error of one of the kinds named.
macro_rules! refused {
    ($s:expr, $($kind:ident)|+) => {{
        let s = $s;
        let e = err(s);
        assert!(matches!(e, $(ClusterFileError::$kind { .. })|+), "{s:?}: {e:?}");
    }};
}

/// Parses, checks the canonical output, and checks that the output parses
/// back to the same value.
fn canon(input: &str, expected: &str) -> ClusterFile {
    let cf = ok(input);
    assert_eq!(cf.to_string(), expected, "canonical form of {input:?}");
    assert_eq!(ok(expected), cf);
    cf
}

#[test]
fn simple() {
    let cf = canon("test:test@127.0.0.1:4500", "test:test@127.0.0.1:4500");
    assert_eq!(cf.description, "test");
    assert_eq!(cf.id, "test");
    assert_eq!(cf.cluster_key(), "test:test");
    assert_eq!(cf.coordinators, vec![v4(127, 0, 0, 1, 4500, false)]);
}

#[test]
fn fdb_unit_test_inputs() {
    // The inputs of the unit tests in fdbclient/MonitorLeader.actor.cpp.
    for s in [
        "asdf:2345@1.1.1.1:345",
        "0xxdeadbeef:100100100@1.1.1.1:34534,5.1.5.3:23443",
        "0xxdeadbeef:100100100@[::1]:1234,[::1]:1235",
        "0xxdeadbeef:100100100@[abcd:dcba::1]:1234,[abcd:dcba::abcd:1]:1234",
        "asdf:2345@localhost:1234",
        "0xxdeadbeef:100100100@localhost:34534,host-name:23443",
        "0xxdeadbeef:100100100@localhost:34534,host-name_part1.host-name_part2:1234:tls",
        "TestCluster:0@localhost:1234,host-name:5678",
        "TestCluster:0@host.name:1234,host-name:5678",
    ] {
        canon(s, s);
        let commented = format!("#start of comment\n{s}\n# asdfasdf ##");
        canon(&commented, s);
    }
    refused!("asdf:2345@1.1.1.1:345,1.1.1.1:345", DuplicateCoordinator);
    refused!(
        "asdf:2345@localhost:1234,localhost:1234",
        DuplicateCoordinator
    );
}

#[test]
fn multiple_and_tls() {
    let cf = canon(
        "db:abc123@10.0.0.1:4500:tls,10.0.0.2:4500:tls,10.0.0.3:4501",
        "db:abc123@10.0.0.1:4500:tls,10.0.0.2:4500:tls,10.0.0.3:4501",
    );
    assert_eq!(
        cf.coordinators,
        vec![
            v4(10, 0, 0, 1, 4500, true),
            v4(10, 0, 0, 2, 4500, true),
            v4(10, 0, 0, 3, 4501, false),
        ]
    );
    // The same ip:port with and without TLS is two coordinators.
    let cf = ok("a:b@1.2.3.4:1,1.2.3.4:1:tls");
    assert_eq!(cf.coordinators.len(), 2);
}

#[test]
fn ipv6() {
    let cf = canon("a:b@[::1]:4500", "a:b@[::1]:4500");
    assert_eq!(cf.coordinators, vec![v6("::1", 4500, false)]);
    let cf = canon("a:b@[2001:db8::1]:4500:tls", "a:b@[2001:db8::1]:4500:tls");
    assert_eq!(cf.coordinators, vec![v6("2001:db8::1", 4500, true)]);
    // Written back compressed and in lowercase, like inet_ntop.
    canon(
        "a:b@[2001:0DB8:0000:0000:0000:0000:0000:0001]:1",
        "a:b@[2001:db8::1]:1",
    );
    canon("a:b@[::ffff:1.2.3.4]:1", "a:b@[::ffff:1.2.3.4]:1");
    canon("a:b@[::102:304]:1", "a:b@[::1.2.3.4]:1");
    canon("a:b@[::]:1", "a:b@[::]:1");
    // boost also accepts IPv4 inside brackets, and it becomes IPv4.
    let cf = canon("a:b@[1.2.3.4]:4500", "a:b@1.2.3.4:4500");
    assert_eq!(cf.coordinators, vec![v4(1, 2, 3, 4, 4500, false)]);
    // An IPv6 zone is allowed and dropped.
    let cf = canon("a:b@[fe80::1%eth0]:4500", "a:b@[fe80::1]:4500");
    assert_eq!(cf.coordinators, vec![v6("fe80::1", 4500, false)]);
    // The v4 and v4-mapped v6 forms are different addresses, as in FDB.
    assert_eq!(ok("a:b@[::ffff:1.2.3.4]:1,1.2.3.4:1").coordinators.len(), 2);
    // Duplicates are compared by value, not by text.
    refused!("a:b@[::1]:1,[0:0::1]:1", DuplicateCoordinator);
}

#[test]
fn ipv6_invalid() {
    for s in [
        "a:b@[::1]4500",
        "a:b@[::1]",
        "a:b@[::1]:",
        "a:b@[::1:4500",
        "a:b@::1:4500",
        "a:b@[::g]:4500",
        "a:b@[1.2.3.4%eth0]:1",
        "a:b@[01.2.3.4]:1",
        "a:b@[]:1",
    ] {
        refused!(s, InvalidAddress | InvalidPort);
    }
    // FDB's stoi would read these as 4500 (and drop TLS). We refuse.
    refused!("a:b@[::1]:4500:tl", InvalidPort);
    refused!("a:b@[::1]:4500x", InvalidPort);
    refused!("a:b@[::1]:+4500", InvalidPort);
}

#[test]
fn hostnames() {
    let cf = canon(
        "a:b@fdb1.example.com:4500,fdb-2.example.com:4500:tls",
        "a:b@fdb1.example.com:4500,fdb-2.example.com:4500:tls",
    );
    assert_eq!(
        cf.coordinators,
        vec![
            host("fdb1.example.com", 4500, false),
            host("fdb-2.example.com", 4500, true)
        ]
    );
    // FDB's regular expression also allows a trailing dot, '_', and a
    // leading '-'.
    canon("a:b@host.:1", "a:b@host.:1");
    canon("a:b@_x:1", "a:b@_x:1");
    canon("a:b@-x:1", "a:b@-x:1");
    for (s, name, port) in [
        // Fewer than four digits means hostname, not IPv4.
        ("a:b@1.2.3:4500", "1.2.3", 4500),
        ("a:b@123:4500", "123", 4500),
        // Signs and letters also make FDB's regex say "hostname".
        ("a:b@-1.2.3.4:1", "-1.2.3.4", 1),
        ("a:b@1.2.3.4x:1", "1.2.3.4x", 1),
    ] {
        assert_eq!(ok(s).coordinators, vec![host(name, port, false)], "{s}");
    }
    // Hostnames are compared case-sensitively, as in FDB.
    assert_eq!(ok("a:b@Host:1,host:1").coordinators.len(), 2);
    // Hostname and TLS hostname are different.
    assert_eq!(ok("a:b@h:1,h:1:tls").coordinators.len(), 2);
    // A hostname never equals an IP address.
    assert_eq!(ok("a:b@localhost:1,127.0.0.1:1").coordinators.len(), 2);
    // Leading zeros: FDB keeps "01234" as text, we normalise.
    canon("a:b@h:01234", "a:b@h:1234");
    refused!("a:b@h:1234,h:01234", DuplicateCoordinator);
    // Port 0 is accepted by FDB.
    assert_eq!(ok("a:b@h:0").coordinators, vec![host("h", 0, false)]);
}

#[test]
fn hostnames_invalid() {
    for s in [
        "a:b@.host:1",
        "a:b@ho..st:1",
        "a:b@ho/st:1",
        "a:b@h\u{e9}:1",
        "a:b@host",
        "a:b@host:",
        "a:b@host:tls",
        "a:b@host:1:TLS",
        "a:b@host:1:tls:tls",
        "a:b@:1",
        "a:b@1234:4500",
        "a:b@1.2.3.4.5:4500",
        "a:b@1.2.3.4.:4500",
        "a:b@host@x:1",
    ] {
        refused!(s, InvalidAddress | InvalidPort);
    }
    assert_eq!(
        err("a:b@host:65536"),
        ClusterFileError::InvalidPort {
            text: "65536".to_string()
        }
    );
    ok("a:b@host:65535");
}

#[test]
fn mixed_order_is_canonicalised() {
    // FDB keeps two lists and writes IP addresses first.
    let cf = canon(
        "a:b@h1:1,1.1.1.1:2,h2:3,[::1]:4",
        "a:b@1.1.1.1:2,[::1]:4,h1:1,h2:3",
    );
    assert_eq!(
        cf.coordinators,
        vec![
            v4(1, 1, 1, 1, 2, false),
            v6("::1", 4, false),
            host("h1", 1, false),
            host("h2", 3, false),
        ]
    );
    // A hand-built value in mixed order still prints in FDB order.
    let hand = ClusterFile {
        description: "a".into(),
        id: "b".into(),
        coordinators: vec![host("h", 1, false), v4(1, 2, 3, 4, 5, true)],
    };
    assert_eq!(hand.to_string(), "a:b@1.2.3.4:5:tls,h:1");
}

#[test]
fn comments_and_whitespace() {
    let file = "# DO NOT EDIT!\n# This file is auto-generated, it is not to be edited by hand\n\
                    docker:docker@127.0.0.1:4500\n";
    canon(file, "docker:docker@127.0.0.1:4500");
    // CRLF, tabs and blank lines.
    canon(
        "\r\n\t# comment\r\n\r\n  desc:id @ 1.2.3.4:1 ,\t5.6.7.8:2 \r\n\r\n",
        "desc:id@1.2.3.4:1,5.6.7.8:2",
    );
    // Whitespace inside tokens is removed too.
    canon("te st:i d@1.2. 3.4:45 00", "test:id@1.2.3.4:4500");
    // A '#' in the middle of a line starts a comment; the key may be split.
    canon(
        "desc:# trailing comment\nid@1.2.3.4:1 # another\n",
        "desc:id@1.2.3.4:1",
    );
    // A comment can end with CR alone.
    canon("#x\rdesc:id@1.2.3.4:1", "desc:id@1.2.3.4:1");
    // A comment until end of input swallows everything after '#'.
    assert_eq!(err("desc:id#@1.2.3.4:1"), ClusterFileError::MissingAt);
    // Vertical tab and form feed are not whitespace for FDB.
    refused!("desc:id@1.2.3.4:1\x0b", InvalidPort);
    refused!("de\x0csc:id@1.2.3.4:1", InvalidDescription);
    // Comments may hold bytes that are not UTF-8.
    let bytes = b"# caf\xe9\nd:i@1.2.3.4:1\n";
    assert_eq!(
        ClusterFile::parse_bytes(bytes).unwrap().to_string(),
        "d:i@1.2.3.4:1"
    );
    assert!(matches!(
        ClusterFile::parse_bytes(b"d\xe9:i@1.2.3.4:1"),
        Err(ClusterFileError::InvalidDescription { .. })
    ));
}

#[test]
fn fdb_style_fuzzed_whitespace() {
    // Same idea as FDB's parseConnectionString/fuzz unit test, but with a
    // fixed pattern of insertions so the test is deterministic.
    let base = "0xxdeadbeef:100100100@1.1.1.1:34534,5.1.5.3:23443";
    let junk = ["", " ", "\t", "\n", "\r", "#asdf:!@#$&()<\"' \t\n", "#x\r"];
    for step in 0..junk.len() * 3 {
        let mut s = String::new();
        for (i, ch) in base.chars().enumerate() {
            s.push_str(junk[(i * 7 + step) % junk.len()]);
            s.push(ch);
        }
        canon(&s, base);
    }
}

#[test]
fn key_rules() {
    assert_eq!(err("1.2.3.4:4500"), ClusterFileError::MissingAt);
    assert_eq!(err(""), ClusterFileError::MissingAt);
    assert_eq!(err("# only a comment\n"), ClusterFileError::MissingAt);
    assert_eq!(err("descid@1.2.3.4:1"), ClusterFileError::MissingColon);
    assert_eq!(
        err("my-db:abc@1.2.3.4:1"),
        ClusterFileError::InvalidDescription {
            description: "my-db".into()
        }
    );
    assert_eq!(
        err("d.b:abc@1.2.3.4:1"),
        ClusterFileError::InvalidDescription {
            description: "d.b".into()
        }
    );
    assert_eq!(
        err("db:ab_c@1.2.3.4:1"),
        ClusterFileError::InvalidId { id: "ab_c".into() }
    );
    // Only one ':' is allowed; a second one lands in the id.
    assert_eq!(
        err("a:b:c@1.2.3.4:1"),
        ClusterFileError::InvalidId { id: "b:c".into() }
    );
    refused!("d\u{e9}:i@1.2.3.4:1", InvalidDescription);
    // Underscore only in the description.
    let cf = canon("my_db:Ab9@1.2.3.4:1", "my_db:Ab9@1.2.3.4:1");
    assert_eq!(cf.cluster_key(), "my_db:Ab9");
    // FDB accepts empty description and id.
    let cf = canon(":@1.2.3.4:1", ":@1.2.3.4:1");
    assert_eq!(cf.cluster_key(), ":");
    // The key check comes before the coordinators, as in FDB.
    assert_eq!(err("descid@"), ClusterFileError::MissingColon);
    // '@' in the key is impossible: the first '@' splits.
    refused!("a:b@c@1.2.3.4:1", InvalidAddress);
}

#[test]
fn coordinator_list_rules() {
    assert_eq!(err("a:b@"), ClusterFileError::NoCoordinators);
    assert_eq!(err("a:b@ \n# x\n"), ClusterFileError::NoCoordinators);
    assert_eq!(
        err("a:b@1.2.3.4:1,"),
        ClusterFileError::EmptyCoordinator { index: 1 }
    );
    assert_eq!(
        err("a:b@,1.2.3.4:1"),
        ClusterFileError::EmptyCoordinator { index: 0 }
    );
    assert_eq!(
        err("a:b@1.2.3.4:1,,5.6.7.8:1"),
        ClusterFileError::EmptyCoordinator { index: 1 }
    );
    assert_eq!(
        err("a:b@1.2.3.4:1,5.6.7.8:2,1.2.3.4:1"),
        ClusterFileError::DuplicateCoordinator {
            text: "1.2.3.4:1".into()
        }
    );
    // Same address, different text: still a duplicate.
    refused!("a:b@1.2.3.4:1,001.2.3.4:0001", DuplicateCoordinator);
    // Errors are reported in list order, like FDB.
    refused!("a:b@1.2.3.4:1,1.2.3.4:1,garbage", DuplicateCoordinator);
}

#[test]
fn ipv4_rules() {
    // Leading zeros are decimal (FDB uses %d).
    canon("a:b@010.000.001.002:04500", "a:b@10.0.1.2:4500");
    canon("a:b@0.0.0.0:0", "a:b@0.0.0.0:0");
    canon("a:b@255.255.255.255:65535", "a:b@255.255.255.255:65535");
    // FDB wraps these; we refuse.
    for s in [
        "a:b@256.0.0.1:1",
        "a:b@1.2.3.300:1",
        "a:b@+1.2.3.4:1",
        "a:b@1.2.3:1:tls:x",
        "a:b@1.2.3.4",
        "a:b@1.2..4:1",
        "a:b@1.2.3.4:1(fromHostname)x",
    ] {
        refused!(s, InvalidAddress | InvalidPort);
    }
    for s in [
        "a:b@1.2.3.4:65536",
        "a:b@1.2.3.4:70000",
        "a:b@1.2.3.4:",
        "a:b@1.2.3.4:1:2",
    ] {
        refused!(s, InvalidPort);
    }
    // ":TLS" is not the TLS suffix.
    refused!("a:b@1.2.3.4:1:TLS", InvalidPort);
}

#[test]
fn from_hostname_marker() {
    // FDB writes this marker on resolved addresses. It is accepted and
    // dropped, and FDB's equality ignores it.
    let cf = canon("a:b@1.2.3.4:1:tls(fromHostname)", "a:b@1.2.3.4:1:tls");
    assert_eq!(cf.coordinators, vec![v4(1, 2, 3, 4, 1, true)]);
    refused!(
        "a:b@1.2.3.4:1,1.2.3.4:1(fromHostname)",
        DuplicateCoordinator
    );
    // Not for hostnames, where FDB does not accept it either.
    assert!(err("a:b@host:1(fromHostname)").to_string().contains("host"));
}

#[test]
fn file_size_limit() {
    let mut big = String::from("a:b@1.2.3.4:1\n");
    while big.len() < MAX_CLUSTER_FILE_BYTES {
        big.push('#');
    }
    assert_eq!(big.len(), MAX_CLUSTER_FILE_BYTES);
    assert!(ClusterFile::parse_file_bytes(big.as_bytes()).is_ok());
    big.push('#');
    assert_eq!(
        ClusterFile::parse_file_bytes(big.as_bytes()),
        Err(ClusterFileError::TooLarge {
            len: MAX_CLUSTER_FILE_BYTES + 1
        })
    );
    // Plain parse (connection strings) has no limit.
    assert!(ClusterFile::parse(&big).is_ok());
}

#[test]
fn from_str_and_error_display() {
    let cf: ClusterFile = "a:b@1.2.3.4:1".parse().unwrap();
    assert_eq!(cf.to_string(), "a:b@1.2.3.4:1");
    for e in [
        ClusterFileError::TooLarge { len: 1 },
        ClusterFileError::MissingAt,
        ClusterFileError::MissingColon,
        ClusterFileError::InvalidDescription {
            description: "x".into(),
        },
        ClusterFileError::InvalidId { id: "x".into() },
        ClusterFileError::NoCoordinators,
        ClusterFileError::EmptyCoordinator { index: 0 },
        ClusterFileError::InvalidAddress { text: "x".into() },
        ClusterFileError::InvalidPort { text: "x".into() },
        ClusterFileError::DuplicateCoordinator { text: "x".into() },
    ] {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn search_order() {
    let default = [LOCAL_CLUSTER_FILE, DEFAULT_CLUSTER_FILE_PATH];
    assert_eq!(cluster_file_search_order(None, None), default);
    assert_eq!(cluster_file_search_order(Some(""), None), default);
    assert_eq!(
        cluster_file_search_order(Some("/x/fdb.cluster"), Some("/env")),
        ["/x/fdb.cluster"]
    );
    assert_eq!(cluster_file_search_order(None, Some("/env")), ["/env"]);
    assert_eq!(cluster_file_search_order(Some(""), Some("/env")), ["/env"]);
    // Set but empty: FDB still uses it (and then fails to open it).
    assert_eq!(cluster_file_search_order(None, Some("")), [""]);
    #[cfg(target_os = "linux")]
    assert_eq!(DEFAULT_CLUSTER_FILE_PATH, "/etc/foundationdb/fdb.cluster");
}

// ---- property tests ----

fn arb_hostname() -> impl Strategy<Value = String> {
    (
        prop::collection::vec("[A-Za-z0-9_-]{1,8}", 1..4),
        any::<bool>(),
    )
        .prop_map(|(labels, trailing_dot)| {
            let mut h = labels.join(".");
            if trailing_dot {
                h.push('.');
            }
            h
        })
        .prop_filter("IPv4-looking hosts are not hostnames", |h| {
            !ipv4_like(h.as_bytes())
        })
}

fn arb_coordinator() -> impl Strategy<Value = Coordinator> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>(), any::<bool>()).prop_map(|(o, port, tls)| {
            Coordinator::Address(NetworkAddress {
                ip: IpAddr::V4(Ipv4Addr::from(o)),
                port,
                tls,
            })
        }),
        (any::<[u8; 16]>(), any::<u16>(), any::<bool>()).prop_map(|(o, port, tls)| {
            Coordinator::Address(NetworkAddress {
                ip: IpAddr::V6(Ipv6Addr::from(o)),
                port,
                tls,
            })
        }),
        // Mostly-zero IPv6, to hit the compressed and embedded-IPv4 forms.
        (0usize..8, any::<u16>(), any::<u16>(), any::<bool>()).prop_map(|(pos, seg, port, tls)| {
            let mut s = [0u16; 8];
            s[pos] = seg;
            if pos == 5 {
                s[6] = seg;
            }
            Coordinator::Address(NetworkAddress {
                ip: IpAddr::V6(Ipv6Addr::from(s)),
                port,
                tls,
            })
        }),
        (arb_hostname(), any::<u16>(), any::<bool>())
            .prop_map(|(host, port, tls)| Coordinator::Hostname { host, port, tls }),
    ]
}

fn arb_cluster_file() -> impl Strategy<Value = ClusterFile> {
    (
        "[A-Za-z0-9_]{0,12}",
        "[A-Za-z0-9]{0,12}",
        prop::collection::vec(arb_coordinator(), 1..8),
    )
        .prop_map(|(description, id, coords)| {
            let mut seen = BTreeSet::new();
            let mut addrs = Vec::new();
            let mut hosts = Vec::new();
            for c in coords {
                if seen.insert(c.clone()) {
                    match c {
                        Coordinator::Address(_) => addrs.push(c),
                        Coordinator::Hostname { .. } => hosts.push(c),
                    }
                }
            }
            addrs.extend(hosts);
            ClusterFile {
                description,
                id,
                coordinators: addrs,
            }
        })
}

/// Strings built from the characters the parser cares about, so the
/// random inputs get past the first checks.
fn arb_near_valid() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("a"),
            Just("Z"),
            Just("_"),
            Just("-"),
            Just("0"),
            Just("9"),
            Just("255"),
            Just("65536"),
            Just("."),
            Just(":"),
            Just("@"),
            Just(","),
            Just("["),
            Just("]"),
            Just("%"),
            Just("::"),
            Just(":tls"),
            Just("(fromHostname)"),
            Just("#"),
            Just(" "),
            Just("\n"),
            Just("\r"),
            Just("\u{e9}"),
            Just("1.2.3.4"),
            Just("ffff"),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_on_any_string(s in any::<String>()) {
        let _ = ClusterFile::parse(&s);
    }

    #[test]
    fn never_panics_on_any_bytes(b in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = ClusterFile::parse_bytes(&b);
        let _ = ClusterFile::parse_file_bytes(&b);
    }

    #[test]
    fn near_valid_inputs_are_consistent(s in arb_near_valid()) {
        // Anything that parses must print in a form that parses back to
        // the same value.
        if let Ok(cf) = ClusterFile::parse(&s) {
            let printed = cf.to_string();
            prop_assert_eq!(ClusterFile::parse(&printed), Ok(cf.clone()));
            prop_assert_eq!(cf.to_string(), printed);
        }
    }

    #[test]
    fn display_parse_roundtrip(cf in arb_cluster_file()) {
        let text = cf.to_string();
        let parsed = ClusterFile::parse(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&cf), "text: {}", text);
        prop_assert_eq!(parsed.unwrap().to_string(), text);
        prop_assert_eq!(cf.cluster_key(), format!("{}:{}", cf.description, cf.id));
    }

    #[test]
    fn whitespace_and_comments_are_ignored(
        cf in arb_cluster_file(),
        junk in prop::collection::vec(
            prop_oneof![Just(" "), Just("\t"), Just("\n"), Just("\r\n"), Just("#c@,:\n")],
            0..64,
        ),
        seed in any::<u64>(),
    ) {
        let text = cf.to_string();
        let mut noisy = String::new();
        let mut j = junk.iter().cycle();
        let mut x = seed;
        for ch in text.chars() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if !junk.is_empty() && (x >> 61) == 0 {
                noisy.push_str(j.next().unwrap());
            }
            noisy.push(ch);
        }
        noisy.push_str("\n# trailing comment");
        prop_assert_eq!(ClusterFile::parse(&noisy), Ok(cf));
    }
}
