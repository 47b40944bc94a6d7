//! The directory layer (`fdb_api::directory`), on the in-process test cluster and (with
//! `FDB_CLUSTER_FILE`) a real fdbserver 7.3: create / open / create_or_open / move / remove /
//! exists / list, layers, partitions, manual prefixes, the high-contention allocator, the
//! errors; and, on the real cluster with the Python binding 7.3.77 installed, the layout
//! shared with `fdb.directory`: directories made by Python read by this client and the
//! reverse (skipped with a notice without either).
//!
//! On the real cluster every directory layer here lives under the scenario's random prefix
//! (nodes at `prefix + \xfe`, contents under `prefix`), which is cleared afterwards.

use fdb_tests::to_hex as hex;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use fdb_driver_tokio::directory::{
    self, DirectoryError, DirectoryLayer, DirectoryOutput, HighContentionAllocator, Layer,
    ManualPrefix, Snapshot,
};
use fdb_driver_tokio::{Database, Subspace};
use fdb_tests::dual::{self, Target};

const LIMIT: Duration = Duration::from_secs(120);

/// The scenario's directory layer: the default one on the fresh test cluster, one under
/// the scenario's prefix on a real cluster.
fn layer_of(t: &Target, manual: bool) -> DirectoryLayer {
    if t.prefix.is_empty() && !manual {
        return DirectoryLayer::default();
    }
    let mut base = t.prefix.clone();
    if manual {
        base.extend_from_slice(b"manual/");
    }
    let mut nodes = base.clone();
    nodes.push(0xfe);
    DirectoryLayer::new(
        Subspace::from_bytes(nodes),
        Subspace::from_bytes(base),
        manual,
    )
}

/// Runs `f(layer, tx)` in a retry loop.
macro_rules! dir {
    ($db:expr, $layer:expr, |$l:ident, $tx:ident| $body:expr) => {{
        let layer = $layer.clone();
        directory::run($db, move |$tx| {
            let $l = layer.clone();
            async move { $body }
        })
        .await
    }};
}

fn prefix_of(d: &DirectoryOutput) -> Vec<u8> {
    match d {
        DirectoryOutput::Subspace(s) => s.bytes().to_vec(),
        DirectoryOutput::Partition(p) => p.prefix().to_vec(),
    }
}

#[test]
fn create_open_list_exists() {
    dual::run("rust-fdb-directory", LIMIT, |t: Target| async move {
        let (db, on) = (&t.db, t.name);
        let root = layer_of(&t, false);

        // create_or_open makes the missing parents.
        let users = dir!(db, root, |l, tx| l
            .create_or_open(&tx, &["app", "users"], None, None)
            .await)
        .expect("create_or_open");
        assert_eq!(users.path(), ["app", "users"], "{on}");
        assert_eq!(users.layer(), b"", "{on}");
        let prefix = users.key().expect("a plain directory has a key").to_vec();
        assert!(prefix.starts_with(root.content_subspace().bytes()), "{on}");
        assert!(
            dir!(db, root, |l, tx| l.exists(&tx, &["app"]).await).expect("exists"),
            "{on}: the parent was made"
        );
        assert!(
            !dir!(db, root, |l, tx| l.exists(&tx, &["app", "nobody"]).await).expect("exists"),
            "{on}"
        );
        assert!(
            dir!(db, root, |l, tx| l.exists(&tx, &[] as &[&str]).await).expect("exists"),
            "{on}: the root always exists"
        );

        // Opening again, create_or_open again, and through a snapshot: the same prefix.
        let again =
            dir!(db, root, |l, tx| l.open(&tx, &["app", "users"], None).await).expect("open");
        assert_eq!(prefix_of(&again), prefix, "{on}");
        let again = dir!(db, root, |l, tx| l
            .create_or_open(&tx, &["app", "users"], None, None)
            .await)
        .expect("create_or_open of an existing directory");
        assert_eq!(prefix_of(&again), prefix, "{on}");
        let again = dir!(db, root, |l, tx| l
            .open(&Snapshot(&tx), &["app", "users"], None)
            .await)
        .expect("snapshot open");
        assert_eq!(prefix_of(&again), prefix, "{on}");

        // Relative to a directory.
        let app = dir!(db, root, |l, tx| l.open(&tx, &["app"], None).await).expect("open app");
        let via_app = {
            let app = app.clone();
            directory::run(db, move |tx| {
                let app = app.clone();
                async move { app.open(&tx, &["users"], None).await }
            })
            .await
            .expect("open relative")
        };
        assert_eq!(prefix_of(&via_app), prefix, "{on}");

        // More subdirectories: list gives them in name order, each prefix distinct.
        for name in ["zeta", "alpha", "mid"] {
            dir!(db, root, |l, tx| l
                .create(&tx, &["app", name], None, None)
                .await)
            .expect("create");
        }
        let names = dir!(db, root, |l, tx| l.list(&tx, &["app"]).await).expect("list");
        assert_eq!(names, ["alpha", "mid", "users", "zeta"], "{on}");
        let mut prefixes = BTreeSet::new();
        for name in &names {
            let d = dir!(db, root, |l, tx| l
                .open(&tx, &["app", name.as_str()], None)
                .await)
            .expect("open");
            assert!(
                prefixes.insert(prefix_of(&d)),
                "{on}: {name} shares a prefix"
            );
        }
        assert!(
            dir!(db, root, |l, tx| l.list(&tx, &["app", "alpha"]).await)
                .expect("list")
                .is_empty(),
            "{on}"
        );

        // Data in a directory's subspace.
        let sub = users.subspace().expect("subspace").clone();
        let key = sub.pack(&("alice",));
        {
            let key = key.clone();
            db.run(move |tx| {
                let key = key.clone();
                async move {
                    tx.set(&key, b"1");
                    Ok(())
                }
            })
            .await
            .expect("write in the directory");
        }
        assert_eq!(sub.unpack::<(String,)>(&key).expect("unpack").0, "alice");

        // The errors.
        let e = dir!(db, root, |l, tx| l
            .create(&tx, &["app", "users"], None, None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::AlreadyExists)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l
            .open(&tx, &["app", "nobody"], None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::DoesNotExist)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l.list(&tx, &["nobody"]).await);
        assert!(
            matches!(e, Err(DirectoryError::DoesNotExist)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l.open(&tx, &[] as &[&str], None).await);
        assert!(
            matches!(e, Err(DirectoryError::CannotOpenRoot)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l
            .create_or_open(&tx, &[] as &[&str], None, None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::CannotOpenRoot)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l.remove(&tx, &[] as &[&str]).await);
        assert!(
            matches!(e, Err(DirectoryError::CannotRemoveRoot)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l.move_directory(&tx, &["x"]).await);
        assert!(
            matches!(e, Err(DirectoryError::CannotMoveRoot)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l
            .create(&tx, &["manual"], Some(ManualPrefix(b"\x15\x01")), None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::ManualPrefixesNotAllowed)),
            "{on}: {e:?}"
        );
    });
}

#[test]
fn layers_move_remove() {
    dual::run("rust-fdb-directory", LIMIT, |t: Target| async move {
        let (db, on) = (&t.db, t.name);
        let root = layer_of(&t, false);

        // Layers: recorded at creation, checked when asked for.
        let d = dir!(db, root, |l, tx| l
            .create(&tx, &["typed"], None, Some(Layer(b"mylayer")))
            .await)
        .expect("create with a layer");
        assert_eq!(d.layer(), b"mylayer", "{on}");
        let d = dir!(db, root, |l, tx| l.open(&tx, &["typed"], None).await).expect("open");
        assert_eq!(
            d.layer(),
            b"mylayer",
            "{on}: open without a layer accepts any"
        );
        dir!(db, root, |l, tx| l
            .open(&tx, &["typed"], Some(Layer(b"mylayer")))
            .await)
        .expect("open with its layer");
        dir!(db, root, |l, tx| l
            .create_or_open(&tx, &["typed"], None, Some(Layer(b"mylayer")))
            .await)
        .expect("create_or_open with its layer");
        let e = dir!(db, root, |l, tx| l
            .open(&tx, &["typed"], Some(Layer(b"other")))
            .await);
        assert!(
            matches!(e, Err(DirectoryError::IncompatibleLayer)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l
            .create_or_open(&tx, &["typed"], None, Some(Layer(b"other")))
            .await);
        assert!(
            matches!(e, Err(DirectoryError::IncompatibleLayer)),
            "{on}: {e:?}"
        );

        // Move: the prefix and the contents stay, the old path is gone.
        let a = dir!(db, root, |l, tx| l
            .create(&tx, &["a", "b"], None, None)
            .await)
        .expect("create a/b");
        let prefix = prefix_of(&a);
        let key = a.subspace().expect("subspace").pack(&(1,));
        {
            let key = key.clone();
            db.run(move |tx| {
                let key = key.clone();
                async move {
                    tx.set(&key, b"kept");
                    Ok(())
                }
            })
            .await
            .expect("write");
        }
        dir!(db, root, |l, tx| l.create(&tx, &["c"], None, None).await).expect("create c");
        let moved = dir!(db, root, |l, tx| l
            .move_to(&tx, &["a", "b"], &["c", "d"])
            .await)
        .expect("move");
        assert_eq!(moved.path(), ["c", "d"], "{on}");
        assert_eq!(prefix_of(&moved), prefix, "{on}: a move keeps the prefix");
        assert!(
            !dir!(db, root, |l, tx| l.exists(&tx, &["a", "b"]).await).expect("exists"),
            "{on}"
        );
        assert_eq!(
            dir!(db, root, |l, tx| l.list(&tx, &["c"]).await).expect("list"),
            ["d"],
            "{on}"
        );
        let k = key.clone();
        let v = db
            .run(move |tx| {
                let k = k.clone();
                async move { tx.get(&k).await }
            })
            .await
            .expect("read");
        assert_eq!(v.as_deref(), Some(&b"kept"[..]), "{on}");
        // A directory moves itself relative to its layer.
        let back = {
            let moved = moved.clone();
            directory::run(db, move |tx| {
                let moved = moved.clone();
                async move { moved.move_directory(&tx, &["a", "e"]).await }
            })
            .await
            .expect("move_to")
        };
        assert_eq!(back.path(), ["a", "e"], "{on}");
        assert_eq!(prefix_of(&back), prefix, "{on}");

        // Move errors.
        let e = dir!(db, root, |l, tx| l
            .move_to(&tx, &["a"], &["a", "e", "x"])
            .await);
        assert!(
            matches!(e, Err(DirectoryError::MoveIntoSubdirectory)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l.move_to(&tx, &["a", "e"], &["c"]).await);
        assert!(
            matches!(e, Err(DirectoryError::DestinationExists)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l
            .move_to(&tx, &["a", "e"], &["no", "x"])
            .await);
        assert!(
            matches!(e, Err(DirectoryError::ParentDoesNotExist)),
            "{on}: {e:?}"
        );
        let e = dir!(db, root, |l, tx| l.move_to(&tx, &["nobody"], &["x"]).await);
        assert!(
            matches!(e, Err(DirectoryError::DoesNotExist)),
            "{on}: {e:?}"
        );

        // Remove: the directory, its subdirectories and their contents.
        dir!(db, root, |l, tx| l
            .create(&tx, &["a", "e", "sub"], None, None)
            .await)
        .expect("create below");
        dir!(db, root, |l, tx| l.remove(&tx, &["a"]).await).expect("remove");
        for path in [&["a"][..], &["a", "e"], &["a", "e", "sub"]] {
            assert!(
                !dir!(db, root, |l, tx| l.exists(&tx, path).await).expect("exists"),
                "{on}: {path:?}"
            );
        }
        let k = key.clone();
        let v = db
            .run(move |tx| {
                let k = k.clone();
                async move { tx.get(&k).await }
            })
            .await
            .expect("read");
        assert_eq!(v, None, "{on}: the contents went with the directory");
        let e = dir!(db, root, |l, tx| l.remove(&tx, &["a"]).await);
        assert!(
            matches!(e, Err(DirectoryError::DoesNotExist)),
            "{on}: {e:?}"
        );
        assert!(
            !dir!(db, root, |l, tx| l.remove_if_exists(&tx, &["a"]).await).expect("remove"),
            "{on}"
        );
        assert!(
            dir!(db, root, |l, tx| l.remove_if_exists(&tx, &["c"]).await).expect("remove"),
            "{on}"
        );
        let names = dir!(db, root, |l, tx| l.list(&tx, &[] as &[&str]).await).expect("list");
        assert_eq!(names, ["typed"], "{on}");
    });
}

#[test]
fn partitions_and_manual_prefixes() {
    dual::run("rust-fdb-directory", LIMIT, |t: Target| async move {
        let (db, on) = (&t.db, t.name);
        let root = layer_of(&t, false);

        let part = dir!(db, root, |l, tx| l
            .create(&tx, &["part"], None, Some(Layer(b"partition")))
            .await)
        .expect("create a partition");
        let DirectoryOutput::Partition(p) = &part else {
            panic!("{on}: a partition layer makes a partition: {part:?}");
        };
        assert_eq!(part.layer(), b"partition", "{on}");
        assert!(
            matches!(part.subspace(), Err(DirectoryError::PartitionRoot)),
            "{on}"
        );
        let pprefix = p.prefix().to_vec();
        // Inside the partition, prefixes come from its own layer, inside its prefix.
        let inner = {
            let part = part.clone();
            directory::run(db, move |tx| {
                let part = part.clone();
                async move { part.create_or_open(&tx, &["x", "y"], None, None).await }
            })
            .await
            .expect("create inside")
        };
        assert_eq!(inner.path(), ["part", "x", "y"], "{on}");
        let iprefix = prefix_of(&inner);
        assert!(iprefix.starts_with(&pprefix) && iprefix != pprefix, "{on}");
        // The same directory through the root layer's path.
        let same = dir!(db, root, |l, tx| l
            .open(&tx, &["part", "x", "y"], None)
            .await)
        .expect("open through the root");
        assert_eq!(prefix_of(&same), iprefix, "{on}");
        assert_eq!(
            dir!(db, root, |l, tx| l.list(&tx, &["part"]).await).expect("list"),
            ["x"],
            "{on}"
        );
        // Moves stay inside a partition.
        let e = dir!(db, root, |l, tx| l
            .move_to(&tx, &["part", "x"], &["outside"])
            .await);
        assert!(
            matches!(e, Err(DirectoryError::MoveBetweenPartitions)),
            "{on}: {e:?}"
        );
        dir!(db, root, |l, tx| l
            .move_to(&tx, &["part", "x"], &["part", "z"])
            .await)
        .expect("a move inside the partition");
        // A partition has no manual prefixes.
        let e = {
            let part = part.clone();
            directory::run(db, move |tx| {
                let part = part.clone();
                async move {
                    part.create(&tx, &["m"], Some(ManualPrefix(b"\x01")), None)
                        .await
                }
            })
            .await
        };
        assert!(
            matches!(
                e,
                Err(DirectoryError::PrefixInPartition | DirectoryError::ManualPrefixesNotAllowed)
            ),
            "{on}: {e:?}"
        );
        // Removing the partition removes everything in it.
        dir!(db, root, |l, tx| l.remove(&tx, &["part"]).await).expect("remove");
        let (b, e) = (pprefix.clone(), {
            let mut e = pprefix.clone();
            e.push(0xff);
            e
        });
        let left = db
            .run(move |tx| {
                let (b, e) = (b.clone(), e.clone());
                async move { tx.get_range(&b, &e, 1).await }
            })
            .await
            .expect("read");
        assert!(left.is_empty(), "{on}: the partition's keys are gone");

        // A layer that allows manual prefixes.
        let manual = layer_of(&t, true);
        let mut want = manual.content_subspace().bytes().to_vec();
        want.extend_from_slice(b"mine");
        let w: &[u8] = &want;
        let d = dir!(db, manual, |l, tx| l
            .create(&tx, &["m"], Some(ManualPrefix(w)), None)
            .await)
        .expect("create with a manual prefix");
        assert_eq!(prefix_of(&d), want, "{on}");
        let e = dir!(db, manual, |l, tx| l
            .create(&tx, &["n"], Some(ManualPrefix(w)), None)
            .await);
        assert!(matches!(e, Err(DirectoryError::PrefixInUse)), "{on}: {e:?}");
        let longer: &[u8] = &[want.as_slice(), b"2"].concat();
        let e = dir!(db, manual, |l, tx| l
            .create(&tx, &["n"], Some(ManualPrefix(longer)), None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::PrefixInUse)),
            "{on}: {e:?} inside another"
        );
        let in_nodes: &[u8] = &[manual.node_subspace().bytes(), b"x"].concat();
        let e = dir!(db, manual, |l, tx| l
            .create(&tx, &["n"], Some(ManualPrefix(in_nodes)), None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::PrefixInUse)),
            "{on}: {e:?} (the metadata's prefix)"
        );
        // create_or_open with a prefix and a layer (foundationdb-rs's order): the prefix and
        // the layer land where they belong; opening it again ignores the prefix.
        let mut want_o = manual.content_subspace().bytes().to_vec();
        want_o.extend_from_slice(b"opened");
        let wo: &[u8] = &want_o;
        let d = dir!(db, manual, |l, tx| l
            .create_or_open(&tx, &["o"], Some(ManualPrefix(wo)), Some(Layer(b"olayer")))
            .await)
        .expect("create_or_open with a manual prefix");
        assert_eq!(
            (prefix_of(&d), d.layer()),
            (want_o.clone(), &b"olayer"[..]),
            "{on}"
        );
        let d = dir!(db, manual, |l, tx| l
            .create_or_open(&tx, &["o"], Some(ManualPrefix(b"elsewhere")), None)
            .await)
        .expect("create_or_open of the existing directory");
        assert_eq!(
            prefix_of(&d),
            want_o,
            "{on}: the existing prefix, not the one given"
        );
        let e = dir!(db, root, |l, tx| l
            .create_or_open(&tx, &["o2"], Some(ManualPrefix(wo)), None)
            .await);
        assert!(
            matches!(e, Err(DirectoryError::ManualPrefixesNotAllowed)),
            "{on}: {e:?}"
        );
        // Allocated prefixes of that layer do not collide with the manual one.
        let d = dir!(db, manual, |l, tx| l
            .create(&tx, &["auto"], None, None)
            .await)
        .expect("an allocated prefix");
        let p = prefix_of(&d);
        assert!(!p.starts_with(&want) && !want.starts_with(&p), "{on}");
    });
}

#[test]
fn high_contention_allocator() {
    dual::run("rust-fdb-directory-hca", LIMIT, |t: Target| async move {
        let (db, on) = (&t.db, t.name);
        let mut base = t.prefix.clone();
        base.extend_from_slice(b"hca/");
        let hca = HighContentionAllocator::new(&Subspace::from_bytes(base));

        // One after another: all distinct, short (small integers while few are taken).
        let mut seen = BTreeSet::new();
        for _ in 0..60 {
            let hca = hca.clone();
            let p = directory::run(db, move |tx| {
                let hca = hca.clone();
                async move { hca.allocate(&tx).await }
            })
            .await
            .expect("allocate");
            assert!(p.len() <= 3, "{on}: {p:?}");
            assert!(seen.insert(p), "{on}: allocated twice");
        }

        // Concurrently, from transactions that conflict with each other: still distinct.
        let tasks: Vec<_> = (0..24)
            .map(|_| {
                let (db, hca) = (db.clone(), hca.clone());
                tokio::spawn(async move {
                    directory::run(&db, move |tx| {
                        let hca = hca.clone();
                        async move { hca.allocate(&tx).await }
                    })
                    .await
                })
            })
            .collect();
        for task in tasks {
            let p = task.await.expect("task").expect("allocate");
            assert!(
                seen.insert(p),
                "{on}: a concurrent allocation was handed out twice"
            );
        }

        // Directories created concurrently get distinct prefixes, none inside another.
        let root = layer_of(&t, false);
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (db, root) = (db.clone(), root.clone());
                tokio::spawn(async move {
                    dir!(&db, root, |l, tx| l
                        .create(&tx, &["hca", &format!("d{i}")], None, None)
                        .await)
                    .map(|d| prefix_of(&d))
                })
            })
            .collect();
        let mut prefixes = Vec::new();
        for task in tasks {
            prefixes.push(task.await.expect("task").expect("create"));
        }
        for (i, a) in prefixes.iter().enumerate() {
            for b in &prefixes[i + 1..] {
                assert!(
                    !a.starts_with(b) && !b.starts_with(a),
                    "{on}: {a:?} / {b:?}"
                );
            }
        }
        let names = dir!(db, root, |l, tx| l.list(&tx, &["hca"]).await).expect("list");
        assert_eq!(names.len(), 16, "{on}");
    });
}

// ----- the layout shared with the Python binding (real cluster only) -----

const PY: &str = r#"
import sys, json
import fdb
fdb.api_version(730)
cluster, base, step = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
db = fdb.open(cluster)
dl = fdb.DirectoryLayer(node_subspace=fdb.Subspace(rawPrefix=base + b'\xfe'),
                        content_subspace=fdb.Subspace(rawPrefix=base))
out = {}
if step == 'create':
    a = dl.create_or_open(db, ('py', 'a'))
    db[a.pack(('k',))] = b'from python'
    out['a'] = a.key().hex()
    out['layered'] = dl.create(db, ('py', 'layered'), layer=b'pylayer').key().hex()
    part = dl.create(db, ('py', 'part'), layer=b'partition')
    out['inner'] = part.create_or_open(db, ('inner',)).key().hex()
    out['many'] = [dl.create(db, ('py', 'many', str(i))).key().hex() for i in range(20)]
else:
    a = dl.open(db, ('rs', 'a'))
    out['a'] = a.key().hex()
    out['value'] = db[a.pack(('k',))].hex()
    l = dl.open(db, ('rs', 'layered'))
    out['layered'] = l.key().hex()
    out['layer'] = l.get_layer().hex()
    part = dl.open(db, ('rs', 'part'))
    out['part_layer'] = part.get_layer().hex()
    out['inner'] = dl.open(db, ('rs', 'part', 'inner')).key().hex()
    out['list'] = dl.list(db, ('rs',))
    out['inner_list'] = part.list(db)
    out['many'] = [dl.open(db, ('rs', 'many', str(i))).key().hex() for i in range(20)]
print(json.dumps(out))
"#;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// Runs the Python side; `None` (with a notice) if the binding or libfdb_c is missing.
fn python(cluster: &std::path::Path, base: &[u8], step: &str) -> Option<serde_json::Value> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PY)
        .arg(cluster)
        .arg(hex(base))
        .arg(step)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            Some(serde_json::from_slice(&o.stdout).expect("the Python side's JSON"))
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains("ModuleNotFoundError") || err.contains("Unable to locate") {
                None
            } else {
                panic!("the Python side failed: {err}");
            }
        }
        Err(_) => None,
    }
}

fn python_available() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import fdb; fdb.api_version(730); import fdb.directory_impl",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn python_layout_compatibility() {
    let Some((path, cf)) = dual::real_cluster_file() else {
        eprintln!("NOTICE: directory python_layout_compatibility skipped: no FDB_CLUSTER_FILE");
        return;
    };
    if !python_available() {
        if std::env::var_os("FDB_SHARED_DIR").is_some() {
            panic!("FDB_SHARED_DIR is set but the Python binding (foundationdb==7.3.77) or libfdb_c is missing");
        }
        eprintln!(
            "NOTICE: directory python_layout_compatibility skipped: no Python binding \
             (pip install foundationdb==7.3.77) or libfdb_c"
        );
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let base = dual::random_prefix("rust-fdb-directory-py");
    let _clear = dual::ClearOnDrop::prefix(cf, &base);
    rt.block_on(async {
        let db = Database::open(Some(&path)).expect("open");
        let mut nodes = base.clone();
        nodes.push(0xfe);
        let root = DirectoryLayer::new(
            Subspace::from_bytes(nodes),
            Subspace::from_bytes(base.clone()),
            false,
        );

        // Python first: our layer reads what it made, and allocates around it.
        let py = python(&path, &base, "create").expect("the Python side");
        let a = dir!(&db, root, |l, tx| l.open(&tx, &["py", "a"], None).await).expect("open py/a");
        assert_eq!(hex(&prefix_of(&a)), py["a"].as_str().unwrap());
        let k = a.subspace().expect("subspace").pack(&("k",));
        let v = db
            .run(move |tx| {
                let k = k.clone();
                async move { tx.get(&k).await }
            })
            .await
            .expect("read");
        assert_eq!(v.as_deref(), Some(&b"from python"[..]));
        let l = dir!(&db, root, |l, tx| l
            .open(&tx, &["py", "layered"], None)
            .await)
        .expect("open");
        assert_eq!(l.layer(), b"pylayer");
        assert_eq!(hex(&prefix_of(&l)), py["layered"].as_str().unwrap());
        let part = dir!(&db, root, |l, tx| l.open(&tx, &["py", "part"], None).await).expect("open");
        assert!(matches!(part, DirectoryOutput::Partition(_)), "{part:?}");
        let inner = dir!(&db, root, |l, tx| l
            .open(&tx, &["py", "part", "inner"], None)
            .await)
        .expect("open inside Python's partition");
        assert_eq!(hex(&prefix_of(&inner)), py["inner"].as_str().unwrap());
        let names = dir!(&db, root, |l, tx| l.list(&tx, &["py"]).await).expect("list");
        assert_eq!(names, ["a", "layered", "many", "part"]);
        let mut prefixes: BTreeSet<Vec<u8>> = py["many"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| unhex(p.as_str().unwrap()))
            .collect();
        assert_eq!(prefixes.len(), 20);

        // Ours: Python reads it, and both allocators' prefixes stay apart.
        let a = dir!(&db, root, |l, tx| l
            .create_or_open(&tx, &["rs", "a"], None, None)
            .await)
        .expect("create rs/a");
        let k = a.subspace().expect("subspace").pack(&("k",));
        db.run(move |tx| {
            let k = k.clone();
            async move {
                tx.set(&k, b"from rust");
                Ok(())
            }
        })
        .await
        .expect("write");
        let l = dir!(&db, root, |l, tx| l
            .create(&tx, &["rs", "layered"], None, Some(Layer(b"rslayer")))
            .await)
        .expect("create with a layer");
        let part = dir!(&db, root, |l, tx| l
            .create(&tx, &["rs", "part"], None, Some(Layer(b"partition")))
            .await)
        .expect("create a partition");
        let inner = {
            let part = part.clone();
            directory::run(&db, move |tx| {
                let part = part.clone();
                async move { part.create_or_open(&tx, &["inner"], None, None).await }
            })
            .await
            .expect("create inside")
        };
        let mut many = Vec::new();
        for i in 0..20 {
            let d = dir!(&db, root, |l, tx| l
                .create(&tx, &["rs", "many", &i.to_string()], None, None)
                .await)
            .expect("create");
            many.push(prefix_of(&d));
        }
        let py = python(&path, &base, "read").expect("the Python side");
        assert_eq!(py["a"].as_str().unwrap(), hex(&prefix_of(&a)));
        assert_eq!(py["value"].as_str().unwrap(), hex(b"from rust"));
        assert_eq!(py["layered"].as_str().unwrap(), hex(&prefix_of(&l)));
        assert_eq!(py["layer"].as_str().unwrap(), hex(b"rslayer"));
        assert_eq!(py["part_layer"].as_str().unwrap(), hex(b"partition"));
        assert_eq!(py["inner"].as_str().unwrap(), hex(&prefix_of(&inner)));
        assert_eq!(
            py["list"],
            serde_json::json!(["a", "layered", "many", "part"])
        );
        assert_eq!(py["inner_list"], serde_json::json!(["inner"]));
        let theirs: Vec<String> = py["many"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect();
        assert_eq!(theirs, many.iter().map(|p| hex(p)).collect::<Vec<_>>());
        for p in many {
            assert!(prefixes.insert(p), "a prefix both allocators handed out");
        }
    });
}
