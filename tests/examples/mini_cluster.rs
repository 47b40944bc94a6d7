//! Runs the in-process mini cluster for manual testing: writes its cluster file to the path
//! given (default `mini.cluster`) and serves for the given number of seconds (default 60).

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "mini.cluster".into());
    let secs: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let c = fdb_tests::testkit::MiniCluster::start();
    std::fs::write(&path, c.cluster_string()).expect("write cluster file");
    println!(
        "mini cluster at {}, cluster file {path}, serving {secs} s",
        c.addr()
    );
    std::thread::sleep(std::time::Duration::from_secs(secs));
}
