//! A network option libfdb_c has and this client cannot honour is refused with
//! `unsupported_operation`, never ignored; one that holds as it stands is accepted. (Its
//! own process: the API version is selected once per process.)

use fdb_compat::api::FdbApiBuilder;
use fdb_compat::options::NetworkOption;

#[test]
fn refused_and_accepted_network_options() {
    let builder = FdbApiBuilder::default().build().unwrap();
    let builder = builder
        .set_option(NetworkOption::DisableClientStatisticsLogging)
        .expect("nothing logs client statistics here");
    let refused = builder.set_option(NetworkOption::BuggifyEnable);
    assert_eq!(refused.err().map(|e| e.code()), Some(2108));
}
