//! The crate's layers point down only. Each top-level module has a rank;
//! a module may name (in `use crate::...` lines or in paths written
//! `crate::x::...`) only modules of a lower rank. Whole files are read;
//! only `#[cfg(test)]` items (found by their braces) are skipped, since
//! tests may reach anywhere.
//!
//! From the bottom: checksums, byte formats (an IPv4 header carries its
//! RFC 1071 checksum), units and measurements; the
//! record every measurement becomes; pure analysis over records; the
//! testbed; the endpoint programs; the formats results go out in; the runner, launcher and placements;
//! the agent; the report's page and figure toolkit. That is the shared
//! core, and it names no experiment. Above it `experiments/`, one folder
//! per experiment: each names the core and itself, never another
//! experiment, except a declared variant naming the experiment it varies.
//! Then the lab, which runs them all, and the command line.
//!
//! Inside every folder no circle: its files and subfolders (its `mod.rs`
//! one of them) may not name each other round, through `crate::`,
//! `super::` or `self::` paths or a `mod.rs`'s own children, so each
//! folder's shared types have one home. (A path inside an inline module
//! is read from its file's module: write such paths from `crate::`.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const LAYERS: [&str; 18] = [
    "checksum",
    "wire",
    "units",
    "measure",
    "model",
    "record",
    "analysis",
    "testbed",
    "fleet",
    "endpoint",
    "export",
    "controller",
    "agent",
    "report",
    "options",
    "experiments",
    "lab",
    "cli",
];

/// The first layer above the shared core.
const ABOVE_CORE: &str = "experiments";

/// Experiments that vary another and may name it: (variant, varied).
const VARIANTS: [(&str, &str); 7] = [
    // `netlab sweep stream`: the same transfer over a grid of record sizes.
    ("sweep", "stream"),
    // `netlab ablate stream`: the same transfer over a factorial of features.
    ("ablate", "stream"),
    // `netlab ablate rpm`: the same responsiveness test over a factorial of its fixes.
    ("ablate", "rpm"),
    // The 1987 terminal test: login's servers and sessions, typing out instead of in.
    ("output", "login"),
    // `netlab mesh`: stream, rpc and rpm cells between every pair of agents.
    ("mesh", "stream"),
    ("mesh", "rpc"),
    ("mesh", "rpm"),
];

/// Core files that still name an experiment while #30 moves each
/// experiment's pieces out of the core (its role out of the endpoint
/// dispatcher and the agent's policy, its sections out of the report
/// page): each with what names it. The list only shrinks.
const NOT_YET_MOVED: &[(&str, &str)] = &[];

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

/// `text` without its `#[cfg(test)]` items: from the attribute to the end
/// of the item it marks (its closing brace, or a `;` before any brace).
/// Braces inside strings and comments are rare enough in this crate's
/// test items that counting them all is exact here; a test below pins it.
fn without_test_items(text: &str) -> String {
    let mut kept = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    kept.push_str(rest);
    kept
}

/// Every path a source text names through `crate::`, as its first two
/// segments (`experiments::rpc`), groups expanded (`crate::{a, b::c}`).
fn named_paths(text: &str) -> BTreeSet<Vec<String>> {
    let code = without_test_items(text);
    // Comment lines dropped, the rest joined, so a group that rustfmt
    // spread over lines is read whole.
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ");
    let mut paths = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at..];
        let mut whole = BTreeSet::new();
        expand_whole(rest, Vec::new(), &mut whole);
        paths.extend(whole.into_iter().filter_map(|path| {
            let named: Vec<String> = path.into_iter().skip(1).take(2).collect();
            (!named.is_empty()).then_some(named)
        }));
        rest = &rest["crate::".len()..];
    }
    paths
}

/// The top-level module of a file under `src`, and its experiment if it
/// is in a folder `experiments/<name>/`. Files directly in `experiments/`
/// are the registry (its list, its page), which names them all.
fn place(relative: &Path) -> (String, Option<String>) {
    let parts: Vec<String> = relative
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    let experiment = (parts[0] == ABOVE_CORE && parts.len() > 2).then(|| parts[1].clone());
    (parts[0].clone(), experiment)
}

/// Every reference that breaks the layering, as "file: what it names".
fn violations(src: &Path, not_yet_moved: &[(&str, &str)]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let (top, experiment) = place(relative);
        let Some(own) = rank(&top) else {
            continue; // lib.rs, main.rs
        };
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = relative.display().to_string();
        for path in named_paths(&text) {
            let name = &path[0];
            if *name == top {
                // Within experiments/: its own folder, or the experiment a
                // declared variant varies.
                if let (Some(mine), Some(other)) = (&experiment, path.get(1))
                    && other != mine
                    && !VARIANTS.contains(&(mine.as_str(), other.as_str()))
                {
                    found.push(format!(
                        "{shown}: experiment {mine} names experiment {other}"
                    ));
                }
                continue;
            }
            match rank(name) {
                Some(other) if other > own => {
                    let excused = other >= rank(ABOVE_CORE).unwrap()
                        && not_yet_moved
                            .iter()
                            .any(|(f, what)| *f == shown && *what == path.join("::"));
                    if !excused {
                        found.push(format!(
                            "{shown}: {top} names {}, a layer above it",
                            path.join("::")
                        ));
                    }
                }
                None => found.push(format!(
                    "{shown}: names crate::{name}, which is in no layer (add it to LAYERS)"
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
    let found = violations(&src, NOT_YET_MOVED);
    assert!(
        found.is_empty(),
        "layers pointing up:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_excused_reference_still_exists() {
    // An entry of NOT_YET_MOVED that no file needs any more is removed, so
    // the list says what is left to move.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let strict = violations(&src, &[]);
    for (file, what) in NOT_YET_MOVED {
        let line = format!(
            "{file}: {} names {what}, a layer above it",
            file.split('/').next().unwrap()
        );
        assert!(
            strict.contains(&line),
            "NOT_YET_MOVED lists {file} -> {what}, which no longer holds: remove it"
        );
    }
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
    // both forms and in nested groups, test items are skipped by their
    // braces (code after them is read), and experiments may name only
    // themselves and what they vary.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("wire")).unwrap();
    std::fs::write(
        src.join("wire/x.rs"),
        "use crate::units::parse_size;\nfn f() { crate::report::tables::num(1.0); }\nuse crate::{checksum, cli::Output};\n#[cfg(test)]\nmod tests { use crate::controller::runner; fn g() { if true { } } }\n#[cfg(test)]\nuse crate::lab;\nfn h() { crate::experiments::rpc::x(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("cli.rs"), "use crate::wire::rpc;\n").unwrap();
    std::fs::create_dir_all(src.join("experiments/sweep")).unwrap();
    std::fs::create_dir_all(src.join("experiments/rpc")).unwrap();
    std::fs::write(
        src.join("experiments/sweep/cell.rs"),
        "use crate::experiments::{stream::cell, sweep::dips};\nuse crate::record::Record;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("experiments/rpc/cell.rs"),
        "use crate::experiments::{rpc::record, cksum::{role, record}};\nuse crate::lab::run;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("experiments/mod.rs"),
        "pub mod rpc;\nuse crate::experiments::rpc::cell;\n",
    )
    .unwrap();
    // The registry's own files name every experiment.
    std::fs::write(
        src.join("experiments/page.rs"),
        "use crate::experiments::{rpc::report, stream::report};\n",
    )
    .unwrap();
    let found = violations(src, &[]);
    assert_eq!(
        found,
        [
            "experiments/rpc/cell.rs: experiment rpc names experiment cksum",
            "experiments/rpc/cell.rs: experiments names lab::run, a layer above it",
            "wire/x.rs: wire names cli::Output, a layer above it",
            "wire/x.rs: wire names experiments::rpc, a layer above it",
            "wire/x.rs: wire names report::tables, a layer above it",
            "wire/x.rs: wire names units::parse_size, a layer above it",
        ]
    );
    // A listed exception excuses exactly that reference.
    let found = violations(src, &[("wire/x.rs", "experiments::rpc")]);
    assert!(!found.iter().any(|f| f.contains("experiments::rpc")));
}

/// Every path a file names from `crate::`, `super::` or `self::`, and
/// (in a folder's mod.rs) from one of its own child modules, resolved against the
/// file's `module` into a path from the crate root, whole.
fn resolved_paths(text: &str, module: &[String], children: &[String]) -> BTreeSet<Vec<String>> {
    let code = without_test_items(text);
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ");
    let mut raw = BTreeSet::new();
    let starts_word = |at: usize| {
        code[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
    };
    for (at, _) in code.char_indices() {
        let rest = &code[at..];
        let rooted = ["crate::", "super::", "self::"]
            .iter()
            .any(|root| rest.starts_with(root));
        // In a folder's mod.rs, a path from one of its own children
        // (`child::item`, in a `use` or in code).
        let child = children
            .iter()
            .find(|c| rest.starts_with(&format!("{c}::")));
        if rooted && starts_word(at) {
            expand_whole(rest, Vec::new(), &mut raw);
        } else if child.is_some() && starts_word(at) {
            expand_whole(rest, vec!["self".to_string()], &mut raw);
        }
    }
    raw.into_iter()
        .filter_map(|path| {
            let mut base: Vec<String> = module.to_vec();
            let mut rest = path.as_slice();
            match rest.first().map(String::as_str) {
                Some("crate") => {
                    base.clear();
                    rest = &rest[1..];
                }
                Some("self") => rest = &rest[1..],
                _ => {}
            }
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        })
        .collect()
}

/// The whole path of each item one reference names, starting at `text`
/// after `prefix`, groups expanded (`crate::{a, b::c}`).
fn expand_whole(text: &str, prefix: Vec<String>, paths: &mut BTreeSet<Vec<String>>) {
    if let Some(group) = text.strip_prefix('{') {
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand_whole(group[start..i].trim(), prefix.clone(), paths);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_whole(group[start..i].trim(), prefix.clone(), paths);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let name: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let leading = prefix
        .iter()
        .all(|s| s == "crate" || s == "super" || s == "self");
    if name.is_empty() || (name == "self" && !prefix.is_empty() && !leading) {
        if !prefix.is_empty() {
            paths.insert(prefix);
        }
        return;
    }
    let after = &text[name.len()..];
    let mut path = prefix;
    path.push(name);
    match after.strip_prefix("::") {
        Some(next) => expand_whole(next, path, paths),
        None => {
            paths.insert(path);
        }
    }
}

/// A file's module path under `src` (`experiments/stream/role.rs` is
/// `experiments::stream::role`, a folder's `mod.rs` the folder's).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The child modules of the folder module `folder` (its files and folders).
fn child_modules(src: &Path, folder: &[String]) -> Vec<String> {
    let dir = folder.iter().fold(src.to_path_buf(), |d, s| d.join(s));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            if e.path().is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs")
                    .filter(|n| *n != "mod")
                    .map(String::from)
            }
        })
        .collect()
}

/// Every circle among the files of one folder, as "folder/: a, b (a names
/// b, b names a)". A folder's units are its files and subfolders, its
/// `mod.rs` and the items it defines being `mod`; a unit names another
/// when any of its files names anything inside the other, through
/// `crate::`, `super::` or `self::`.
fn circles(src: &Path) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    // folder -> unit -> units it names
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let module = module_of(relative);
        if module.is_empty() || module == ["lib"] || module == ["main"] {
            continue;
        }
        let is_folder = relative.ends_with("mod.rs");
        let own_children = if is_folder {
            child_modules(src, &module)
        } else {
            Vec::new()
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for path in resolved_paths(&text, &module, &own_children) {
            let common = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
            if common == 0 {
                continue; // another top-level module: the layers' concern
            }
            let folder = &module[..common.min(module.len())];
            // A file module's own items, or its own path.
            if !is_folder && common == module.len() {
                continue;
            }
            let children = child_modules(src, folder);
            let unit_of = |m: &[String]| -> String {
                match m.get(folder.len()) {
                    Some(next) if children.contains(next) => next.clone(),
                    _ => "mod".to_string(),
                }
            };
            let (from, to) = (unit_of(&module), unit_of(&path));
            if from != to {
                graphs
                    .entry(folder.to_vec())
                    .or_default()
                    .entry(from)
                    .or_default()
                    .insert(to);
            }
        }
    }
    let mut found = Vec::new();
    for (folder, graph) in &graphs {
        let reaches = |from: &String| {
            let mut seen = BTreeSet::new();
            let mut next = vec![from.clone()];
            while let Some(at) = next.pop() {
                for to in graph.get(&at).into_iter().flatten() {
                    if seen.insert(to.clone()) {
                        next.push(to.clone());
                    }
                }
            }
            seen
        };
        let mut reported = BTreeSet::new();
        for unit in graph.keys() {
            if reported.contains(unit) || !reaches(unit).contains(unit) {
                continue;
            }
            // Its circle: every unit it reaches that reaches it back.
            let members: BTreeSet<String> = reaches(unit)
                .into_iter()
                .filter(|other| reaches(other).contains(unit))
                .collect();
            let edges: Vec<String> = members
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| members.contains(*b))
                        .map(move |b| format!("{a} names {b}"))
                })
                .collect();
            found.push(format!(
                "{}/: {} ({})",
                folder.join("/"),
                members.iter().cloned().collect::<Vec<_>>().join(", "),
                edges.join(", ")
            ));
            reported.extend(members);
        }
    }
    found
}

#[test]
fn no_folder_holds_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = circles(&src);
    assert!(
        found.is_empty(),
        "files that name each other (give their shared types one home):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_circle_check_sees_every_form_of_path() {
    // Two files naming each other through `super::` and `crate::`, a
    // folder's mod.rs naming a child it shares types with by a bare path
    // in its code, and a chain without a circle.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::write(src.join("a/mod.rs"), "pub mod x;\npub mod y;\npub mod b;\n").unwrap();
    std::fs::write(src.join("a/x.rs"), "use super::y::Y;\n").unwrap();
    std::fs::write(
        src.join("a/y.rs"),
        "fn f() { crate::a::x::g(); }\n#[cfg(test)]\nmod tests { use super::super::b::z; }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a/b/mod.rs"),
        "pub mod z;\npub mod w;\npub struct Shared;\nfn f() { z::g(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("a/b/z.rs"), "use super::{Shared, w};\n").unwrap();
    std::fs::write(src.join("a/b/w.rs"), "use crate::a::x::X;\n").unwrap();
    assert_eq!(
        circles(src),
        [
            "a/: x, y (x names y, y names x)",
            "a/b/: mod, z (mod names z, z names mod)",
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
         (at most {CLI_BEYOND_DECLARATIONS}): orchestration and analysis belong in controller/ and experiments/ \
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

/// Core files that name an experiment, each with why: the protocol
/// libraries are named for their protocols, which the experiments that
/// measure them share.
const NAMED_IN_CORE: &[(&str, &str, &str)] = &[
    (
        "endpoint/login/relay_fork.rs",
        "login",
        "the fork relay re-executes netlab as `netlab login session` (its per-connection process); that subcommand is declared beside `login serve`",
    ),
    (
        "endpoint/rpc/",
        "rpc",
        "the ONC RPC library (RFC 5531, XDR RFC 4506): server, client, rpcbind, named for its protocol",
    ),
    (
        "endpoint/login/",
        "login",
        "the remote-login library (TELNET RFC 854, rlogin RFC 1282, ptys, relays), named for its protocols",
    ),
    (
        "endpoint/rpm/",
        "rpm",
        "the responsiveness test's ends (draft-ietf-ippm-responsiveness-06: probes, load-generating connections, saturation), named for the draft's figure; its role keeps the name agents already serve (`rpm`), and login starts a load with it",
    ),
];

/// The experiments: the registry's folders.
fn experiment_names(src: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src.join(ABOVE_CORE))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// Where a core file names an experiment the way code picks one: a string
/// literal that is the name (`"rpc"`), or a path segment (`rpc::`, `::rpc`).
/// Comments and test items are not read.
fn names_in_core(src: &Path) -> Vec<(String, String)> {
    let names = experiment_names(src);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let (top, _) = place(relative);
        let Some(own) = rank(&top) else { continue };
        if own >= rank(ABOVE_CORE).unwrap() {
            continue;
        }
        let code: String = without_test_items(&std::fs::read_to_string(&file).unwrap())
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for name in &names {
            let literal = code.contains(&format!("\"{name}\""));
            let path = code.match_indices(&format!("{name}::")).any(|(at, _)| {
                !code[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            }) || code.match_indices(&format!("::{name}")).any(|(at, _)| {
                !code[at + 2 + name.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if literal || path {
                found.push((relative.display().to_string(), name.clone()));
            }
        }
    }
    found
}

#[test]
fn the_core_names_no_experiment() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = experiment_names(&src);
    assert!(names.contains(&"rpc".to_string()), "{names:?}");
    let unexplained: Vec<String> = names_in_core(&src)
        .into_iter()
        .filter(|(file, name)| {
            !NAMED_IN_CORE
                .iter()
                .any(|(prefix, n, _)| file.starts_with(prefix) && n == name)
        })
        .map(|(file, name)| format!("{file} names {name}"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "the core names experiments (move the code into the experiment's folder, or list it in NAMED_IN_CORE with why):\n{}",
        unexplained.join("\n")
    );
}

#[test]
fn the_name_check_sees_literals_and_paths_only() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("experiments/rpc")).unwrap();
    std::fs::create_dir_all(src.join("report")).unwrap();
    std::fs::write(
        src.join("report/a.rs"),
        "fn f() { g(\"rpc\"); }\n// \"rpc\" in a comment\n",
    )
    .unwrap();
    std::fs::write(src.join("report/b.rs"), "use crate::x::rpc::y;\n").unwrap();
    std::fs::write(
        src.join("report/c.rs"),
        "fn rpc_time() {}\nstruct RpcPlan;\nconst S: &str = \"rpcs\";\n#[cfg(test)]\nmod tests { const T: &str = \"rpc\"; }\n",
    )
    .unwrap();
    assert_eq!(
        names_in_core(src),
        [
            ("report/a.rs".to_string(), "rpc".to_string()),
            ("report/b.rs".to_string(), "rpc".to_string())
        ]
    );
}

/// The longest a function may be, in lines from its `fn` to its closing
/// brace (#63: a function that long does several things; split it on its
/// seams).
const LONGEST_FUNCTION: usize = 150;

/// How many functions may be over 100 lines (#63: 60 when it was filed,
/// 30 since 2026-12-03 evening).
const MOST_OVER_100: usize = 30;

/// Functions over [`LONGEST_FUNCTION`] lines that were there when the
/// check came (2026-12-03), each at most as long as it was then. The list
/// only shrinks: split one, and take it off.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

/// Every function outside test items with its file (under `src/`), name
/// and length in lines: from a line that declares it to the first line
/// after it that is its indentation and a closing brace (rustfmt's shape;
/// a declaration ending in `;` has no body and is skipped).
fn function_lengths(src: &Path) -> Vec<(String, String, usize)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let text = without_test_items(&std::fs::read_to_string(&path).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some((indent, name)) = declares_fn(line) else {
                continue;
            };
            let closing = format!("{indent}}}");
            if let Some(end) = lines[i..].iter().position(|l| *l == closing) {
                found.push((file.clone(), name.to_string(), end + 1));
            }
        }
    }
    found
}

/// A line's indentation and the function it declares, if it declares one:
/// `pub(crate) async fn name(` and the like.
fn declares_fn(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    let indent = &line[..line.len() - rest.len()];
    let mut rest = rest;
    if let Some(after) = rest.strip_prefix("pub") {
        rest = match after.strip_prefix('(') {
            Some(scoped) => scoped.split_once(") ")?.1,
            None => after.strip_prefix(' ')?,
        };
    }
    for qualifier in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| (indent, &name[..end]))
}

#[test]
fn the_function_count_reads_every_form_of_declaration() {
    assert_eq!(declares_fn("fn a() {"), Some(("", "a")));
    assert_eq!(
        declares_fn("    pub fn run_cell("),
        Some(("    ", "run_cell"))
    );
    assert_eq!(
        declares_fn("pub(crate) async unsafe fn x<T>()"),
        Some(("", "x"))
    );
    assert_eq!(declares_fn("    // fn not_this()"), None);
    assert_eq!(declares_fn("let f = |x| fn_like(x);"), None);
    assert_eq!(declares_fn("pub struct Fn;"), None);
}

#[test]
fn no_function_is_longer_than_150_lines_but_the_listed_and_none_grows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lengths = function_lengths(&src);
    // The check sees functions it must: the figure renderer (a dozen lines
    // over its parts), its marks, and iperf3's run, among the longest left.
    for (file, name, at_least) in [
        ("report/figures.rs", "render_svg", 10),
        ("report/figures.rs", "draw_marks", 60),
        ("endpoint/iperf3/mod.rs", "run", 120),
    ] {
        assert!(
            lengths
                .iter()
                .any(|(f, n, len)| f == file && n == name && *len >= at_least),
            "the count does not see {file}: {name}"
        );
    }
    let mut over: Vec<String> = Vec::new();
    for (file, name, len) in &lengths {
        if *len <= LONGEST_FUNCTION {
            continue;
        }
        match LONG_FUNCTIONS
            .iter()
            .find(|(f, n, _)| f == file && n == name)
        {
            Some((_, _, was)) if len <= was => {}
            Some((_, _, was)) => over.push(format!(
                "{file}: {name} is {len} lines, longer than the {was} it was listed at"
            )),
            None => over.push(format!(
                "{file}: {name} is {len} lines (at most {LONGEST_FUNCTION}: split it on its seams)"
            )),
        }
    }
    assert!(over.is_empty(), "{}", over.join("\n"));
    // And few long ones: at most MOST_OVER_100 between 100 and 150 lines.
    let mut long: Vec<String> = lengths
        .iter()
        .filter(|(_, _, len)| *len > 100)
        .map(|(file, name, len)| format!("{file}: {name} ({len})"))
        .collect();
    long.sort();
    assert!(
        long.len() <= MOST_OVER_100,
        "{} functions over 100 lines, at most {MOST_OVER_100}: split one on its seams\n{}",
        long.len(),
        long.join("\n")
    );
    // A listed function that was split comes off the list.
    let gone: Vec<String> = LONG_FUNCTIONS
        .iter()
        .filter(|(f, n, _)| {
            !lengths
                .iter()
                .any(|(file, name, len)| file == f && name == n && *len > LONGEST_FUNCTION)
        })
        .map(|(f, n, _)| format!("{f}: {n}"))
        .collect();
    assert!(
        gone.is_empty(),
        "no longer over {LONGEST_FUNCTION} lines, take them off LONG_FUNCTIONS: {}",
        gone.join(", ")
    );
}
