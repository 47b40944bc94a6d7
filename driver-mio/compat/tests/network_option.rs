//! A network option libfdb_c has and this client cannot honour is refused with
//! `unsupported_operation`, never ignored; one that holds as it stands is accepted, and a
//! value libfdb_c refuses is `invalid_option_value`. (Its own process: the API version is
//! selected once per process.)

use fdb_compat::api::FdbApiBuilder;
use fdb_compat::options::NetworkOption;

#[test]
fn refused_and_accepted_network_options() {
    let mut builder = FdbApiBuilder::default().build().unwrap();
    // Each of these holds here: what it configures (external clients, deprecated settings,
    // a tracer that is off) does not exist in this client.
    let accepted = [
        NetworkOption::DisableClientStatisticsLogging,
        NetworkOption::CallbacksOnExternalThreads,
        NetworkOption::IgnoreExternalClientFailures,
        NetworkOption::RetainClientLibraryCopies,
        NetworkOption::ClientTmpDir("/tmp".into()),
        NetworkOption::FailIncompatibleClient,
        NetworkOption::ClientThreadsPerVersion(1),
        NetworkOption::LocalAddress("127.0.0.1:4000".into()),
        NetworkOption::ClusterFile("fdb.cluster".into()),
        NetworkOption::TLSPlugin("fdb-libressl-plugin".into()),
        NetworkOption::DistributedClientTracer("none".into()),
        NetworkOption::TLSDisablePlaintextConnection,
    ];
    for option in accepted {
        builder = builder
            .set_option(option.clone())
            .unwrap_or_else(|e| panic!("{option:?}: {}", e.code()));
    }
    // A refusal consumes the builder (foundationdb-rs's signature): one per process.
    let refused = builder.set_option(NetworkOption::BuggifyEnable);
    assert_eq!(refused.err().map(|e| e.code()), Some(2108));
}
