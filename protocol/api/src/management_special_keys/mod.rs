//! The management and configuration special keys (`\xff\xff/management/`,
//! `\xff\xff/configuration/`) beyond the tenant module: the parts libfdb_c 7.3 runs in the
//! client (`fdbclient/SpecialKeySpace.actor.cpp`) and fdbcli drives.
//!
//! Reads: each part's rows are read here from the system keys they stand for and handed to
//! the core, which applies selectors, limits and direction as for any special key; the
//! transaction's own writes into a part show in its reads (`rywGetRange`) unless it has
//! `read_your_writes_disable`.
//!
//! | part | rows |
//! |---|---|
//! | `excluded/`, `failed/`, `excluded_locality/`, `failed_locality/` | `\xff/conf/<part>/...`, empty values |
//! | `options/` | the options this transaction set (`excluded/force`, ...) |
//! | `db_locked` | the lock's UID, as 32 hex digits |
//! | `consistency_check_suspended` | present (empty) when suspended |
//! | `maintenance/<zone>` | the seconds left, `0` for `IgnoreSSFailures` |
//! | `data_distribution/mode`, `rebalance_ignored` | the mode (`-1` unset); present when set |
//! | `in_progress_exclusion/<addr>` | excluded storage servers and logs still in the cluster |
//! | `min_required_commit_version`, `version_epoch` | the version, in decimal |
//! | `auto_coordinators` | the coordinators `coordinators auto` would set, comma-separated |
//! | `\xff\xff/configuration/coordinators/` | `cluster_description` and `processes` (sorted) |
//! | `\xff\xff/configuration/process/class_type/<addr>`, `class_source/` | each worker's class, and where it was set |
//!
//! `auto_coordinators` (fdbcli's `coordinators auto` proposal, `auto_coordinators.rs`) is the
//! current coordinators when they are fine for the redundancy, else a random choice among
//! the workers, one per zone; with too few workers it fails with the retriable "Too few
//! fdbserver machines" message. A coordinator named by host name shows as the address it
//! resolves to, in `processes` marked `(fromHostname)` as libfdb_c's `toString` marks it.
//!
//! Writes (with `special_key_space_enable_writes`) are carried out at commit, before the
//! commit itself, each part in key order as `SpecialKeySpace::commit` runs them, into the
//! same system keys libfdb_c writes. A part that refuses its writes fails the commit with
//! `special_keys_api_failure` and leaves libfdb_c's JSON in `\xff\xff/error_message`; a lock
//! held by another UID fails it with `database_locked`. Excluding servers without
//! `options/excluded/force` first checks, over the status document, that the exclusion leaves
//! enough space (`checkExclusion`); marking servers failed without `options/failed/force` then
//! asks the core's `check_safe_exclusions` (a commit proxy's verdict on the storage teams, and
//! the coordinators' fault tolerance), and an unsafe answer (or a check that failed) refuses
//! the commit with libfdb_c's "It is unsafe" message. As in libfdb_c, a failed locality is
//! checked with no addresses: its processes are not named to the proxies. A set of
//! `\xff\xff/configuration/process/class_type/<addr>` to a class (`default`: the class the
//! process was started with) is fdbcli's `setclass`; a clear there is refused as it is made.
//! A set of `\xff\xff/configuration/coordinators/processes` (and `cluster_description`)
//! changes the coordinators as `changeQuorumChecker` does (`coordinators.rs`): checked
//! against `\xff/coordinators`, the new ones asked to answer within 5 s (the core's
//! `quorum_check`), then `\xff/coordinators` written; the commit then ends as libfdb_c's does
//! (`commit_unknown_result` while the cluster moves, and the retry's "No change" message),
//! and the core's monitor follows the old coordinators' forward. A clear there is refused as
//! it is made. The version keys are refused with `unsupported_operation` when written.
//!
//! The files, each on one concern, import one way (none imports this one): `parts.rs` (the
//! table of parts, the system keys, helpers over keys and writes), `values.rs` (the system
//! values' binary encoding), `address.rs` (process addresses) and `errors.rs` (the JSON
//! error messages) are leaves; `processes.rs` reads the workers and the exclusions in
//! progress; `read.rs` is the read path; `space_check.rs`, `exclusion.rs`, `setclass.rs`,
//! `maintenance.rs` and `coordinators.rs` are the larger parts' commits, `auto_coordinators.rs`
//! the one read that asks the coordinators, which `commit.rs` runs in key order.

mod address;
mod auto_coordinators;
mod commit;
mod coordinators;
mod errors;
mod exclusion;
mod maintenance;
mod parts;
mod processes;
mod read;
mod setclass;
mod space_check;
mod values;

pub(crate) use commit::commit_writes;
pub(crate) use errors::{api_error, api_failure};
