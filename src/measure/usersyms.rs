//! netlab's own functions by address, for the profiler's user-space
//! samples: the running binary's ELF symbol table (read with `object`),
//! names demangled without their hashes (`rustc-demangle`).
//!
//! A sample carries a virtual address in one process; the process's
//! executable mapping (from the kernel's MMAP records, or `/proc/PID/maps`
//! for a process older than the profile) turns it into a file offset, and
//! the ELF program headers turn that into the link-time address the
//! symbol table uses. Every netlab process runs the same file, each at its
//! own base (position-independent, randomised).

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::io;
use std::path::{Path, PathBuf};

/// One executable mapping of a file in a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecMap {
    pub start: u64,
    pub len: u64,
    /// Offset in the file of `start`.
    pub pgoff: u64,
    pub path: PathBuf,
}

impl ExecMap {
    /// The file offset of `ip` when it falls in this mapping.
    pub fn file_offset(&self, ip: u64) -> Option<u64> {
        (ip >= self.start && ip - self.start < self.len).then(|| ip - self.start + self.pgoff)
    }
}

/// The executable mappings of `/proc/PID/maps` text (`r-xp` lines with a
/// path).
pub fn exec_maps(maps: &str) -> Vec<ExecMap> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let offset = fields.next()?;
            let path = fields.nth(2)?;
            if !perms.contains('x') || !path.starts_with('/') {
                return None;
            }
            let (lo, hi) = range.split_once('-')?;
            let start = u64::from_str_radix(lo, 16).ok()?;
            let end = u64::from_str_radix(hi, 16).ok()?;
            Some(ExecMap {
                start,
                len: end.checked_sub(start)?,
                pgoff: u64::from_str_radix(offset, 16).ok()?,
                path: PathBuf::from(path),
            })
        })
        .collect()
}

/// A binary's functions by link-time address.
#[derive(Debug, Clone, Default)]
pub struct UserSymbols {
    pub path: PathBuf,
    /// (address, size, demangled name), sorted by address.
    functions: Vec<(u64, u64, String)>,
    /// (file offset, size, address) of each loaded segment.
    segments: Vec<(u64, u64, u64)>,
}

impl UserSymbols {
    /// The symbols of the ELF file at `path`; an error when it has none
    /// (a stripped binary).
    pub fn read(path: &Path) -> io::Result<UserSymbols> {
        let data = std::fs::read(path)?;
        let file = object::File::parse(&*data).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        let mut functions: Vec<(u64, u64, String)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                Some((
                    s.address(),
                    s.size(),
                    format!("{:#}", rustc_demangle::demangle(name)),
                ))
            })
            .collect();
        if functions.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no symbol table (stripped?)", path.display()),
            ));
        }
        functions.sort_by_key(|f| f.0);
        let segments = file
            .segments()
            .filter_map(|s| {
                let (offset, size) = s.file_range();
                (size > 0).then_some((offset, size, s.address()))
            })
            .collect();
        Ok(UserSymbols {
            path: path.to_path_buf(),
            functions,
            segments,
        })
    }

    /// The function holding the byte at `offset` in the file.
    pub fn at_offset(&self, offset: u64) -> Option<&str> {
        let &(file_start, _, address) = self
            .segments
            .iter()
            .find(|(start, size, _)| offset >= *start && offset - start < *size)?;
        let address = offset - file_start + address;
        let index = self.functions.partition_point(|f| f.0 <= address);
        let (start, size, name) = self.functions.get(index.checked_sub(1)?)?;
        // A symbol without a size covers up to the next one.
        let within = if *size > 0 {
            address - start < *size
        } else {
            self.functions
                .get(index)
                .is_none_or(|next| address < next.0)
        };
        within.then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_the_executable_mappings() {
        let maps = "\
5581a0000000-5581a0100000 r--p 00000000 fd:01 123 /usr/bin/netlab
5581a0100000-5581a0400000 r-xp 00100000 fd:01 123 /usr/bin/netlab
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]
";
        let found = exec_maps(maps);
        assert_eq!(
            found,
            vec![ExecMap {
                start: 0x5581_a010_0000,
                len: 0x30_0000,
                pgoff: 0x10_0000,
                path: PathBuf::from("/usr/bin/netlab"),
            }]
        );
        assert_eq!(found[0].file_offset(0x5581_a010_0010), Some(0x10_0010));
        assert_eq!(found[0].file_offset(0x5581_a000_0010), None);
    }

    #[inline(never)]
    fn a_function_of_this_binary() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn this_binarys_own_function_is_found_by_its_running_address() {
        let symbols =
            UserSymbols::read(Path::new("/proc/self/exe")).expect("test binaries keep symbols");
        let maps = exec_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let ip = a_function_of_this_binary as *const () as u64 + 1;
        let map = maps
            .iter()
            .find(|m| m.file_offset(ip).is_some())
            .expect("the function is in an executable mapping");
        let name = symbols
            .at_offset(map.file_offset(ip).unwrap())
            .expect("a symbol");
        assert!(name.ends_with("a_function_of_this_binary"), "{name}");
        assert_eq!(a_function_of_this_binary(), 42);
    }
}
