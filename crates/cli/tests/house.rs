//! The house rules of the workspace, checked on its source (no build of
//! anything else): which crate may depend on which, no circle between the
//! files of a crate, no long file without a reason at its top, and a
//! header in every crate's lib.rs saying what it owns and must not know.
//! CONTRIBUTING.md explains the rules; this test keeps them true.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Lines a source file may have before it must say at its top why it is
/// long (a `// Long file, ...: why` comment in its first 20 lines).
const MAX_FILE_LINES: usize = 800;

/// Each crate (folder under crates/) and the millrace crates it may depend
/// on (normal dependencies). The order is the layering: a crate depends
/// only on crates listed before it, and on fewer than all of them where a
/// boundary says so.
const LAYERS: &[(&str, &[&str])] = &[
    ("errcode", &[]),
    ("sys", &[]),
    ("io", &["sys"]),
    ("metrics", &[]),
    ("redo", &["sys", "io", "metrics"]),
    ("buf", &["sys", "io", "metrics", "redo"]),
    ("btree", &["buf"]),
    (
        "trx",
        &["errcode", "sys", "io", "metrics", "redo", "buf", "btree"],
    ),
    // The SQL layer sees the engine's tables as keys and values: no pages,
    // no log.
    ("sql", &["errcode", "sys", "io", "metrics", "trx"]),
    // The server speaks the protocol over the SQL layer; it does not drive
    // storage layers directly.
    ("server", &["errcode", "sys", "io", "metrics", "trx", "sql"]),
    // Benchmarks measure single layers, so they may use any of them.
    (
        "bench",
        &[
            "errcode", "sys", "io", "metrics", "redo", "buf", "btree", "trx",
        ],
    ),
    // The `millrace` binary: a thin command line over the libraries.
    (
        "cli",
        &["errcode", "sys", "io", "metrics", "trx", "server", "bench"],
    ),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

fn crate_dirs() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = fs::read_dir(workspace_root().join("crates"))
        .expect("crates/ exists")
        .map(|e| e.expect("readable crates/").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    out.sort();
    out
}

/// The millrace crates named in the [dependencies] table of a Cargo.toml
/// (folder names: `millrace-trx` -> `trx`, `millrace` -> `cli`).
fn millrace_dependencies(cargo_toml: &str) -> BTreeSet<String> {
    let mut in_deps = false;
    let mut deps = BTreeSet::new();
    for line in cargo_toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['.', '=', ' ']).next().unwrap_or("");
        if let Some(rest) = name.strip_prefix("millrace-") {
            deps.insert(rest.to_string());
        } else if name == "millrace" {
            deps.insert("cli".to_string());
        }
    }
    deps
}

#[test]
fn crates_depend_only_downward_through_their_boundaries() {
    let allowed: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for (name, dir) in crate_dirs() {
        let Some(ok) = allowed.get(name.as_str()) else {
            wrong.push(format!(
                "crates/{name} is not in LAYERS (tests/house.rs): say what it may depend on"
            ));
            continue;
        };
        let toml = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        for dep in millrace_dependencies(&toml) {
            if !ok.contains(&dep.as_str()) {
                wrong.push(format!(
                    "crates/{name} depends on {dep}, which its layer may not"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_crate_says_what_it_owns_and_must_not_know() {
    let mut wrong = Vec::new();
    for (name, dir) in crate_dirs() {
        let root = ["src/lib.rs", "src/main.rs"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file());
        let Some(root) = root else { continue };
        let text = fs::read_to_string(&root).unwrap();
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
        let has = |word: &str| header.iter().any(|l| l.contains(word));
        if !has("Owns") || !has("Must not know") {
            wrong.push(format!(
                "crates/{name}/{}: its first lines must say what it Owns and what it Must not know about",
                root.strip_prefix(&dir).unwrap().display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every .rs file under a crate's src/ and tests/, with its text.
fn rust_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("src"), dir.join("tests"), dir.join("benches")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = fs::read_to_string(&p).unwrap();
                out.push((p, text));
            }
        }
    }
    out.sort();
    out
}

fn is_test_file(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "tests")
        || path.file_name().is_some_and(|f| f == "tests.rs")
}

#[test]
fn long_files_say_why_at_their_top() {
    let mut wrong = Vec::new();
    for (_, dir) in crate_dirs() {
        for (path, text) in rust_files(&dir) {
            if is_test_file(&path) {
                continue;
            }
            // A file's own unit tests do not count against its length.
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => &text[..at],
                None => &text[..],
            };
            let lines = code.lines().count();
            let says_why = text.lines().take(20).any(|l| {
                l.trim_start_matches('/')
                    .trim_start_matches('!')
                    .trim_start()
                    .starts_with("Long file")
            });
            if lines > MAX_FILE_LINES && !says_why {
                wrong.push(format!(
                    "{}: {lines} lines (over {MAX_FILE_LINES}): split it by job, or say why at its top in a `// Long file, one job: why` comment",
                    path.strip_prefix(workspace_root()).unwrap_or(&path).display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One crate's modules: module path ("" for the crate root, "a::b") -> file.
struct Modules {
    files: BTreeMap<String, PathBuf>,
    /// The code of each module's file, without comments, strings and its
    /// `#[cfg(test)]` module.
    code: BTreeMap<String, String>,
}

impl Modules {
    fn of(src: &Path) -> Modules {
        let mut files = BTreeMap::new();
        let mut code = BTreeMap::new();
        let root = if src.join("lib.rs").is_file() {
            src.join("lib.rs")
        } else {
            src.join("main.rs")
        };
        let mut stack = vec![(String::new(), root)];
        while let Some((module, file)) = stack.pop() {
            let text = strip(&fs::read_to_string(&file).unwrap());
            // Where this module's children live: beside lib.rs/main.rs/mod.rs,
            // else in the folder named after the file.
            let base = if matches!(
                file.file_name().and_then(|f| f.to_str()),
                Some("lib.rs" | "main.rs" | "mod.rs")
            ) {
                file.parent().unwrap().to_path_buf()
            } else {
                file.with_extension("")
            };
            for child in declared_modules(&text) {
                let path = if module.is_empty() {
                    child.clone()
                } else {
                    format!("{module}::{child}")
                };
                let a = base.join(format!("{child}.rs"));
                let b = base.join(&child).join("mod.rs");
                if a.is_file() {
                    stack.push((path, a));
                } else if b.is_file() {
                    stack.push((path, b));
                }
            }
            files.insert(module.clone(), file);
            code.insert(module, text);
        }
        Modules { files, code }
    }

    /// A facade holds only module declarations and re-exports: a table of
    /// contents, whose edges to its children are not dependencies.
    fn is_facade(&self, module: &str) -> bool {
        statements(&self.code[module]).iter().all(|s| {
            let s = s
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            s.starts_with("mod ") || s.starts_with("use ") || s.starts_with("extern crate")
        })
    }

    /// The file a path used in `from` names: the deepest module of the path,
    /// followed through the re-exports of facades to the file that defines it.
    fn resolve(&self, from: &str, path: &[String]) -> Option<String> {
        let mut segs: Vec<String> = Vec::new();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => rest = &rest[1..],
            Some("super") | Some("self") => {
                segs = if from.is_empty() {
                    vec![]
                } else {
                    from.split("::").map(String::from).collect()
                };
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "super" => {
                            segs.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            // A 2018-style relative path: `use child::Item` in a module
            // that declares `mod child`.
            Some(first) => {
                let child = if from.is_empty() {
                    first.to_string()
                } else {
                    format!("{from}::{first}")
                };
                if !self.files.contains_key(&child) {
                    return None;
                }
                segs = if from.is_empty() {
                    vec![]
                } else {
                    from.split("::").map(String::from).collect()
                };
            }
            None => return None,
        }
        let mut module = segs.join("::");
        for (i, seg) in rest.iter().enumerate() {
            let child = if module.is_empty() {
                seg.clone()
            } else {
                format!("{module}::{seg}")
            };
            if self.files.contains_key(&child) {
                module = child;
                continue;
            }
            // `seg` is an item of `module`: if that is a facade, find the
            // child it re-exports the item from.
            if self.is_facade(&module) {
                if let Some(target) = self.reexport_source(&module, seg) {
                    let mut full = target;
                    full.extend_from_slice(&rest[i + 1..]);
                    return self.resolve(&module, &full);
                }
            }
            break;
        }
        Some(module)
    }

    /// The path a facade's `pub use` re-exports `name` from.
    fn reexport_source(&self, facade: &str, name: &str) -> Option<Vec<String>> {
        for s in statements(&self.code[facade]) {
            let Some(tree) = s.strip_prefix("pub use ") else {
                continue;
            };
            for path in expand_use(tree) {
                let last = path.last().map(String::as_str);
                let alias = path.iter().rposition(|p| p == "as");
                let exported = match alias {
                    Some(a) => path.get(a + 1).map(String::as_str),
                    None => last,
                };
                if exported == Some(name) || last == Some("*") {
                    let mut p = match alias {
                        Some(a) => path[..a].to_vec(),
                        None => path.clone(),
                    };
                    if p.last().is_some_and(|l| l == "*") {
                        p.pop();
                        p.push(name.to_string());
                    }
                    if !matches!(p[0].as_str(), "crate" | "self" | "super") {
                        p.insert(0, "self".into());
                    }
                    return Some(p);
                }
            }
        }
        None
    }

    /// Module -> the modules (files) its code uses.
    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges = BTreeMap::new();
        for (module, code) in &self.code {
            let mut to = BTreeSet::new();
            if !self.is_facade(module) {
                for path in paths_used(code) {
                    if let Some(target) = self.resolve(module, &path) {
                        if &target != module {
                            to.insert(target);
                        }
                    }
                }
            }
            edges.insert(module.clone(), to);
        }
        edges
    }
}

/// Removes comments, string and char literals and the `#[cfg(test)]`
/// module (a file's unit tests may use anything of their crate).
fn strip(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"'
            || (b[i] == b'r' && b.get(i + 1).is_some_and(|&c| c == b'"' || c == b'#'))
        {
            // Raw strings: r"..." or r#"..."#.
            if b[i] == b'r' {
                let mut hashes = 0;
                i += 1;
                while b[i] == b'#' {
                    hashes += 1;
                    i += 1;
                }
                i += 1;
                loop {
                    if i >= b.len() {
                        break;
                    }
                    if b[i] == b'"'
                        && b[i + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&c| c == b'#')
                            .count()
                            == hashes
                    {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            } else {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if b[i] == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal (not a lifetime).
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            let start = i;
            i += 1;
            while i < b.len() && !matches!(b[i], b'/' | b'"' | b'\'' | b'r') {
                i += 1;
            }
            out.push_str(&text[start..i]);
        }
    }
    out
}

/// Top-level statements of stripped code, roughly: `mod x;`, `use ...;`,
/// and the first words of every item (enough to tell a facade).
fn statements(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in code.chars() {
        match c {
            '{' => {
                depth += 1;
                current.push(c);
            }
            '}' => {
                depth -= 1;
                current.push(c);
                if depth == 0 {
                    out.push(std::mem::take(&mut current));
                }
            }
            ';' if depth == 0 => out.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    out.push(current);
    out.into_iter()
        .map(|s| {
            // Drop attributes (`#[cfg(...)]`, `#![...]`) in front of a statement.
            let mut s = s.trim();
            while s.starts_with('#') {
                let end = s.find(']').map_or(s.len(), |e| e + 1);
                s = s[end..].trim_start();
            }
            s.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn declared_modules(code: &str) -> Vec<String> {
    statements(code)
        .iter()
        .filter_map(|s| {
            let s = s
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            let name = s.strip_prefix("mod ")?;
            // `mod x { ... }` is inline: it has no file of its own.
            (!name.contains('{')).then(|| name.trim().to_string())
        })
        .collect()
}

/// Expands a use tree (`crate::a::{b, c::{d as e}}`) into its paths.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn parse(tokens: &[String], pos: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        while *pos < tokens.len() {
            let t = tokens[*pos].clone();
            *pos += 1;
            match t.as_str() {
                "::" => {}
                "{" => {
                    loop {
                        parse(tokens, pos, &path, out);
                        if *pos >= tokens.len() {
                            return;
                        }
                        let sep = tokens[*pos].clone();
                        *pos += 1;
                        if sep == "}" {
                            break;
                        }
                    }
                    return;
                }
                "," | "}" => {
                    *pos -= 1;
                    break;
                }
                _ => path.push(t),
            }
        }
        // `a::{self}` names `a` itself.
        if path.last().is_some_and(|l| l == "self") && path.len() > 1 {
            path.pop();
        }
        out.push(path);
    }
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut chars = tree.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' || c == '*' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        match c {
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                tokens.push("::".into());
            }
            '{' | '}' | ',' => tokens.push(c.to_string()),
            _ => {}
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    let mut out = Vec::new();
    let mut pos = 0;
    parse(&tokens, &mut pos, &[], &mut out);
    out
}

/// Every in-crate path the code uses: `use` trees and `crate::`/`super::`
/// paths written in expressions and types.
fn paths_used(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for s in statements(code) {
        let s2 = s
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if let Some(tree) = s2.strip_prefix("use ") {
            for p in expand_use(tree) {
                let p: Vec<String> = match p.iter().position(|x| x == "as") {
                    Some(a) => p[..a].to_vec(),
                    None => p,
                };
                // Paths from external crates do not resolve to a module of
                // this one and are dropped by `resolve`.
                out.push(p.into_iter().filter(|x| x != "*").collect());
            }
        }
    }
    // Paths in code: `crate::a::b`, `super::x`.
    let b = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue;
            }
            let mut end = at;
            while end < b.len()
                && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b':')
            {
                end += 1;
            }
            let path: Vec<String> = code[at..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            out.push(path);
        }
    }
    out
}

/// The cycles among modules: each strongly connected set of two or more.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative over a small graph.
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        on_stack: BTreeSet<&'a str>,
        stack: Vec<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on_stack: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_circle_between_the_files_of_a_crate() {
    let mut wrong = Vec::new();
    for (name, dir) in crate_dirs() {
        let modules = Modules::of(&dir.join("src"));
        let edges = modules.edges();
        for scc in cycles(&edges) {
            let files: Vec<String> = scc
                .iter()
                .map(|m| {
                    let f = &modules.files[m];
                    f.strip_prefix(&dir).unwrap_or(f).display().to_string()
                })
                .collect();
            let detail: Vec<String> = scc
                .iter()
                .map(|m| {
                    let uses: Vec<&str> = edges[m]
                        .iter()
                        .filter(|t| scc.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!(
                        "    {} uses {}",
                        if m.is_empty() { "(root)" } else { m },
                        uses.join(", ")
                    )
                })
                .collect();
            wrong.push(format!(
                "crates/{name}: a circle among {}\n{}",
                files.join(", "),
                detail.join("\n")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_checker_finds_a_circle_and_follows_reexports() {
    let dir = std::env::temp_dir().join(format!("house-check-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(src.join("b")).unwrap();
    fs::write(
        src.join("lib.rs"),
        "//! Owns: x\nmod a;\nmod b;\npub use b::Thing;\n",
    )
    .unwrap();
    fs::write(src.join("a.rs"), "use crate::Thing;\npub fn f() {}\n").unwrap();
    fs::write(src.join("b/mod.rs"), "mod inner;\npub use inner::Thing;\n").unwrap();
    fs::write(
        src.join("b/inner.rs"),
        "pub struct Thing;\nfn g() { crate::a::f(); let _ = \"crate::b::x\"; }\n",
    )
    .unwrap();
    let modules = Modules::of(&src);
    let edges = modules.edges();
    assert_eq!(edges["a"], BTreeSet::from(["b::inner".to_string()]));
    assert_eq!(edges["b::inner"], BTreeSet::from(["a".to_string()]));
    assert!(
        edges[""].is_empty(),
        "a facade's re-exports are no dependency"
    );
    assert_eq!(
        cycles(&edges),
        vec![vec!["a".to_string(), "b::inner".to_string()]]
    );
    fs::write(src.join("b/inner.rs"), "pub struct Thing;\n").unwrap();
    assert!(cycles(&Modules::of(&src).edges()).is_empty());
    fs::remove_dir_all(&dir).unwrap();
}

/// The headings of the design document, without a trailing " (`file.rs`)".
fn design_headings() -> Vec<String> {
    let text = fs::read_to_string(workspace_root().join("docs/design.md")).unwrap();
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            let h = l.trim_start_matches('#').trim();
            let h = match h.find(" (") {
                Some(at) if h.ends_with(')') => &h[..at],
                _ => h,
            };
            h.to_lowercase()
        })
        .collect()
}

#[test]
fn every_reference_from_code_to_the_design_names_a_heading() {
    let headings = design_headings();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (_, dir) in crate_dirs() {
        for (path, text) in rust_files(&dir) {
            // References are in comments, which wrap: read a reference
            // across line breaks.
            let joined: String = text
                .lines()
                .map(str::trim_start)
                .filter(|l| l.starts_with("//"))
                .map(|l| l.trim_start_matches('/').trim_start_matches('!').trim())
                .collect::<Vec<_>>()
                .join(" ");
            let mut from = 0;
            while let Some(at) = joined[from..].find("docs/design.md") {
                let at = from + at;
                from = at + "docs/design.md".len();
                let rest = joined[from..].trim_start_matches([',', ':', ' ']);
                let Some(quoted) = rest.strip_prefix('"') else {
                    wrong.push(format!(
                        "{}: names docs/design.md without a \"Heading\"",
                        path.strip_prefix(workspace_root())
                            .unwrap_or(&path)
                            .display()
                    ));
                    continue;
                };
                let Some(end) = quoted.find('"') else {
                    continue;
                };
                let heading = quoted[..end].to_lowercase();
                seen += 1;
                if !headings.contains(&heading) {
                    wrong.push(format!(
                        "{}: docs/design.md has no heading \"{}\"",
                        path.strip_prefix(workspace_root())
                            .unwrap_or(&path)
                            .display(),
                        &quoted[..end]
                    ));
                }
            }
        }
    }
    assert!(
        seen > 0,
        "no reference to docs/design.md found: is the scan broken?"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
