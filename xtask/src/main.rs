//! `cargo xtask`: build, serve and test kvlab (the alias lives in `.cargo/config.toml`).
//!
//! ```text
//! cargo xtask build            wasm32 release builds (page: scalar, simd128; upload module) + bindings into www/pkg*/
//! cargo xtask dist             build, then assemble www/ into dist/ (a relocatable static site)
//! cargo xtask serve [--port N] dist, then serve dist/ on http://127.0.0.1:N/ (default 8000)
//! cargo xtask test             fmt, clippy, native tests, wasm build + dist, browser tests
//! cargo xtask bench [page|model|core|wasm] performance benchmarks (benches/README.md)
//! ```
//!
//! Everything the steps need that a fresh machine lacks (the wasm32 target, node packages,
//! Chromium) is installed by the step that needs it, and said so on the terminal.

mod bench;
mod first_view;
mod fuzz;
mod pipeline;
mod serve;
mod site;
mod train;
mod wasm;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Errors are reported as a message and a non-zero exit; they carry their own context.
pub type Result<T, E = Box<dyn Error>> = std::result::Result<T, E>;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  build             build the wasm modules (release: the page scalar and simd128, the upload module) and their www/pkg*/ bindings
  dist              build, then assemble the static site into dist/
  serve [--port N]  dist, then serve dist/ on http://127.0.0.1:N/ (default port 8000)
  test              fmt check, clippy, native tests, wasm build + dist, browser tests;
                    ends with one line `N passed, M failed`
  fuzz [--seconds N] [TARGET...]  bounded cargo-fuzz run of each target (default 30 s; nightly)
  bench [page|model|core|wasm|train]  performance benchmarks (page in headless Chromium, kernels vs
                    numpy, kernels in wasm vs native, the trainer against candle); see benches/README.md
  train [--resume] [OPTIONS]  train the byte-level model into www/model/: with no options the
                    committed model's two-stage recipe (about 100 min on 2 cores, resumable: run it
                    again), with options one run checkpointed in target/train/run/ (--resume
                    continues it; docs/model.md); never run by test
  help              this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode> {
    let ws = Workspace::locate();
    let (cmd, rest) = match args.split_first() {
        Some((cmd, rest)) => (cmd.as_str(), rest),
        None => {
            eprintln!("{USAGE}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match cmd {
        "build" => {
            no_args(cmd, rest)?;
            wasm::build(&ws)?;
            println!("(sizes of www/; `cargo xtask dist` minifies the js and reports dist/)");
            print!("{}", wasm::size_report(&ws.www())?);
            Ok(ExitCode::SUCCESS)
        }
        "dist" => {
            no_args(cmd, rest)?;
            site::dist(&ws)?;
            Ok(ExitCode::SUCCESS)
        }
        "serve" => {
            let port = parse_port(rest)?;
            site::dist(&ws)?;
            let server = serve::start(&ws.dist(), "/", port, false)?;
            println!("serving {} at {}", ws.dist().display(), server.url("/"));
            println!("press Ctrl-C to stop");
            server.join();
            Ok(ExitCode::SUCCESS)
        }
        "test" => {
            no_args(cmd, rest)?;
            pipeline::test(&ws)
        }
        "fuzz" => fuzz::run(&ws, rest),
        "bench" => bench::run(&ws, rest),
        "train" => {
            train::run(&ws, rest)?;
            Ok(ExitCode::SUCCESS)
        }
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}").into()),
    }
}

fn no_args(cmd: &str, rest: &[String]) -> Result<()> {
    match rest.first() {
        None => Ok(()),
        Some(a) => Err(format!("`{cmd}` takes no arguments, got `{a}`\n\n{USAGE}").into()),
    }
}

/// Parses `[--port N]` / `[--port=N]`.
fn parse_port(rest: &[String]) -> Result<u16> {
    let mut port = 8000;
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let value = if arg == "--port" || arg == "-p" {
            it.next()
                .ok_or("`--port` needs a value, e.g. `--port 8000`")?
                .as_str()
        } else if let Some(v) = arg.strip_prefix("--port=") {
            v
        } else {
            return Err(format!("unknown argument `{arg}` for `serve`\n\n{USAGE}").into());
        };
        port = value
            .parse()
            .map_err(|_| format!("port `{value}` is not a number in 0..=65535"))?;
    }
    Ok(port)
}

/// Where things are: the repository root and the folders the commands read and write.
pub struct Workspace {
    /// The repository root (parent of `xtask/`).
    pub root: PathBuf,
}

impl Workspace {
    fn locate() -> Self {
        let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = xtask.parent().unwrap_or(xtask).to_path_buf();
        Self { root }
    }

    /// Cargo's target folder (honours `CARGO_TARGET_DIR`).
    pub fn target(&self) -> PathBuf {
        match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => self.root.join(dir),
            None => self.root.join("target"),
        }
    }

    /// The page's sources.
    pub fn www(&self) -> PathBuf {
        self.root.join("www")
    }

    /// The assembled static site.
    pub fn dist(&self) -> PathBuf {
        self.root.join("dist")
    }

    /// A command that runs in the repository root.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.root);
        c
    }

    /// `cargo` as the one that runs us (`$CARGO`), so nested builds use the same toolchain.
    pub fn cargo(&self) -> Command {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        self.command(cargo)
    }
}

/// Runs a command with inherited output; an error names the command and its exit status.
pub fn run_status(cmd: &mut Command) -> Result<()> {
    let shown = show(cmd);
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})").into())
    }
}

/// A command line for messages.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn port_flag() {
        assert_eq!(parse_port(&[]).unwrap(), 8000);
        assert_eq!(parse_port(&strings(&["--port", "9000"])).unwrap(), 9000);
        assert_eq!(parse_port(&strings(&["--port=0"])).unwrap(), 0);
        assert!(parse_port(&strings(&["--port"])).is_err());
        assert!(parse_port(&strings(&["--port", "70000"])).is_err());
        assert!(parse_port(&strings(&["--verbose"])).is_err());
    }
}
