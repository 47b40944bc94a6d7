//! Starting and stopping "the network", as foundationdb-rs does over libfdb_c.
//!
//! libfdb_c has one network thread per process, set up once, run once, stopped once. Here
//! each [`Database`](crate::database::Database) has an event loop of its own (the mio driver's), turned
//! by a dedicated thread the database starts (see `crate::net`); "the network" is the
//! process-wide state those threads obey. [`NetworkRunner::run`] blocks until
//! [`NetworkStop::stop`], then ends every loop thread and returns, so joining the thread that
//! ran it (what [`NetworkAutoStop`] does) means no loop turns any more. The same calls fail
//! the same way as in libfdb_c: a second API version selection panics, a second set-up is
//! `network_already_setup`, a run after a stop `network_cannot_be_restarted`.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use fdb_protocol::error::ErrorCode;

use crate::error::{FdbError, FdbResult};
use crate::net::{phase, set_phase, Phase, NETWORK};
use crate::options::NetworkOption;

/// The API version the enabled `fdb-*` feature stands for (libfdb_c's `FDB_API_VERSION`).
pub(crate) const HEADER_VERSION: i32 = header_version();

const fn header_version() -> i32 {
    // The first feature enabled, newest first; none: 7.3's.
    let by_feature = [
        (cfg!(feature = "fdb-7_4"), 740),
        (cfg!(feature = "fdb-7_3"), 730),
        (cfg!(feature = "fdb-7_1"), 710),
        (cfg!(feature = "fdb-7_0"), 700),
        (cfg!(feature = "fdb-6_3"), 630),
        (cfg!(feature = "fdb-6_2"), 620),
        (cfg!(feature = "fdb-6_1"), 610),
        (cfg!(feature = "fdb-6_0"), 600),
        (cfg!(feature = "fdb-5_2"), 520),
        (cfg!(feature = "fdb-5_1"), 510),
    ];
    let mut i = 0;
    while i < by_feature.len() {
        if by_feature[i].0 {
            return by_feature[i].1;
        }
        i += 1;
    }
    730
}

/// The newest API version this client accepts: 7.4's, as libfdb_c 7.4 reports. The client
/// speaks both 7.3 and 7.4 clusters; 740 selects no behaviour of its own here (the calls
/// and options of 7.4's API that 7.3's lacks are not in foundationdb-rs 0.11 either).
pub fn get_max_api_version() -> i32 {
    740
}

static VERSION_SELECTED: AtomicBool = AtomicBool::new(false);

/// The API version selected (0 before): the trace file's `ClientStart` tells it.
static API_VERSION: AtomicI32 = AtomicI32::new(0);

pub(crate) fn api_version() -> i32 {
    API_VERSION.load(Ordering::Acquire)
}

/// Selects the API version (`fdb_select_api_version`); once per process.
pub struct FdbApiBuilder {
    runtime_version: i32,
}

impl FdbApiBuilder {
    /// The API version to select.
    pub fn runtime_version(&self) -> i32 {
        self.runtime_version
    }

    /// Asks for another API version than the feature's.
    pub fn set_runtime_version(mut self, version: i32) -> Self {
        self.runtime_version = version;
        self
    }

    /// Selects the version. Panics when called twice in a process, as foundationdb-rs does;
    /// a version above [`get_max_api_version`] is `api_version_not_supported` (2203), as in
    /// libfdb_c, and one below 510 `api_version_invalid` (2204).
    pub fn build(self) -> FdbResult<NetworkBuilder> {
        if VERSION_SELECTED
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            panic!("the fdb select api version can only be run once per process");
        }
        if self.runtime_version > get_max_api_version() || HEADER_VERSION > get_max_api_version() {
            return Err(FdbError::from_code(2203));
        }
        if self.runtime_version < 510 || self.runtime_version > HEADER_VERSION {
            return Err(FdbError::from_code(2204));
        }
        API_VERSION.store(self.runtime_version, Ordering::Release);
        Ok(NetworkBuilder { _private: () })
    }
}

impl Default for FdbApiBuilder {
    fn default() -> Self {
        FdbApiBuilder {
            runtime_version: HEADER_VERSION,
        }
    }
}

/// Network options, then the network's set-up.
pub struct NetworkBuilder {
    _private: (),
}

impl NetworkBuilder {
    /// Sets a network option: see the crate's README for what each does here. The first
    /// call applies the `FDB_NETWORK_OPTION_*` environment first, as libfdb_c does.
    pub fn set_option(self, option: NetworkOption) -> FdbResult<Self> {
        crate::net::load_env_options()?;
        crate::net::network_option(&option)?;
        Ok(self)
    }

    /// Sets the network up (`fdb_setup_network`), with the `FDB_NETWORK_OPTION_*`
    /// environment applied if no option was set before.
    pub fn build(self) -> FdbResult<(NetworkRunner, NetworkWait)> {
        crate::net::load_env_options()?;
        {
            let mut phase = NETWORK.phase.lock().unwrap_or_else(|e| e.into_inner());
            if *phase != Phase::Unset {
                return Err(FdbError::of(ErrorCode::NETWORK_ALREADY_SETUP));
            }
            *phase = Phase::Setup;
        }
        crate::trace::network_set_up();
        let cond = Arc::new((Mutex::new(false), Condvar::new()));
        Ok((NetworkRunner { cond: cond.clone() }, NetworkWait { cond }))
    }

    /// Sets the network up and runs it on a thread of its own until the returned guard drops.
    ///
    /// # Safety
    /// Kept `unsafe` for foundationdb-rs's signature; nothing here is.
    #[allow(unsafe_code)]
    pub unsafe fn boot(self) -> FdbResult<NetworkAutoStop> {
        let (runner, wait) = self.build()?;
        let handle = thread::Builder::new()
            .name("fdb-compat-network".into())
            .spawn(move || {
                // SAFETY: nothing unsafe.
                unsafe { runner.run() }.expect("failed to run network thread");
            })
            .map_err(|_| FdbError::of(ErrorCode::INTERNAL_ERROR))?;
        let network = wait.wait();
        Ok(NetworkAutoStop {
            network: Some(network),
            handle: Some(handle),
        })
    }
}

/// Runs the network on the calling thread (`fdb_run_network`).
pub struct NetworkRunner {
    cond: Arc<(Mutex<bool>, Condvar)>,
}

impl NetworkRunner {
    /// Blocks until the network is stopped, then ends and joins every database's loop thread.
    ///
    /// # Safety
    /// Kept `unsafe` for foundationdb-rs's signature; nothing here is.
    #[allow(unsafe_code)]
    pub unsafe fn run(self) -> FdbResult<()> {
        {
            let mut phase = NETWORK.phase.lock().unwrap_or_else(|e| e.into_inner());
            match *phase {
                Phase::Setup => *phase = Phase::Running,
                Phase::Stopped => return Err(FdbError::of(ErrorCode::NETWORK_CANNOT_BE_RESTARTED)),
                _ => return Err(FdbError::of(ErrorCode::NETWORK_ALREADY_SETUP)),
            }
        }
        {
            let (lock, cvar) = &*self.cond;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cvar.notify_all();
        }
        let mut phase = NETWORK.phase.lock().unwrap_or_else(|e| e.into_inner());
        while *phase != Phase::Stopped {
            phase = NETWORK
                .changed
                .wait(phase)
                .unwrap_or_else(|e| e.into_inner());
        }
        drop(phase);
        crate::net::end_all_loops();
        Ok(())
    }
}

/// Waits for the network to run.
pub struct NetworkWait {
    cond: Arc<(Mutex<bool>, Condvar)>,
}

impl NetworkWait {
    /// Blocks until [`NetworkRunner::run`] has started.
    pub fn wait(self) -> NetworkStop {
        let (lock, cvar) = &*self.cond;
        let mut started = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !*started {
            started = cvar.wait(started).unwrap_or_else(|e| e.into_inner());
        }
        NetworkStop { _private: () }
    }
}

/// Stops the network (`fdb_stop_network`).
pub struct NetworkStop {
    _private: (),
}

impl NetworkStop {
    /// Stops it: `run` returns, every loop ends, and calls made afterwards fail with
    /// `operation_cancelled`.
    pub fn stop(self) -> FdbResult<()> {
        stop_network()
    }
}

pub(crate) fn stop_network() -> FdbResult<()> {
    match phase() {
        Phase::Unset => Err(FdbError::of(ErrorCode::NETWORK_NOT_SETUP)),
        _ => {
            set_phase(Phase::Stopped);
            crate::trace::network_stopped();
            Ok(())
        }
    }
}

/// Stops the network and joins its thread when dropped (what [`crate::boot`] returns).
pub struct NetworkAutoStop {
    network: Option<NetworkStop>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Drop for NetworkAutoStop {
    fn drop(&mut self) {
        if let Some(network) = self.network.take() {
            if let Err(err) = network.stop() {
                eprintln!("failed to stop network: {err}");
                std::process::abort();
            }
        }
        if let Some(handle) = self.handle.take() {
            handle.join().expect("failed to join fdb thread");
        }
    }
}
