//! `fdb-bench`: the benchmark harness. See `tests/bench/BENCHMARKS.md`.

mod alloc;
mod arms;
mod bench;
mod cli;
mod cpu;
mod harness;
mod misses;
mod report;
mod server;
mod server_cpu;
mod stats;
mod wire;
mod workload;

#[global_allocator]
static GLOBAL: alloc::CountingAlloc = alloc::CountingAlloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("__serve") {
        server::serve_main(&args[1..]);
    }
    let config = match cli::parse(&args) {
        Ok(cli::Command::Run(c)) => *c,
        Ok(cli::Command::Help) => {
            print!("{}", cli::USAGE);
            return;
        }
        Err(e) => {
            eprintln!("fdb-bench: {e}\n\n{}", cli::USAGE);
            std::process::exit(2);
        }
    };
    let out = config.out.clone();
    let results = match bench::run(config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fdb-bench: {e}");
            std::process::exit(1);
        }
    };
    match report::write_all(&results, &out) {
        Ok(paths) => {
            print!("{}", report::to_markdown(&results));
            println!();
            for p in paths {
                println!("wrote {}", p.display());
            }
        }
        Err(e) => {
            eprintln!("fdb-bench: {e}");
            std::process::exit(1);
        }
    }
}
