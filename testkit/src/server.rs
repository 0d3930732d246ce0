//! One `redis-server` child process: how it is started, probed, signalled and reaped.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use redis::Value;

use crate::{Persistence, RawConnection, ReplyExt, TestkitError};

/// How often readiness and exit are polled.
const POLL: Duration = Duration::from_millis(10);
/// Time-out of one readiness probe; short, so that a probe stuck on a foreign listener
/// does not hide for long that our process has exited.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
/// How many log lines an error shows.
const LOG_TAIL_LINES: usize = 20;

/// Everything needed to (re)start one node; a restart reuses it unchanged.
#[derive(Clone)]
pub(crate) struct NodeSpec {
    pub(crate) index: usize,
    pub(crate) port: u16,
    pub(crate) dir: PathBuf,
    pub(crate) binary: PathBuf,
    pub(crate) password: Option<String>,
    pub(crate) persistence: Persistence,
    pub(crate) extra_args: Vec<String>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) ready_timeout: Duration,
    /// A configuration file, passed as the first argument (`redis-server <file> --opts`).
    /// Sentinels need one (they save their state in it), and so do data nodes whose
    /// `CONFIG REWRITE` should survive a restart. The command-line options still win.
    pub(crate) config_file: Option<PathBuf>,
}

impl fmt::Debug for NodeSpec {
    /// Like a derived `Debug`, without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeSpec")
            .field("index", &self.index)
            .field("port", &self.port)
            .field("dir", &self.dir)
            .field("binary", &self.binary)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("persistence", &self.persistence)
            .field("extra_args", &self.extra_args)
            .field("env", &self.env)
            .field("ready_timeout", &self.ready_timeout)
            .field("config_file", &self.config_file)
            .finish()
    }
}

impl NodeSpec {
    /// Redis' own log file.
    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// Where the process' stdout and stderr go (errors before the log file is open).
    fn stdio_path(&self) -> PathBuf {
        self.dir.join("stdio.log")
    }

    fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if let Some(file) = &self.config_file {
            args.push(file.clone().into_os_string());
        }
        let mut push = |name: &str, value: OsString| {
            args.push(format!("--{name}").into());
            args.push(value);
        };
        push("port", self.port.to_string().into());
        push("bind", "127.0.0.1".into());
        push("protected-mode", "no".into());
        push("daemonize", "no".into());
        push("dir", self.dir.clone().into_os_string());
        push("logfile", self.log_path().into_os_string());
        push("save", "".into());
        push("enable-debug-command", "yes".into());
        match self.persistence {
            Persistence::None => push("appendonly", "no".into()),
            Persistence::AofAlways => {
                push("appendonly", "yes".into());
                push("appendfsync", "always".into());
            }
        }
        if let Some(pw) = &self.password {
            push("requirepass", pw.into());
        }
        args.extend(self.extra_args.iter().map(OsString::from));
        args
    }

    /// The last lines of the node's log files, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        let mut out = String::new();
        for path in [self.log_path(), self.stdio_path()] {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(LOG_TAIL_LINES);
                for line in &lines[start..] {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        if out.is_empty() {
            out.push_str("(no log output)\n");
        }
        out
    }
}

/// Why a start failed: a lost port race can be retried with another port.
#[derive(Debug)]
pub(crate) enum StartError {
    PortInUse,
    Failed(TestkitError),
}

/// A running (or stopped by SIGSTOP) `redis-server`. Dropping it kills and reaps it.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    pid: Pid,
    node: usize,
    paused: bool,
}

impl Server {
    /// Spawns the server and waits until it answers `PING` as itself (its `INFO` pid is the
    /// child's pid, so a foreign server that won a port race is never mistaken for ours).
    pub(crate) fn start(spec: &NodeSpec) -> Result<Self, StartError> {
        let stdio = File::options()
            .create(true)
            .append(true)
            .open(spec.stdio_path())
            .map_err(|e| failed(TestkitError::os("opening the node's stdio log", e)))?;
        let stderr = stdio
            .try_clone()
            .map_err(|e| failed(TestkitError::os("duplicating a file handle", e)))?;
        let child = Command::new(&spec.binary)
            .args(spec.args())
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdio)
            .stderr(stderr)
            .spawn()
            .map_err(|source| {
                failed(TestkitError::Spawn {
                    node: spec.index,
                    binary: spec.binary.clone(),
                    source,
                })
            })?;
        let pid = i32::try_from(child.id())
            .map(Pid::from_raw)
            .map_err(|_| failed(TestkitError::os("reading the child pid", overflow())))?;
        let mut server = Self {
            child,
            pid,
            node: spec.index,
            paused: false,
        };
        server.wait_ready(spec)?;
        Ok(server)
    }

    fn wait_ready(&mut self, spec: &NodeSpec) -> Result<(), StartError> {
        let started = Instant::now();
        let mut last_reason = String::from("it never accepted a connection");
        loop {
            // Checked first and once more after the deadline: a probe can be stuck on a
            // foreign listener of the port while our process fails to bind it.
            if let Some(status) = self.exited() {
                if bind_failed(spec, self.child.id()) {
                    return Err(StartError::PortInUse);
                }
                return Err(self.not_ready(spec, started, format!("it exited with {status}")));
            }
            let remaining = spec.ready_timeout.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(self.not_ready(spec, started, last_reason));
            }
            match probe(spec, self.child.id(), remaining.min(PROBE_TIMEOUT)) {
                Ok(()) => return Ok(()),
                Err(reason) => last_reason = reason,
            }
            std::thread::sleep(POLL.min(spec.ready_timeout.saturating_sub(started.elapsed())));
        }
    }

    fn not_ready(&self, spec: &NodeSpec, started: Instant, reason: String) -> StartError {
        failed(TestkitError::NotReady {
            node: spec.index,
            port: spec.port,
            waited: started.elapsed(),
            reason,
            log_tail: spec.log_tail(),
        })
    }

    /// True while the process is stopped by [`pause`](Self::pause).
    pub(crate) fn is_paused(&self) -> bool {
        self.paused
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has exited (reaping it), `None` while it runs.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stops the process with SIGSTOP; idempotent.
    pub(crate) fn pause(&mut self) -> Result<(), TestkitError> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// Continues a stopped process with SIGCONT; harmless if it was not stopped.
    pub(crate) fn resume(&mut self) -> Result<(), TestkitError> {
        self.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// SIGTERM (Redis shuts down cleanly, fsyncing its AOF), then waits for the exit; kills
    /// the process if it has not exited within `timeout`.
    pub(crate) fn terminate(mut self, timeout: Duration) -> Result<(), TestkitError> {
        if self.paused {
            self.resume()?;
        }
        self.signal(Signal::SIGTERM)?;
        let started = Instant::now();
        while started.elapsed() < timeout {
            if self.exited().is_some() {
                return Ok(());
            }
            std::thread::sleep(POLL);
        }
        let node = self.node;
        drop(self);
        Err(TestkitError::StopTimeout {
            node,
            waited: timeout,
        })
    }

    fn signal(&self, signal: Signal) -> Result<(), TestkitError> {
        kill(self.pid, signal).map_err(|errno| {
            TestkitError::os(
                format!("sending {signal} to node {} (pid {})", self.node, self.pid),
                errno.into(),
            )
        })
    }
}

impl Drop for Server {
    /// SIGCONT (so a paused server never outlives us stopped, even if SIGKILL failed), then
    /// SIGKILL, then reap: no zombie is left behind. SIGKILL cannot be caught, so the `wait`
    /// returns promptly.
    fn drop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        let _ = kill(self.pid, Signal::SIGCONT);
        let _ = self.child.kill();
        if let Err(e) = self.child.wait() {
            tracing::warn!(node = self.node, pid = %self.pid, error = %e, "could not reap redis-server");
        }
    }
}

/// True if the log shows that process `pid` could not bind its port. Only lines of that
/// pid count: the log is appended to by every start of the node.
fn bind_failed(spec: &NodeSpec, pid: u32) -> bool {
    let prefix = format!("{pid}:");
    std::fs::read_to_string(spec.log_path()).is_ok_and(|log| {
        log.lines()
            .any(|l| l.starts_with(&prefix) && l.contains("Address already in use"))
    })
}

/// One readiness probe: connect, `AUTH`, `PING`, and check that the server is our child.
fn probe(spec: &NodeSpec, pid: u32, timeout: Duration) -> Result<(), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, spec.port));
    let mut conn = RawConnection::connect(addr, timeout).map_err(|e| e.to_string())?;
    if let Some(pw) = &spec.password
        && let Value::ServerError(e) = conn.call(&["AUTH", pw]).map_err(|e| e.to_string())?
    {
        return Err(format!("AUTH was refused: {e}"));
    }
    match conn.call(&["PING"]).map_err(|e| e.to_string())? {
        Value::SimpleString(s) if s == "PONG" => {}
        other => return Err(format!("PING answered {other:?}")),
    }
    let info = conn.call(&["INFO", "server"]).map_err(|e| e.to_string())?;
    match info.info_field("process_id") {
        Some(p) if p == pid.to_string() => Ok(()),
        other => Err(format!(
            "another server (pid {other:?}) answers on port {}",
            spec.port
        )),
    }
}

fn failed(e: TestkitError) -> StartError {
    StartError::Failed(e)
}

fn overflow() -> std::io::Error {
    std::io::Error::other("pid does not fit in a pid_t")
}
