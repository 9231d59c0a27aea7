//! The crate's layers point down only. Each top-level module has a rank;
//! a module may name (in `use crate::...` lines or in paths written
//! `crate::x::...`) only modules of a lower rank. Test code (from the first
//! `#[cfg(test)]` of a file) is not checked: tests may reach anywhere.
//!
//! From the bottom: byte formats, checksums, units and measurements; the
//! record every measurement becomes; pure analysis over records; the
//! testbed; the endpoint programs; the experiments that run them; reports;
//! the command line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const LAYERS: [&str; 13] = [
    "wire",
    "checksum",
    "units",
    "measure",
    "model",
    "record",
    "analysis",
    "testbed",
    "endpoint",
    "experiment",
    "agent",
    "report",
    "cli",
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|&m| m == module)
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The top-level modules a source text names through `crate::`.
fn named_modules(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut names = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // use crate::{a, b::c};
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        names.insert(name);
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        }
    }
    names
}

/// Every `crate::` reference from a module to one of the same or a higher
/// rank, as "file: names module".
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(own) = rank(&top) else {
            continue; // lib.rs, main.rs
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for name in named_modules(&text) {
            if name == top {
                continue;
            }
            match rank(&name) {
                Some(other) if other > own => found.push(format!(
                    "{}: {top} names {name}, a layer above it",
                    relative.display()
                )),
                None => found.push(format!(
                    "{}: names crate::{name}, which is in no layer (add it to LAYERS)",
                    relative.display()
                )),
                _ => {}
            }
        }
    }
    found
}

#[test]
fn every_module_names_only_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(
        found.is_empty(),
        "layers pointing up:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ") {
            let name = name.trim_end_matches(';');
            assert!(rank(name).is_some(), "{name} has no layer in LAYERS");
        }
    }
}

#[test]
fn the_check_sees_an_upward_import() {
    // The scanner itself: a low module naming a higher one is caught, in
    // both forms, and test code is not read.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("wire")).unwrap();
    std::fs::write(
        src.join("wire/x.rs"),
        "use crate::units::parse_size;\nfn f() { crate::report::tables::num(1.0); }\nuse crate::{checksum, cli::Output};\n#[cfg(test)]\nmod tests { use crate::experiment::runner; }\n",
    )
    .unwrap();
    std::fs::write(src.join("cli.rs"), "use crate::wire::rpc;\n").unwrap();
    let found = violations(src);
    assert_eq!(
        found,
        [
            "wire/x.rs: wire names checksum, a layer above it",
            "wire/x.rs: wire names cli, a layer above it",
            "wire/x.rs: wire names report, a layer above it",
            "wire/x.rs: wire names units, a layer above it",
        ]
    );
}

/// The most lines `cli/` may hold beyond its option declarations (the
/// architecture issue's "about 1,500"): arguments into plans, running them,
/// printing. Declarations are the command line itself and stay in `cli/`
/// however many options the experiments grow.
const CLI_BEYOND_DECLARATIONS: usize = 1_500;

/// Lines of `text` and, of those, the lines of clap declarations: each
/// `#[derive(..)]` naming `Parser`, `Args`, `Subcommand` or `ValueEnum`,
/// the `///` help above it and the item's body to its closing brace.
fn declaration_lines(text: &str) -> (usize, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let is_declaration = |line: &str| {
        let line = line.trim_start();
        line.starts_with("#[derive(")
            && ["Parser", "Args", "Subcommand", "ValueEnum"]
                .iter()
                .any(|name| {
                    line.split(|c: char| !c.is_alphanumeric())
                        .any(|word| word == *name)
                })
    };
    let (mut declared, mut i) = (0, 0);
    while i < lines.len() {
        if !is_declaration(lines[i]) {
            i += 1;
            continue;
        }
        let mut first = i;
        while first > 0 && lines[first - 1].trim_start().starts_with("///") {
            first -= 1;
        }
        let (mut depth, mut opened, mut last) = (0i64, false, i);
        for (at, line) in lines.iter().enumerate().skip(i) {
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            opened |= line.contains('{');
            last = at;
            if opened && depth == 0 {
                break;
            }
        }
        declared += last - first + 1;
        i = last + 1;
    }
    (lines.len(), declared)
}

#[test]
fn cli_is_thin_beyond_its_option_declarations() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli"),
        &mut files,
    );
    let (mut total, mut declared) = (0, 0);
    for file in &files {
        let (lines, declarations) = declaration_lines(&std::fs::read_to_string(file).unwrap());
        total += lines;
        declared += declarations;
    }
    let beyond = total - declared;
    eprintln!("cli/: {total} lines, {declared} of them option declarations, {beyond} beyond");
    assert!(
        beyond <= CLI_BEYOND_DECLARATIONS,
        "cli/ holds {beyond} lines beyond its {declared} lines of option declarations \
         (at most {CLI_BEYOND_DECLARATIONS}): orchestration and analysis belong in experiment/ \
         and analysis/, presentation in report/"
    );
}

#[test]
fn the_count_sees_declarations_and_nothing_else() {
    let text = "use clap::Args;\n\
                /// Help for the struct.\n\
                #[derive(Debug, Args)]\n\
                pub struct X {\n\
                    /// An option.\n\
                    #[arg(long, default_value = \"{}\")]\n\
                    pub a: String,\n\
                }\n\
                #[derive(Debug, Clone)]\n\
                struct NotAnOption { b: u8 }\n\
                #[derive(clap::ValueEnum, Clone)]\n\
                enum Kind { One, Two }\n\
                fn run() {\n\
                }\n";
    // 7 lines of X with its help, 2 of Kind; the rest is not declaration.
    assert_eq!(declaration_lines(text), (14, 9));
}
