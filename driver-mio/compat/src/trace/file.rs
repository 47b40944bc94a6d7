//! One process's trace files on disk, named, rolled and pruned as libfdb_c's
//! `FileTraceLogWriter` does: `<dir>/<process>.<unix time>.<6 random>.<width>.<index>.<ext>`,
//! a new index when a file would pass the roll size, the oldest files of the same process
//! deleted before each new one while the directory holds more than the total allowed, and
//! an optional suffix on the file being written, taken off when it is closed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::format::Format;

/// libfdb_c's `ZERO_LENGTH_FILE_PAD`: what each file counts for beyond its bytes when the
/// directory's total is added up.
const FILE_PAD: u64 = 1;

pub(crate) struct TraceFiles {
    dir: PathBuf,
    /// `trace.<ip>.<port or identifier>`: the start of every file of this process, the
    /// files the pruning may delete.
    process: String,
    /// `<dir>/<process>.<time>.<random>`.
    base: String,
    format: Format,
    suffix: String,
    roll_size: u64,
    max_logs_size: u64,
    index: u32,
    file: Option<File>,
    /// The open file's name, with the suffix.
    name: PathBuf,
    /// Bytes in the open file.
    written: u64,
}

pub(crate) struct Naming<'a> {
    pub(crate) dir: &'a str,
    pub(crate) process: String,
    pub(crate) stamp: u64,
    pub(crate) random: String,
    pub(crate) format: Format,
    pub(crate) suffix: &'a str,
    pub(crate) roll_size: u64,
    pub(crate) max_logs_size: u64,
}

impl TraceFiles {
    /// Opens the first file.
    pub(crate) fn open(n: Naming<'_>) -> io::Result<TraceFiles> {
        let dir = if n.dir.is_empty() { "." } else { n.dir };
        let base = format!("{dir}/{}.{}.{}", n.process, n.stamp, n.random);
        let mut files = TraceFiles {
            dir: PathBuf::from(dir),
            process: n.process,
            base,
            format: n.format,
            suffix: n.suffix.to_string(),
            roll_size: n.roll_size,
            max_logs_size: n.max_logs_size,
            index: 0,
            file: None,
            name: PathBuf::new(),
            written: 0,
        };
        files.next_file()?;
        Ok(files)
    }

    /// The file being written (with its suffix).
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.name
    }

    /// Writes one event, first starting a new file if this one would pass the roll size.
    pub(crate) fn write(&mut self, line: &str) -> io::Result<()> {
        let header = self.format.header().len() as u64;
        if self.roll_size > 0
            && self.written > header
            && self.written + line.len() as u64 > self.roll_size
        {
            self.close_file();
            self.next_file()?;
        }
        let file = self.file.as_mut().ok_or(io::ErrorKind::NotConnected)?;
        file.write_all(line.as_bytes())?;
        self.written += line.len() as u64;
        Ok(())
    }

    /// Ends the open file: its footer, then its final name.
    pub(crate) fn close(mut self) {
        self.close_file();
    }

    fn close_file(&mut self) {
        let Some(mut file) = self.file.take() else {
            return;
        };
        let _ = file.write_all(self.format.footer().as_bytes());
        drop(file);
        if !self.suffix.is_empty() {
            let _ = fs::rename(&self.name, without_suffix(&self.name, &self.suffix));
        }
    }

    /// Prunes the directory, then creates the next index's file (skipping names that are
    /// taken) and writes its header.
    fn next_file(&mut self) -> io::Result<()> {
        self.prune();
        loop {
            self.index += 1;
            let width = self.index.ilog10();
            let name = format!(
                "{}.{width}.{}.{}{}",
                self.base,
                self.index,
                self.format.extension(),
                self.suffix
            );
            match OpenOptions::new().write(true).create_new(true).open(&name) {
                Ok(mut file) => {
                    file.write_all(self.format.header().as_bytes())?;
                    self.written = self.format.header().len() as u64;
                    self.file = Some(file);
                    self.name = PathBuf::from(name);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives stray partial files of this process their final names, then deletes this
    /// process's oldest files (by name, newest kept first) beyond the total allowed. A total
    /// of 0 keeps every file.
    fn prune(&self) {
        if self.max_logs_size == 0 {
            return;
        }
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(&self.process))
            .collect();
        if !self.suffix.is_empty() {
            for n in names.iter_mut().filter(|n| n.ends_with(&self.suffix)) {
                let done = n[..n.len() - self.suffix.len()].to_string();
                if fs::rename(self.dir.join(&*n), self.dir.join(&done)).is_ok() {
                    *n = done;
                }
            }
        }
        let mut ours: Vec<String> = names
            .into_iter()
            .filter(|n| n.ends_with(self.format.extension()))
            .collect();
        ours.sort_unstable_by(|a, b| b.cmp(a));
        let mut total = 0u64;
        for n in ours {
            let path = self.dir.join(&n);
            if total < self.max_logs_size {
                total += fs::metadata(&path).map(|m| m.len()).unwrap_or(0) + FILE_PAD;
            } else {
                let _ = fs::remove_file(path);
            }
        }
    }
}

fn without_suffix(name: &Path, suffix: &str) -> PathBuf {
    let s = name.to_string_lossy();
    PathBuf::from(s.strip_suffix(suffix).unwrap_or(&s).to_string())
}

impl Drop for TraceFiles {
    fn drop(&mut self) {
        self.close_file();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fdb-compat-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn naming<'a>(dir: &'a str, roll_size: u64, max_logs_size: u64, suffix: &'a str) -> Naming<'a> {
        Naming {
            dir,
            process: "trace.127.0.0.1.42".into(),
            stamp: 1_796_662_486,
            random: "AbCdEf".into(),
            format: Format::Xml,
            suffix,
            roll_size,
            max_logs_size,
        }
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn rolls_at_the_roll_size_with_libfdb_c_names() {
        let dir = scratch("roll");
        let d = dir.to_str().unwrap();
        let mut f = TraceFiles::open(naming(d, 200, 0, "")).unwrap();
        let line = format!("{}\n", "q".repeat(59));
        for _ in 0..7 {
            f.write(&line).unwrap();
        }
        f.close();
        let names = listing(&dir);
        assert_eq!(
            names,
            [
                "trace.127.0.0.1.42.1796662486.AbCdEf.0.1.xml",
                "trace.127.0.0.1.42.1796662486.AbCdEf.0.2.xml",
                "trace.127.0.0.1.42.1796662486.AbCdEf.0.3.xml",
                "trace.127.0.0.1.42.1796662486.AbCdEf.0.4.xml",
            ]
        );
        for n in &names {
            let text = fs::read_to_string(dir.join(n)).unwrap();
            assert!(
                text.starts_with("<?xml version=\"1.0\"?>\r\n<Trace>\r\n"),
                "{n}"
            );
            assert!(text.ends_with("</Trace>\r\n"), "{n}");
        }
        // 32 bytes of header, then two 60-byte events fit in 200; a third starts a file.
        let first = fs::read_to_string(dir.join(&names[0])).unwrap();
        assert_eq!(first.matches('q').count(), 2 * 59);
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn the_tenth_file_widens_the_index() {
        let dir = scratch("width");
        let d = dir.to_str().unwrap();
        let mut f = TraceFiles::open(naming(d, 40, 0, "")).unwrap();
        for _ in 0..10 {
            f.write(&format!("{}\n", "y".repeat(20))).unwrap();
        }
        f.close();
        let names = listing(&dir);
        assert_eq!(names.len(), 10);
        assert!(names.contains(&"trace.127.0.0.1.42.1796662486.AbCdEf.1.10.xml".to_string()));
        assert!(names.contains(&"trace.127.0.0.1.42.1796662486.AbCdEf.0.9.xml".to_string()));
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn prunes_the_oldest_files_of_this_process_only() {
        let dir = scratch("prune");
        let d = dir.to_str().unwrap();
        // Older files of this process (an earlier run) and one of another process.
        for old in ["1700000000.aaaaaa.0.1", "1700000001.bbbbbb.0.1"] {
            fs::write(
                dir.join(format!("trace.127.0.0.1.42.{old}.xml")),
                [b'o'; 100],
            )
            .unwrap();
        }
        fs::write(
            dir.join("trace.127.0.0.1.43.1600000000.cccccc.0.1.xml"),
            [b'o'; 100],
        )
        .unwrap();
        // Newest first, files are kept while the total so far is under 100: the newest old
        // file (counted as 101) is kept, the older one deleted, the other process's left.
        let mut f = TraceFiles::open(naming(d, 0, 100, "")).unwrap();
        f.write("event\n").unwrap();
        f.close();
        assert_eq!(
            listing(&dir),
            [
                "trace.127.0.0.1.42.1700000001.bbbbbb.0.1.xml",
                "trace.127.0.0.1.42.1796662486.AbCdEf.0.1.xml",
                "trace.127.0.0.1.43.1600000000.cccccc.0.1.xml",
            ]
        );
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_partial_suffix_lasts_while_the_file_is_written() {
        let dir = scratch("partial");
        let d = dir.to_str().unwrap();
        fs::write(
            dir.join("trace.127.0.0.1.42.1700000000.zzzzzz.0.1.xml.tmp"),
            "x",
        )
        .unwrap();
        let mut f = TraceFiles::open(naming(d, 0, 1 << 20, ".tmp")).unwrap();
        f.write("event\n").unwrap();
        assert!(f.path().to_string_lossy().ends_with(".0.1.xml.tmp"));
        // A stray partial file of this process got its final name at the open.
        assert_eq!(
            listing(&dir),
            [
                "trace.127.0.0.1.42.1700000000.zzzzzz.0.1.xml",
                "trace.127.0.0.1.42.1796662486.AbCdEf.0.1.xml.tmp",
            ]
        );
        f.close();
        assert_eq!(
            listing(&dir)[1],
            "trace.127.0.0.1.42.1796662486.AbCdEf.0.1.xml"
        );
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = scratch("missing");
        let missing = dir.join("not-there");
        assert!(TraceFiles::open(naming(missing.to_str().unwrap(), 0, 0, "")).is_err());
        let _ = fs::remove_dir_all(dir);
    }
}
