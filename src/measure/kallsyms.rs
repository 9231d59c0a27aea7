//! Kernel symbols from `/proc/kallsyms`: an address to the function it
//! falls in, for symbolising sampled kernel call chains (`--profile`, #17).
//!
//! Invariants: the table is sorted by address; a lookup returns the symbol
//! with the greatest address at or below the one asked, or nothing below
//! the first symbol. Without the privilege to see addresses the kernel
//! prints zeros (`kptr_restrict`); such a table is refused as unusable
//! rather than resolving every address to one name.

use std::io;

/// The kernel's text symbols, by address.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Reads this kernel's table.
    pub fn read() -> io::Result<Kallsyms> {
        Kallsyms::parse(&std::fs::read_to_string("/proc/kallsyms")?)
    }

    /// Parses the text of `/proc/kallsyms` ("ADDRESS TYPE NAME [MODULE]"),
    /// keeping text symbols (types t and T).
    pub fn parse(text: &str) -> io::Result<Kallsyms> {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let address = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                matches!(kind, "t" | "T").then(|| (address, name.to_string()))
            })
            .collect();
        if symbols.is_empty() {
            return Err(io::Error::other(
                "no text symbols in the kernel's symbol table",
            ));
        }
        if symbols.iter().all(|(address, _)| *address == 0) {
            return Err(io::Error::other(
                "the kernel hides its symbol addresses (kptr_restrict; run as root)",
            ));
        }
        symbols.sort_by_key(|(address, _)| *address);
        Ok(Kallsyms { symbols })
    }

    /// The function `address` falls in.
    pub fn lookup(&self, address: u64) -> Option<&str> {
        let index = self.symbols.partition_point(|(a, _)| *a <= address);
        index.checked_sub(1).map(|i| self.symbols[i].1.as_str())
    }

    /// The address of a symbol, by name (tests, and finding a function).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.symbols
            .iter()
            .find(|(_, n)| n == name)
            .map(|(address, _)| *address)
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffffffff81000000 T _stext
ffffffff81a00100 T tcp_sendmsg
ffffffff81a00000 t tcp_sendmsg_locked
ffffffff81b00000 D some_data
ffffffffc0001000 t veth_xmit\t[veth]
";

    #[test]
    fn an_address_resolves_to_the_function_it_falls_in() {
        let table = Kallsyms::parse(SAMPLE).unwrap();
        assert_eq!(table.len(), 4, "data symbols are left out");
        assert_eq!(table.lookup(0xffffffff81a00100), Some("tcp_sendmsg"));
        assert_eq!(table.lookup(0xffffffff81a000ff), Some("tcp_sendmsg_locked"));
        assert_eq!(table.lookup(0xffffffff81b00010), Some("tcp_sendmsg"));
        assert_eq!(table.lookup(0xffffffffc0001004), Some("veth_xmit"));
        assert_eq!(table.lookup(0x1000), None);
    }

    #[test]
    fn hidden_addresses_are_refused() {
        let hidden = "0000000000000000 T _stext\n0000000000000000 T tcp_sendmsg\n";
        let error = Kallsyms::parse(hidden).unwrap_err();
        assert!(error.to_string().contains("kptr_restrict"), "{error}");
        assert!(Kallsyms::parse("").is_err());
    }

    #[test]
    fn this_kernels_table_resolves_its_own_functions() {
        let Ok(table) = Kallsyms::read() else {
            // Not root: the addresses are hidden; the parse tests above
            // cover the logic and CI runs as root.
            return;
        };
        let address = table
            .address_of("tcp_sendmsg")
            .expect("tcp_sendmsg is in every kernel");
        assert_eq!(table.lookup(address), Some("tcp_sendmsg"));
        assert_eq!(table.lookup(address + 1), Some("tcp_sendmsg"));
    }
}
