//! Process CPU time (user + system, all threads, and the system part alone) and voluntary
//! context switches, from `getrusage(RUSAGE_SELF)`.

use std::time::Duration;

/// What the process has used so far, all its threads (those that ended too).
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub cpu: Duration,
    /// The part of `cpu` spent in the kernel on the process's behalf (socket calls, page
    /// faults): what batching saves, where the rest is the client's own code.
    pub kernel: Duration,
    /// Times one of its threads blocked and gave up its core: each is a sleep and a wake-up,
    /// the price of handing work between threads.
    pub switches: u64,
}

pub fn process_usage() -> Usage {
    // SAFETY: getrusage only writes the struct we hand it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Usage::default();
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Usage {
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        kernel: tv(ru.ru_stime),
        switches: ru.ru_nvcsw as u64,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_advances_with_work() {
        let a = super::process_usage().cpu;
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(super::process_usage().cpu > a);
    }

    #[test]
    fn a_sleep_is_a_voluntary_switch() {
        let a = super::process_usage().switches;
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(super::process_usage().switches > a);
    }
}
